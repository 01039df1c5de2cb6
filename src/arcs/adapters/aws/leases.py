"""Leases and the compaction job journal on the leases table.

Work coordination, not catalog state: who holds a partition (compaction, retention and delete
rewrite it under its lease) and the jobs that held it, so a run finishes what a crashed one
started. Nothing here decides what data exists; that is the catalog's commit records.

| kind | pk | sk | attributes |
|---|---|---|---|
| lease | ``LEASE#{name}`` | ``#`` | owner, until (epoch seconds), expires_at (TTL) |
| compaction job | ``CJOBS`` / ``CJOBS#ACTIVE`` | ``{job_id}`` | the job as JSON text; history items expire (TTL) |
"""

from __future__ import annotations

import itertools
import json
import time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from arcs.adapters.aws.dynamo_table import NO_SORT, TTL_ATTRIBUTE, DynamoTable, expiry, from_item, item_key, to_item
from arcs.adapters.records import job_from_json, job_to_json
from arcs.ports import CompactionJob

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef

_JOBS = "CJOBS"
_ACTIVE_JOBS = "CJOBS#ACTIVE"


class DynamoLeases(DynamoTable):
    def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        now = time.time()
        values = {
            "pk": f"LEASE#{name}",
            "sk": NO_SORT,
            "owner": owner,
            "until": Decimal(str(round(now + ttl_s, 3))),
            TTL_ATTRIBUTE: int(now + ttl_s + 86_400),  # only tidies the table; ``until`` decides
        }
        return self._put(
            values,
            "attribute_not_exists(pk) OR #until < :now OR #owner = :owner",
            {"#until": "until", "#owner": "owner"},
            {":now": Decimal(str(round(now, 3))), ":owner": owner},
        )

    def release_lease(self, name: str, owner: str) -> None:
        self._delete_if(f"LEASE#{name}", NO_SORT, "#owner = :owner", {":owner": owner}, {"#owner": "owner"})

    def release_leases(self, holder: str) -> list[str]:
        """A scan of the table: meant for a holder's restart, never a request's path."""
        prefix = f"{holder}/"
        request: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "begins_with(pk, :lease) AND begins_with(#owner, :holder)",
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": to_item({":lease": "LEASE#", ":holder": prefix}),
            "ConsistentRead": True,
        }
        freed: list[str] = []
        while True:
            try:
                response = self.client.scan(**request)
            except (ClientError, BotoCoreError) as exc:
                raise self._fault("scan", exc) from exc
            for item in map(from_item, response.get("Items", [])):
                name, owner = str(item["pk"]).removeprefix("LEASE#"), str(item["owner"])
                # Only if it is still that owner's: a lease taken over meanwhile stays.
                if self._delete_if(str(item["pk"]), NO_SORT, "#owner = :owner", {":owner": owner}, {"#owner": "owner"}):
                    freed.append(name)
            last = response.get("LastEvaluatedKey")
            if not last:
                return sorted(freed)
            request["ExclusiveStartKey"] = last

    def put_compaction_job(self, job: CompactionJob) -> None:
        body = json.dumps(job_to_json(job))
        history = {"pk": _JOBS, "sk": job.job_id, "body": body, TTL_ATTRIBUTE: expiry()}
        requests: list[WriteRequestTypeDef] = [{"PutRequest": {"Item": to_item(history)}}]
        if job.active:
            requests.append({"PutRequest": {"Item": to_item({"pk": _ACTIVE_JOBS, "sk": job.job_id, "body": body})}})
        else:
            requests.append({"DeleteRequest": {"Key": item_key(_ACTIVE_JOBS, job.job_id)}})
        self._batch_write(requests)

    def get_compaction_job(self, job_id: str) -> CompactionJob | None:
        item = self._get(_JOBS, job_id)
        return None if item is None else job_from_json(json.loads(str(item["body"])))

    def list_compaction_jobs(self, active: bool = False, limit: int = 100) -> list[CompactionJob]:
        items = self._query(_ACTIVE_JOBS if active else _JOBS, descending=True)
        return [job_from_json(json.loads(str(item["body"]))) for item in itertools.islice(items, limit)]
