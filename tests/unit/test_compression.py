"""Request body decompression: gzip and zstd, the size cap checked while inflating, bombs."""

from __future__ import annotations

import gzip
import os
import time
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
import zstandard

from arcs.errors import ArcsError, BadRequest, PayloadTooLarge, UnsupportedMediaType
from arcs.write.decoders.compression import decompress

MB = 1 << 20
TEXT = b"cpu,host=a usage=1.5 1700000000000000000\n" * 2000
DATA = TEXT + os.urandom(3000)  # some incompressible bytes too


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


def zst_streamed(data: bytes) -> bytes:
    """A frame without the content size in its header, as streaming clients write."""
    compressor = zstandard.ZstdCompressor().compressobj()
    return compressor.compress(data) + compressor.flush()


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {"gzip": gz, "zstd": zst, "zstd-streamed": zst_streamed}


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
@pytest.mark.parametrize("declared", [None, "", "identity", "declared"])
def test_found_by_magic_bytes_or_content_encoding(name: str, declared: str | None) -> None:
    encoding = name.split("-")[0] if declared == "declared" else declared
    assert decompress(COMPRESSORS[name](DATA), encoding, 10 * MB) == DATA


@pytest.mark.parametrize("encoding", ["gzip", "GZIP", " gzip ", "x-gzip", "Gzip"])
def test_gzip_spellings(encoding: str) -> None:
    assert decompress(gz(DATA), encoding, 10 * MB) == DATA


@pytest.mark.parametrize("encoding", ["zstd", "ZSTD", " zstd"])
def test_zstd_spellings(encoding: str) -> None:
    assert decompress(zst(DATA), encoding, 10 * MB) == DATA


def test_plain_bodies_pass_through() -> None:
    assert decompress(DATA, None, 10 * MB) == DATA
    assert decompress(b"", None, 10) == b""
    assert decompress(DATA, "identity", 10 * MB) == DATA


def test_plain_bodies_over_the_cap() -> None:
    with pytest.raises(PayloadTooLarge, match="the limit is 100"):
        decompress(b"x" * 101, None, 100)
    assert decompress(b"x" * 100, None, 100) == b"x" * 100


@pytest.mark.parametrize("encoding", ["br", "deflate", "compress", "gzip, br", "lz4", "x"])
def test_unknown_encodings_are_unsupported(encoding: str) -> None:
    with pytest.raises(UnsupportedMediaType, match="unsupported Content-Encoding"):
        decompress(gz(DATA), encoding, 10 * MB)


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
@pytest.mark.parametrize("body", [DATA, b"", b"\x1f", b"\x28\xb5\x2f"])
def test_declared_but_not_compressed(encoding: str, body: bytes) -> None:
    with pytest.raises(BadRequest, match=f"declared {encoding} but does not start with its magic bytes"):
        decompress(body, encoding, 10 * MB)


def test_exactly_at_the_cap_is_fine() -> None:
    data = b"a" * 1000
    assert decompress(gz(data), None, 1000) == data
    assert decompress(zst(data), None, 1000) == data
    with pytest.raises(PayloadTooLarge):
        decompress(gz(data), None, 999)
    with pytest.raises(PayloadTooLarge):
        decompress(zst(data), None, 999)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_truncated_bodies(name: str) -> None:
    body = COMPRESSORS[name](DATA)
    for cut in (len(body) - 1, len(body) // 2, 12):
        with pytest.raises(BadRequest, match=r"truncated|corrupt"):
            decompress(body[:cut], None, 10 * MB)


def zst_checked(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(data)


@pytest.mark.parametrize("compress", [gz, zst_checked], ids=["gzip", "zstd"])
def test_corrupt_bodies(compress: Callable[[bytes], bytes]) -> None:
    # zstd frames carry a checksum only when the client asks for one; without, flipped literal
    # bytes come out as different bytes (and the body's own format then refuses them).
    body = bytearray(compress(DATA))
    for position in range(len(body) // 3, len(body) - 8, 97):
        body[position] ^= 0xFF
    with pytest.raises(BadRequest, match=r"corrupt|truncated"):
        decompress(bytes(body), None, 10 * MB)


def test_gzip_checksum_mismatch() -> None:
    body = bytearray(gz(DATA))
    body[-5] ^= 0x01  # CRC32 in the trailer
    with pytest.raises(BadRequest, match="gzip body is corrupt"):
        decompress(bytes(body), None, 10 * MB)


def test_trailing_garbage() -> None:
    with pytest.raises(BadRequest, match="trailing garbage after gzip body"):
        decompress(gz(DATA) + b"junk", None, 10 * MB)
    with pytest.raises(BadRequest, match="zstd body is corrupt"):
        decompress(zst(DATA) + b"junk", None, 10 * MB)
    with pytest.raises(BadRequest, match="gzip body is truncated"):
        decompress(gz(DATA) + b"\x1f\x8b", None, 10 * MB)


def test_multi_member_gzip() -> None:
    parts = [TEXT, os.urandom(500), b"", TEXT[:77]]
    assert decompress(b"".join(gz(part) for part in parts), None, 10 * MB) == b"".join(parts)


@pytest.mark.parametrize("cap", [len(DATA) * 3, 100 * MB])
def test_multi_frame_zstd(cap: int) -> None:
    # Frames longer than the slices fed to the decompressor, ending mid-slice.
    parts = [os.urandom(5000), TEXT, b"", os.urandom(333), TEXT[:1001]]
    body = b"".join(zst(part) if n % 2 else zst_streamed(part) for n, part in enumerate(parts))
    assert decompress(body, None, cap) == b"".join(parts)


def test_multi_frame_zstd_over_the_cap() -> None:
    body = zst(TEXT) + zst(TEXT)
    with pytest.raises(PayloadTooLarge):
        decompress(body, None, len(TEXT) * 2 - 1)


def _zero_bomb_gzip(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(MB)
    return b"".join(compressor.compress(chunk) for _ in range(size // MB)) + compressor.flush()


def _zero_bomb_zstd(size: int) -> bytes:
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    chunk = bytes(MB)
    return b"".join(compressor.compress(chunk) for _ in range(size // MB)) + compressor.flush()


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {"gzip": _zero_bomb_gzip(50 * MB), "zstd": _zero_bomb_zstd(50 * MB)}


@pytest.mark.parametrize("name", ["gzip", "zstd"])
def test_bombs_stop_at_the_cap_quickly_and_small(name: str, bombs: dict[str, bytes]) -> None:
    body = bombs[name]
    assert len(body) < MB  # 50 MB of zeros
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(PayloadTooLarge, match="exceeds the limit of 1048576 bytes"):
            decompress(body, None, MB)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0
    assert peak < 8 * MB


@pytest.mark.parametrize("name", ["gzip", "zstd"])
def test_bomb_members_after_a_small_first_one(name: str, bombs: dict[str, bytes]) -> None:
    small = gz(b"x") if name == "gzip" else zst(b"x")
    with pytest.raises(PayloadTooLarge):
        decompress(small + bombs[name], None, MB)


def test_hostile_bytes_after_magic_give_client_errors() -> None:
    for magic in (b"\x1f\x8b", b"\x28\xb5\x2f\xfd"):
        for tail in (b"", b"\x00" * 10, b"\xff" * 64, os.urandom(256), magic * 10):
            with pytest.raises(ArcsError) as caught:
                decompress(magic + tail, None, MB)
            assert caught.value.status in (400, 413)
