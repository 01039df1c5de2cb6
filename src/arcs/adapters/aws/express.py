"""S3 Express One Zone: the directory bucket that holds the data files when one is configured.

With ``ARCS_EXPRESS_BUCKET`` set, data keys (``{prefix}/{db}/{measurement}/...``) live in the
directory bucket: ingest writes them there, queries read them there, compaction, retention and
deletes rewrite them there. Everything under ``{prefix}/_arcs/`` (claim checks, handed-off
results, quarantine) stays in the general-purpose bucket, whose lifecycle rules expire it and
whose presigned URLs callers follow (docs/express.md).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from arcs import envvars, layout
from arcs.adapters.aws.objects import DIRECTORY_BUCKET_SUFFIX, S3Store
from arcs.ports import ObjectInfo
from arcs.settings import ConfigError

if TYPE_CHECKING:
    from arcs.query.engine import BucketEndpoint

#: An Availability Zone or Local Zone id, as directory bucket names carry it (``use1-az4``).
_ZONE_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*-az\d+")
_BASE_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
_MAX_NAME = 63


def zone_id(bucket: str) -> str:
    """The zone id in a directory bucket's name (``{base}--{zone id}--x-s3``); ConfigError if it has none."""
    base, _, zone = bucket.removesuffix(DIRECTORY_BUCKET_SUFFIX).rpartition("--")
    if (
        not bucket.endswith(DIRECTORY_BUCKET_SUFFIX)
        or len(bucket) > _MAX_NAME
        or not _BASE_NAME.fullmatch(base)
        or not _ZONE_ID.fullmatch(zone)
    ):
        raise ConfigError(
            f"{envvars.EXPRESS_BUCKET} must name a directory bucket, '<base>--<zone id>--x-s3' "
            f"(e.g. arcs-data--use1-az4--x-s3), got {bucket!r}"
        )
    return zone


def zonal_endpoint(bucket: str, region: str) -> str:
    """The host serving a directory bucket's objects: ``s3express-{zone id}.{region}.amazonaws.com``."""
    return f"s3express-{zone_id(bucket)}.{region}.amazonaws.com"


def duckdb_endpoint(bucket: str, region: str, endpoint_url: str | None) -> BucketEndpoint:
    """Where DuckDB's httpfs reads the directory bucket: its zonal endpoint, virtual-hosted (AWS
    serves no path-style requests there); on an emulator, the emulator's own endpoint, by path."""
    from arcs.query.engine import BucketEndpoint  # lazy: the engine module loads DuckDB, which only queries need

    if endpoint_url:
        parsed = urlparse(endpoint_url)
        return BucketEndpoint(bucket, parsed.netloc, parsed.scheme == "https", "path")
    return BucketEndpoint(bucket, zonal_endpoint(bucket, region), True, "vhost")


class ExpressStore:
    """The ``ObjectStore`` (and ``DownloadStore``) over two buckets: data keys in the directory
    bucket, system keys in the general-purpose one. Callers see one store keyed as before."""

    def __init__(self, data: S3Store, general: S3Store, prefix: str) -> None:
        zone_id(data.bucket)  # refuse a name that is not a directory bucket's before any request
        self.data = data
        self.general = general
        self.system_prefix = layout.system_prefix(prefix)

    def _store(self, key: str) -> S3Store:
        return self.general if key.startswith(self.system_prefix) else self.data

    def put(self, key: str, data: bytes) -> None:
        self._store(key).put(key, data)

    def put_if_absent(self, key: str, data: bytes | memoryview) -> bool:
        return self._store(key).put_if_absent(key, data)

    def get(self, key: str) -> bytes:
        return self._store(key).get(key)

    def exists(self, key: str) -> bool:
        return self._store(key).exists(key)

    def delete(self, key: str) -> None:
        self._store(key).delete(key)

    def url(self, key: str) -> str:
        return self._store(key).url(key)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        if prefix.startswith(self.system_prefix):
            return self.general.list(prefix)
        if self.system_prefix.startswith(prefix):
            # A prefix above the system folder spans both buckets; each lists in key order.
            return heapq.merge(self.data.list(prefix), self.general.list(prefix), key=lambda info: info.key)
        return self.data.list(prefix)

    # --- DownloadStore: handed-off results stay where a lifecycle rule expires them -------------
    def put_download(self, key: str, data: bytes, content_type: str) -> None:
        self.general.put_download(key, data, content_type)

    def download_url(self, key: str, expires_in_s: int) -> str:
        return self.general.download_url(key, expires_in_s)
