"""Object storage on S3 (or S3 Express, or a moto server): the ``ObjectStore`` port."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from arcs.errors import BadRequest, NotFound, StorageFault
from arcs.ports import ObjectInfo, UploadedFile

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CopySourceTypeDef

# S3 answers 409 when two conditional writes of one key race; AWS says retry.
_CONFLICT_RETRIES = 3
#: Bytes one ranged GET of an object read as a file asks for.
_RANGE_BYTES = 8 << 20
#: How S3 Express One Zone directory bucket names end (``{base}--{az id}--x-s3``).
DIRECTORY_BUCKET_SUFFIX = "--x-s3"


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class S3Store:
    def __init__(self, client: S3Client, bucket: str, list_page_size: int = 1000) -> None:
        self.client = client
        self.bucket = bucket
        self.list_page_size = list_page_size
        # Directory buckets list only prefixes ending in "/", and in no particular order.
        self.directory_bucket = bucket.endswith(DIRECTORY_BUCKET_SUFFIX)

    def _fault(self, action: str, key: str, exc: Exception) -> StorageFault:
        return StorageFault(f"S3 {action} s3://{self.bucket}/{key} failed: {exc}")

    def put(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("put", key, exc) from exc

    def put_if_absent(self, key: str, data: bytes | memoryview) -> bool:
        body = data if isinstance(data, bytes) else bytes(data)  # botocore wants bytes or a file
        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*")
                return True
            except ClientError as exc:
                code = error_code(exc)
                if code == "PreconditionFailed" or http_status(exc) == 412:
                    return False
                if code == "ConditionalRequestConflict" and attempt < _CONFLICT_RETRIES:
                    time.sleep(0.05 * 2**attempt)
                    continue
                raise self._fault("conditional put", key, exc) from exc
            except BotoCoreError as exc:
                raise self._fault("conditional put", key, exc) from exc
        raise AssertionError("unreachable")

    def get(self, key: str) -> bytes:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            return response["Body"].read()
        except ClientError as exc:
            if error_code(exc) == "NoSuchKey":
                raise NotFound(f"no object {key}") from exc
            raise self._fault("get", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fault("get", key, exc) from exc

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError as exc:
            # HEAD has no body, so a missing key shows only as the status code.
            if http_status(exc) == 404 and error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fault("head", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fault("head", key, exc) from exc

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("delete", key, exc) from exc

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    # --- DownloadStore: objects a client fetches itself -----------------------------------------
    def put_download(self, key: str, data: bytes, content_type: str) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("put", key, exc) from exc

    def download_url(self, key: str, expires_in_s: int) -> str:
        """A presigned GET, signed with this process's credentials (so it also ends when they do)."""
        try:
            return self.client.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_in_s
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("presign", key, exc) from exc

    def upload_url(self, key: str, expires_in_s: int) -> str:
        """A presigned PUT of ``key`` (S3 takes at most 5 GB in one PUT)."""
        return self._presign("put_object", {"Key": key}, expires_in_s)

    def start_multipart(self, key: str) -> str:
        try:
            return self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("create multipart upload", key, exc) from exc

    def part_url(self, key: str, upload_id: str, part_number: int, expires_in_s: int) -> str:
        params = {"Key": key, "UploadId": upload_id, "PartNumber": part_number}
        return self._presign("upload_part", params, expires_in_s)

    def finish_multipart(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]]) -> None:
        try:
            self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etag} for n, etag in parts]},
            )
        except ClientError as exc:
            if error_code(exc) in ("InvalidPart", "InvalidPartOrder", "EntityTooSmall", "NoSuchUpload"):
                raise BadRequest(f"the upload's parts cannot be joined: {error_code(exc)}") from exc
            raise self._fault("complete multipart upload", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fault("complete multipart upload", key, exc) from exc

    def uploaded(self, key: str) -> UploadedFile | None:
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=key)
            return UploadedFile(int(head["ContentLength"]), str(head["ETag"]))
        except ClientError as exc:
            if http_status(exc) == 404 or error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._fault("head", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fault("head", key, exc) from exc

    def claim(self, key: str, etag: str, to_key: str) -> bool:
        source: CopySourceTypeDef = {"Bucket": self.bucket, "Key": key}
        try:
            # The managed copy: one CopyObject up to 5 GB, part copies past it, each conditional.
            self.client.copy(source, self.bucket, to_key, ExtraArgs={"CopySourceIfMatch": etag})
        except ClientError as exc:
            status = http_status(exc)
            if status in (404, 412) or error_code(exc) in ("404", "412", "NoSuchKey", "PreconditionFailed"):
                return False
            raise self._fault("copy", key, exc) from exc
        except BotoCoreError as exc:
            raise self._fault("copy", key, exc) from exc
        return True

    def open_ranges(self, key: str, size: int) -> IO[bytes]:
        return io.BufferedReader(_Ranges(self, key, size), _RANGE_BYTES)

    def _presign(self, method: str, params: dict[str, object], expires_in_s: int) -> str:
        try:
            return self.client.generate_presigned_url(
                method, Params={"Bucket": self.bucket, **params}, ExpiresIn=expires_in_s
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("presign", str(params.get("Key")), exc) from exc

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """The objects under ``prefix``, in key order (a directory bucket's, once all are listed)."""
        if not self.directory_bucket:
            yield from self._list(prefix)
            return
        folder = prefix[: prefix.rfind("/") + 1]
        yield from sorted(
            (info for info in self._list(folder) if info.key.startswith(prefix)), key=lambda info: info.key
        )

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        paginator = self.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": self.list_page_size}
        )
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    yield ObjectInfo(item["Key"], int(item["Size"]))
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("list", prefix + "*", exc) from exc


class _Ranges(io.RawIOBase):
    """An object as a seekable file: each read a ranged GET (Parquet is read footer first)."""

    def __init__(self, store: S3Store, key: str, size: int) -> None:
        self.store = store
        self.key = key
        self.length = size
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        if self.position >= self.length:
            return 0
        end = min(self.position + len(buffer), self.length) - 1
        try:
            answer = self.store.client.get_object(
                Bucket=self.store.bucket, Key=self.key, Range=f"bytes={self.position}-{end}"
            )
            data = answer["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise self.store._fault("get", self.key, exc) from exc
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)
