"""Request body decompression with the size cap enforced while decompressing."""

from __future__ import annotations

import zlib

import zstandard

from arcs.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20


def decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """Undo gzip or zstd found by magic bytes or named by ``Content-Encoding``.

    The cap applies to the output as it is produced, so a 10 MB bomb never grows past it.
    """
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("", "identity"):
        encoding = ""
    elif encoding in ("gzip", "x-gzip"):
        encoding = "gzip"
    elif encoding == "zstd":
        encoding = "zstd"
    else:
        raise UnsupportedMediaType(f"unsupported Content-Encoding {content_encoding!r}: use gzip, zstd or none")
    if body.startswith(GZIP_MAGIC):
        return _gunzip(body, max_bytes)
    if body.startswith(ZSTD_MAGIC):
        return _unzstd(body, max_bytes)
    if encoding:
        raise BadRequest(f"body is declared {encoding} but does not start with its magic bytes")
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"body is {len(body)} bytes; the limit is {max_bytes}")
    return body


def _too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"decompressed body exceeds the limit of {max_bytes} bytes")


def _gunzip(body: bytes, max_bytes: int) -> bytes:
    out = bytearray()
    data = body
    # Concatenated gzip members are legal (and what some clients send).
    while data:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            while data:
                out += inflater.decompress(data, max_bytes + 1 - len(out))
                if len(out) > max_bytes:
                    raise _too_large(max_bytes)
                data = inflater.unconsumed_tail
            if not inflater.eof:
                raise BadRequest("gzip body is truncated")
        except zlib.error as exc:
            raise BadRequest(f"gzip body is corrupt: {exc}") from exc
        data = inflater.unused_data
        if data and not data.startswith(GZIP_MAGIC):
            raise BadRequest("trailing garbage after gzip body")
    return bytes(out)


# A zstd block holds at most 128 KiB and costs at least 4 bytes, so feeding the decompressor
# input in slices of (remaining budget / this ratio) bounds each step's output by the budget.
_ZSTD_MAX_RATIO = 1 << 15


def _unzstd(body: bytes, max_bytes: int) -> bytes:
    out = bytearray()
    data = memoryview(body)
    pos = 0
    context = zstandard.ZstdDecompressor()
    try:
        # Concatenated frames are legal (``zstd`` writes them for multiple inputs).
        while pos < len(data):
            inflater = context.decompressobj()
            while pos < len(data) and not inflater.eof:
                step = max(64, (max_bytes + 1 - len(out)) // _ZSTD_MAX_RATIO)
                out += inflater.decompress(bytes(data[pos : pos + step]))
                pos += step
                if len(out) > max_bytes:
                    raise _too_large(max_bytes)
            if not inflater.eof:
                raise BadRequest("zstd body is truncated")
            # The frame ended inside the last slice: what it did not use starts the next frame.
            pos = min(pos, len(data)) - len(inflater.unused_data)
    except zstandard.ZstdError as exc:
        raise BadRequest(f"zstd body is corrupt: {exc}") from exc
    return bytes(out)
