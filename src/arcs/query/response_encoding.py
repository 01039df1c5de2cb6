"""Compressed answers: ``Accept-Encoding: zstd`` or ``gzip`` on the query routes that answer a document.

As Arc: the JSON document (``POST /api/v1/query``, ``GET /api/v1/query/{measurement}``) and the
MessagePack one (``POST /api/v1/query/msgpack``) are compressed when the caller accepts it, zstd
preferred over gzip whatever the order or weights (a weight of 0 refuses a coding), without a
size threshold; ``Vary: Accept-Encoding`` goes with every such answer, compressed or not. Errors
and the Arrow stream are never compressed. Both encoders run at their fastest level: the point
is fewer bytes on the wire (and under Lambda's response limits), not the smallest.

A buffered answer is compressed whole; a streamed one piece by piece, flushed at each piece so the
client receives the answer as it is made.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Literal

Coding = Literal["zstd", "gzip"]
#: Added to every answer whose coding was negotiated: caches must key on the request's header.
VARY = {"Vary": "Accept-Encoding"}
_GZIP_WINDOW = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream
_ZSTD_LEVEL = 1


def negotiate(accept_encoding: str | None) -> Coding | None:
    """The coding to answer in: zstd if accepted, else gzip (or ``x-gzip``), else none."""
    accepted: set[str] = set()
    for part in (accept_encoding or "").split(","):
        coding, _, parameters = part.partition(";")
        if _refused(parameters):
            continue
        accepted.add(coding.strip().lower())
    if "zstd" in accepted:
        return "zstd"
    if accepted & {"gzip", "x-gzip"}:
        return "gzip"
    return None


def _refused(parameters: str) -> bool:
    """A ``q`` of 0 (``q=0``, ``q=0.0``...) refuses the coding; anything else accepts it."""
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip()) == 0
            except ValueError:
                return False
    return False


def headers(coding: Coding | None) -> dict[str, str]:
    """What an answer negotiated this way carries."""
    return {**VARY, "Content-Encoding": coding} if coding else dict(VARY)


def compress(data: bytes, coding: Coding) -> bytes:
    if coding == "zstd":
        import zstandard  # loaded by the first request that asks for it, not by every cold start

        return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)
    encoder = zlib.compressobj(1, zlib.DEFLATED, _GZIP_WINDOW)
    return encoder.compress(data) + encoder.flush()


def compress_pieces(pieces: Iterable[bytes], coding: Coding) -> Iterator[bytes]:
    """``pieces`` as one compressed stream, each piece flushed as it comes."""
    if coding == "zstd":
        import zstandard

        encoder = zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compressobj()
        for piece in pieces:
            if out := encoder.compress(piece) + encoder.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK):
                yield out
        yield encoder.flush()
        return
    deflate = zlib.compressobj(1, zlib.DEFLATED, _GZIP_WINDOW)
    for piece in pieces:
        if out := deflate.compress(piece) + deflate.flush(zlib.Z_SYNC_FLUSH):
            yield out
    yield deflate.flush()
