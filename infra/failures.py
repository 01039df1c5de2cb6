"""Where asynchronous invocations that failed are kept: one queue, and an alarm on it.

EventBridge (the schedules), the compaction trigger route and CloudFormation (the bootstrap
custom resource) invoke their functions asynchronously: the caller's part ends once Lambda has
accepted the event, so a function error is Lambda's to handle. Lambda retries it (at most twice)
and then drops it unless the function has an on-failure destination
(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html). ``keep``
configures that for one function: its retries, how old an event may get, and this queue as the
destination, so each failed run leaves a record (the event, the error, the request id) here.

A schedule's own target retry policy and dead-letter queue (``infra/compact.py``) cover only
what Lambda never accepted (a missing function, a permission denied, throttling of the invoke
call); those events land in this queue too, as EventBridge sends them.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.alarms import queue_not_empty_alarm
from infra.nag import acknowledge

#: SQS's longest retention: a failure stays long enough for someone to look.
RETENTION = Duration.days(14)


class AsyncFailures(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(
            self,
            "Queue",
            retention_period=RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        acknowledge(
            self.queue,
            "AwsSolutions-SQS3",
            "This queue is itself where failures end: the on-failure destination of asynchronous invocations and "
            "EventBridge's dead-letter queue for undelivered schedule events; nothing consumes it to redrive from.",
        )
        # Nothing consumes this queue: anything in it is a run that failed for good.
        self.alarm = queue_not_empty_alarm(
            self,
            "Alarm",
            self.queue,
            "An asynchronous run (schedule, compaction trigger, bootstrap) failed after its retries.",
        )

    def keep(self, function: lambda_.IFunction, *, retry_attempts: int, max_event_age: Duration) -> None:
        """Lambda's asynchronous settings for ``function``: retries, the oldest event it still runs,
        and this queue for what fails anyway."""
        function.configure_async_invoke(
            retry_attempts=retry_attempts,
            max_event_age=max_event_age,
            on_failure=destinations.SqsDestination(self.queue),
        )
