"""The stack's alarms: each is a queue that should stay empty."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sqs as sqs
from constructs import Construct


def queue_not_empty_alarm(scope: Construct, construct_id: str, queue: sqs.IQueue, description: str) -> cloudwatch.Alarm:
    """Fires while any message is visible in ``queue``: nothing consumes it, so each one needs a person."""
    return cloudwatch.Alarm(
        scope,
        construct_id,
        alarm_description=description,
        metric=queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(5), statistic="Maximum"),
        threshold=0,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
