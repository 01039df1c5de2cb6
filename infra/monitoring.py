"""Alarms that reach someone, and a dashboard of the stack's metrics (docs/operations.md).

The alarms notify an SNS topic when the deploy names one (``alarm_topic_arn``) or an e-mail
address (``alarm_email``: the stack creates a topic and subscribes the address, which must confirm
it). Without either they still change state in the console. They fire on:

- a dead-letter queue that is not empty (the write queue's, and the failure queue of the
  asynchronous runs: schedules, the compaction trigger, the bootstrap; ``infra/failures.py``);
- the oldest queued write older than ``alarm_oldest_write_s``;
- any function's errors or throttles;
- API 5xx answers;
- the compaction backlog growing three hours in a row (the functions' ``arcs_compaction_partitions_waiting``).

The functions emit their own metrics as CloudWatch embedded metrics in a namespace named after the
stack (``ARCS_METRICS_NAMESPACE``): see ``arcs.metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from arcs import metrics
from infra.nag import acknowledge

PERIOD = Duration.minutes(5)
#: The compaction schedule runs every 15 minutes; its backlog is judged hour by hour.
BACKLOG_PERIOD = Duration.hours(1)
BACKLOG_GROWING_HOURS = 3


class ArcsMonitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        namespace: str,
        write_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        failure_queue: sqs.IQueue,
        queue_alarms: Sequence[cloudwatch.Alarm],
        functions: Mapping[str, lambda_.IFunction],
        api: apigw.RestApi,
        oldest_write_s: int,
        alarm_email: str | None = None,
        alarm_topic_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.namespace = namespace
        self.topic: sns.ITopic | None = None
        if alarm_topic_arn:
            self.topic = sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)
        elif alarm_email:
            topic = sns.Topic(self, "AlarmTopic", display_name="Arc Serverless alarms", enforce_ssl=True)
            topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
            acknowledge(
                topic,
                "AwsSolutions-SNS2",
                "alarm notifications carry no data, and CloudWatch cannot publish to a topic encrypted "
                "with the AWS-managed SNS key; a customer key would cost more than the alarms",
            )
            self.topic = topic

        self.alarms: list[cloudwatch.Alarm] = list(queue_alarms)
        self.oldest_write_alarm = cloudwatch.Alarm(
            self,
            "OldestWriteAlarm",
            alarm_description=f"a queued write has waited more than {oldest_write_s} s to be ingested",
            metric=write_queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
            threshold=oldest_write_s,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.alarms.append(self.oldest_write_alarm)
        for name, function in functions.items():
            for what, metric in (
                ("Errors", function.metric_errors(period=PERIOD, statistic="Sum")),
                ("Throttles", function.metric_throttles(period=PERIOD, statistic="Sum")),
            ):
                self.alarms.append(
                    cloudwatch.Alarm(
                        self,
                        f"{name.capitalize()}{what}Alarm",
                        alarm_description=f"the {name} function had {what.lower()}",
                        metric=metric,
                        threshold=0,
                        evaluation_periods=1,
                        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                    )
                )
        self.api_5xx_alarm = cloudwatch.Alarm(
            self,
            "Api5xxAlarm",
            alarm_description="the API answered 5xx",
            metric=api.metric_server_error(period=PERIOD, statistic="Sum"),
            threshold=0,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.alarms.append(self.api_5xx_alarm)
        waiting = self.metric(metrics.COMPACTION_WAITING, "Maximum", BACKLOG_PERIOD)
        self.backlog_alarm = cloudwatch.Alarm(
            self,
            "CompactionBacklogAlarm",
            alarm_description=(
                f"the partitions waiting for compaction grew {BACKLOG_GROWING_HOURS} hours in a row: "
                "compaction is not keeping up"
            ),
            metric=cloudwatch.MathExpression(
                expression="DIFF(waiting)",
                using_metrics={"waiting": waiting},
                period=BACKLOG_PERIOD,
                label="growth of the compaction backlog",
            ),
            threshold=0,
            evaluation_periods=BACKLOG_GROWING_HOURS,
            datapoints_to_alarm=BACKLOG_GROWING_HOURS,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.alarms.append(self.backlog_alarm)
        if self.topic is not None:
            action = actions.SnsAction(self.topic)
            for alarm in self.alarms:
                alarm.add_alarm_action(action)

        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", widgets=self._widgets(write_queue, dead_letter_queue, failure_queue, functions, api)
        )

    def metric(self, measure: metrics.Measure, statistic: str, period: Duration = PERIOD) -> cloudwatch.Metric:
        """One of the functions' own metrics without dimensions (``arcs.metrics``)."""
        return cloudwatch.Metric(
            namespace=self.namespace, metric_name=measure.name, statistic=statistic, period=period, label=measure.name
        )

    def by_labels(self, measure: metrics.Measure, statistic: str) -> cloudwatch.MathExpression:
        """Every series of a labelled measure (one per combination of its dimensions)."""
        schema = ",".join([self.namespace, *measure.labels])
        seconds = int(PERIOD.to_seconds())
        return cloudwatch.MathExpression(
            expression=f"SEARCH('{{{schema}}} MetricName=\"{measure.name}\"', '{statistic}', {seconds})",
            using_metrics={},
            label=measure.name,
            period=PERIOD,
        )

    def _widgets(
        self,
        write_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        failure_queue: sqs.IQueue,
        functions: Mapping[str, lambda_.IFunction],
        api: apigw.RestApi,
    ) -> list[list[cloudwatch.IWidget]]:
        def graph(
            title: str, left: Sequence[cloudwatch.IMetric], right: Sequence[cloudwatch.IMetric] = ()
        ) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=list(left), right=list(right), width=8, height=6)

        m = metrics
        return [
            [
                graph("Writes (requests by format and status)", [self.by_labels(m.WRITE_REQUESTS, "Sum")]),
                graph(
                    "Rows and bytes written",
                    [self.by_labels(m.WRITE_ROWS, "Sum")],
                    [self.by_labels(m.WRITE_BYTES, "Sum")],
                ),
                graph(
                    "Queue",
                    [write_queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")],
                    [write_queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum")],
                ),
            ],
            [
                graph(
                    "Write to queryable (s)",
                    [self.metric(m.WRITE_TO_QUERYABLE, "p50"), self.metric(m.WRITE_TO_QUERYABLE, "p99")],
                ),
                graph(
                    "Ingest",
                    [self.metric(m.INGEST_BATCHES, "Sum"), self.metric(m.INGEST_FILES, "Sum")],
                    [self.by_labels(m.INGEST_WRITES, "Sum")],
                ),
                graph(
                    "Dead letters and failed runs",
                    [
                        dead_letter_queue.metric_approximate_number_of_messages_visible(
                            period=PERIOD, statistic="Maximum"
                        ),
                        failure_queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                    ],
                ),
            ],
            [
                graph(
                    "Queries (by status)",
                    [self.by_labels(m.QUERIES, "Sum")],
                    [self.metric(m.RESULTS_HANDED_OFF, "Sum")],
                ),
                graph("Query duration p99 (s, by status)", [self.by_labels(m.QUERY_DURATION, "p99")]),
                graph("Bytes scanned (by status)", [self.by_labels(m.QUERY_BYTES_SCANNED, "Sum")]),
            ],
            [
                graph(
                    "Compaction backlog",
                    [self.metric(m.COMPACTION_WAITING, "Maximum"), self.metric(m.COMPACTION_JOBS, "Sum")],
                    [self.metric(m.COMPACTION_FILES_PER_PARTITION, "Maximum")],
                ),
                graph(
                    "Task runs (by status)",
                    [
                        self.by_labels(m.COMPACTION_RUNS, "Sum"),
                        self.by_labels(m.RETENTION_RUNS, "Sum"),
                        self.by_labels(m.CQ_RUNS, "Sum"),
                    ],
                    [self.metric(m.CQ_FAILURES, "Sum")],
                ),
                graph("Refused tokens", [self.metric(m.AUTH_FAILURES, "Sum")]),
            ],
            [
                graph(
                    "Function errors",
                    [f.metric_errors(period=PERIOD, statistic="Sum", label=n) for n, f in functions.items()],
                ),
                graph(
                    "Function throttles",
                    [f.metric_throttles(period=PERIOD, statistic="Sum", label=n) for n, f in functions.items()],
                ),
                graph(
                    "API",
                    [
                        api.metric_client_error(period=PERIOD, statistic="Sum"),
                        api.metric_server_error(period=PERIOD, statistic="Sum"),
                    ],
                    [api.metric_latency(period=PERIOD, statistic="p99")],
                ),
            ],
            [cloudwatch.AlarmStatusWidget(alarms=list(self.alarms), title="Alarms", width=24)],
        ]
