"""The token store on the tokens table.

| kind | pk | sk | attributes |
|---|---|---|---|
| token | ``TOKENS`` | ``{token_id}`` | the ``TokenRecord`` fields, bytes as Binary |
| token lookup | ``TOKENLOOKUP#{lookup}`` | ``{token_id}`` | a copy of the token, so auth is one query |

A table of its own: the authorizer reads it on every request and may read nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from arcs.adapters.aws.dynamo_table import MAX_ATTEMPTS, DynamoTable, backoff, item_key, put_op, to_item
from arcs.errors import StorageFault
from arcs.ports import TokenRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef


def _token_values(record: TokenRecord) -> dict[str, object]:
    return {
        "token_id": record.token_id,
        "name": record.name,
        "description": record.description,
        "lookup": record.lookup,
        "salt": record.salt,
        "secret_hash": record.secret_hash,
        "permissions": list(record.permissions),
        "databases": list(record.databases),
        "created_at": record.created_at.isoformat(),
        "token_expires_at": None if record.expires_at is None else record.expires_at.isoformat(),
        "revoked": record.revoked,
    }


def _binary(value: Any) -> bytes:
    # The deserializer wraps Binary values; its ``value`` holds the bytes.
    return bytes(getattr(value, "value", value))


def _token(item: Mapping[str, Any]) -> TokenRecord:
    expires = item.get("token_expires_at")
    return TokenRecord(
        token_id=str(item["token_id"]),
        name=str(item["name"]),
        description=str(item["description"]),
        lookup=str(item["lookup"]),
        salt=_binary(item["salt"]),
        secret_hash=_binary(item["secret_hash"]),
        permissions=tuple(str(p) for p in item["permissions"]),
        databases=tuple(str(d) for d in item["databases"]),
        created_at=datetime.fromisoformat(str(item["created_at"])),
        expires_at=None if expires is None else datetime.fromisoformat(str(expires)),
        revoked=bool(item["revoked"]),
    )


_TOKENS = "TOKENS"


def _lookup_pk(lookup: str) -> str:
    return f"TOKENLOOKUP#{lookup}"


class DynamoTokenStore(DynamoTable):
    """Tokens by id, plus a copy under their lookup so authentication is a single query.

    The two items change together in one transaction, guarded by the lookup the main item had
    when we read it, so a concurrent change is retried instead of leaving a stale pointer.
    """

    def put(self, record: TokenRecord, previous_lookup: str | None = None) -> None:
        values = _token_values(record)
        for attempt in range(MAX_ATTEMPTS):
            current = self._get(_TOKENS, record.token_id)
            current_lookup = None if current is None else str(current["lookup"])
            main = put_op(self.table, {"pk": _TOKENS, "sk": record.token_id, **values})
            if current_lookup is None:
                main["Put"]["ConditionExpression"] = "attribute_not_exists(pk)"
            else:
                main["Put"]["ConditionExpression"] = "#lookup = :seen"
                main["Put"]["ExpressionAttributeNames"] = {"#lookup": "lookup"}
                main["Put"]["ExpressionAttributeValues"] = to_item({":seen": current_lookup})
            ops: list[TransactWriteItemTypeDef] = [
                main,
                put_op(self.table, {"pk": _lookup_pk(record.lookup), "sk": record.token_id, **values}),
            ]
            stale = {previous_lookup, current_lookup} - {None, record.lookup}
            ops += [
                {"Delete": {"TableName": self.table, "Key": item_key(_lookup_pk(str(old)), record.token_id)}}
                for old in sorted(str(old) for old in stale)
            ]
            codes = self._transact(ops)
            if codes is None:
                return
            if "ConditionalCheckFailed" not in codes and "TransactionConflict" not in codes:
                raise StorageFault(f"DynamoDB token update cancelled: {codes}")
            backoff(attempt)
        raise StorageFault(f"token {record.token_id} kept changing; giving up after {MAX_ATTEMPTS} attempts")

    def get(self, token_id: str) -> TokenRecord | None:
        item = self._get(_TOKENS, token_id)
        return None if item is None else _token(item)

    def find(self, lookup: str) -> list[TokenRecord]:
        return [_token(item) for item in self._query(_lookup_pk(lookup))]

    def delete(self, token_id: str) -> bool:
        for attempt in range(MAX_ATTEMPTS):
            current = self._get(_TOKENS, token_id)
            if current is None:
                return False
            lookup = str(current["lookup"])
            codes = self._transact(
                [
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": item_key(_TOKENS, token_id),
                            "ConditionExpression": "#lookup = :seen",
                            "ExpressionAttributeNames": {"#lookup": "lookup"},
                            "ExpressionAttributeValues": to_item({":seen": lookup}),
                        }
                    },
                    {"Delete": {"TableName": self.table, "Key": item_key(_lookup_pk(lookup), token_id)}},
                ]
            )
            if codes is None:
                return True
            if "ConditionalCheckFailed" not in codes and "TransactionConflict" not in codes:
                raise StorageFault(f"DynamoDB token delete cancelled: {codes}")
            backoff(attempt)
        raise StorageFault(f"token {token_id} kept changing; giving up after {MAX_ATTEMPTS} attempts")

    def is_empty(self) -> bool:
        for _item_found in self._query(_TOKENS):
            return False
        return True

    def list(self) -> list[TokenRecord]:
        return sorted((_token(item) for item in self._query(_TOKENS)), key=lambda record: record.created_at)
