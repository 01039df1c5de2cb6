"""Accept-Encoding negotiation and the compressed answers, whole and streamed."""

from __future__ import annotations

import gzip
import os
import zlib

import pytest
import zstandard

from arcs.query.response_encoding import compress, compress_pieces, headers, negotiate


@pytest.mark.parametrize(
    ("accept", "coding"),
    [
        (None, None),
        ("", None),
        ("identity", None),
        ("br, deflate", None),
        ("gzip", "gzip"),
        ("x-gzip", "gzip"),
        ("GZIP;q=0.5", "gzip"),
        ("gzip, deflate, zstd", "zstd"),
        ("zstd;q=0.1, gzip;q=1", "zstd"),  # zstd whenever accepted, as Arc
        ("zstd;q=0, gzip", "gzip"),
        ("zstd;q=0.000, gzip;q=0", None),
        ("gzip;q=bad", "gzip"),
        ("*", None),
    ],
)
def test_negotiation(accept: str | None, coding: str | None) -> None:
    assert negotiate(accept) == coding


def test_headers_vary_always_and_name_the_coding() -> None:
    assert headers(None) == {"Vary": "Accept-Encoding"}
    assert headers("zstd") == {"Vary": "Accept-Encoding", "Content-Encoding": "zstd"}


DATA = b'{"columns":["time","v"],"data":[' + b'["2024-01-01T00:00:00Z",1.5],' * 5000 + os.urandom(5000)


def unzstd(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def test_whole_bodies_decode_to_themselves() -> None:
    assert gzip.decompress(compress(DATA, "gzip")) == DATA
    assert unzstd(compress(DATA, "zstd")) == DATA
    assert len(compress(DATA, "gzip")) < len(DATA) / 3


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_stream_decodes_whole_and_each_piece_is_flushed(coding: str) -> None:
    pieces = [DATA[i : i + 10_000] for i in range(0, len(DATA), 10_000)]
    sent = list(compress_pieces(iter(pieces), coding))  # type: ignore[arg-type]
    whole = b"".join(sent)
    assert (gzip.decompress(whole) if coding == "gzip" else unzstd(whole)) == DATA
    # What a client has after the first piece already decodes to that piece: nothing waits for the end.
    ungzip = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress
    assert (ungzip(sent[0]) if coding == "gzip" else unzstd(sent[0])) == pieces[0]
