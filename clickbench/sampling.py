"""Vectorized, seeded draws for the generated ``hits`` rows: skewed and uniform values, hashes,
string joins, each site's pages, and the pools of hosts, URL fillers and titles.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from clickbench import distributions as dist


class Random:
    """Seeded, vectorized draws of ``rows`` values; each ``key`` is an independent stream."""

    def __init__(self, rows: int, seed: int) -> None:
        self.rows = rows
        self.seed = seed

    def uniform(self, key: str) -> pa.Array:
        digest = hashlib.blake2b(f"{self.seed}/{key}".encode(), digest_size=8).digest()
        return pc.random(self.rows, initializer=int.from_bytes(digest, "little") >> 1)

    def integers(self, key: str, low: int, high: int) -> pa.Array:
        """Uniform int64 in [low, high]."""
        drawn = pc.floor(pc.multiply(self.uniform(key), float(high - low + 1)))
        return pc.add(pc.cast(drawn, pa.int64()), low)

    def skewed(self, key: str, size: int, exponent: float) -> pa.Array:
        """int64 in [0, size), index 0 the most frequent: floor(size * u ** exponent)."""
        drawn = pc.floor(pc.multiply(pc.power(self.uniform(key), exponent), float(size)))
        return pc.min_element_wise(pc.cast(drawn, pa.int64()), size - 1)

    def index(self, key: str, weights: Sequence[float]) -> pa.Array:
        """int64 in [0, len(weights)), drawn with the given relative weights."""
        total = float(sum(weights))
        cumulative, running = [], 0.0
        for weight in weights:
            running += weight
            cumulative.append(running / total)
        cumulative[-1] = 1.0
        return pc.cast(pc.search_sorted(pa.array(cumulative), self.uniform(key), side="right"), pa.int64())

    def choice(self, key: str, values: Sequence[object], weights: Sequence[float], kind: pa.DataType) -> pa.Array:
        return pc.take(pa.array(values, kind), self.index(key, weights))

    def chance(self, key: str, probability: float) -> pa.Array:
        return pc.less(self.uniform(key), probability)

    def flag(self, key: str, probability: float) -> pa.Array:
        """int64 1 with the given probability, else 0."""
        return pc.cast(self.chance(key, probability), pa.int64())

    def constant(self, value: object, kind: pa.DataType) -> pa.Array:
        return pa.repeat(pa.scalar(value, kind), self.rows)


def mix(values: pa.Array, salt: int) -> pa.Array:
    """splitmix64 of int64 ``values`` (as uint64) xor a salt: a vectorized integer hash."""
    salted = int.from_bytes(hashlib.blake2b(str(salt).encode(), digest_size=8).digest(), "little")
    x = pc.bit_wise_xor(pc.cast(values, pa.uint64(), safe=False), pa.scalar(salted, pa.uint64()))
    x = pc.add(x, pa.scalar(0x9E3779B97F4A7C15, pa.uint64()))
    for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        x = pc.multiply(
            pc.bit_wise_xor(x, pc.shift_right(x, pa.scalar(shift, pa.uint64()))), pa.scalar(factor, pa.uint64())
        )
    return pc.bit_wise_xor(x, pc.shift_right(x, pa.scalar(31, pa.uint64())))


def int32(values: pa.Array) -> pa.Array:
    """A hash (uint64) as a signed int32, kept clear of the int32 minimum (Q36 computes ClientIP - 3)."""
    low = pc.cast(pc.modulo(values, pa.scalar(1 << 32, pa.uint64())), pa.int64())
    return pc.max_element_wise(pc.subtract(low, 1 << 31), -(1 << 31) + 16)


def join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def string_hash(strings: pa.Array, planted: dict[str, int]) -> pa.Array:
    """A signed 64-bit hash of each string (one Python hash per distinct value), planted ones forced."""
    encoded = pc.dictionary_encode(strings)
    hashes = [
        planted.get(value)
        if value in planted
        else int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "little", signed=True)
        for value in encoded.dictionary.to_pylist()
    ]
    return pc.take(pa.array(hashes, pa.int64()), encoded.indices)


def pages(rows: int, head_shares: Sequence[float], tail_share: float, tail_size: int, exponent: float) -> list[int]:
    """Distinct pages of each site (heads, then the tail of ``Random.skewed``): its expected rows / 5.

    About one row in five then has a URL of its own (NOTES: ~20M distinct URLs in 100M rows).
    """
    expected = [rows * share / 100 for share in head_shares]
    expected += [
        rows * tail_share / 100 * (((k + 1) / tail_size) ** (1 / exponent) - (k / tail_size) ** (1 / exponent))
        for k in range(tail_size)
    ]
    return [max(1, round(e / 5)) for e in expected]


def page(rnd: Random, key: str, pages: list[int], site: pa.Array) -> pa.Array:
    """A page number (int64) of each row's site: uniform over the site's pages."""
    drawn = pc.floor(pc.multiply(rnd.uniform(key), pc.cast(pc.take(pa.array(pages, pa.int64()), site), pa.float64())))
    return pc.cast(drawn, pa.int64())


def site_pool(size: int) -> tuple[list[str], list[int]]:
    """Host and URL path length class of each site (one site per counter)."""
    hosts = [
        f"{dist.SITE_WORDS[k % len(dist.SITE_WORDS)]}{'' if k < len(dist.SITE_WORDS) else k}{dist.SITE_SUFFIXES[k % 7]}"
        for k in range(size)
    ]
    return hosts, [(k * 5 + k // 8) % len(dist.URL_PATH_LENGTHS) for k in range(size)]


def filler(lengths: Sequence[int], salt: str) -> list[str]:
    """Query-string-like padding of each length."""
    chunk = f"&{salt}=" + hashlib.sha256(salt.encode()).hexdigest() + "&utm_source=direct&p="
    return [(chunk * (length // len(chunk) + 1))[:length] for length in lengths]


def titles(size: int) -> list[str]:
    words = dist.TITLE_WORDS
    return [
        f"{words[k % len(words)]} {words[(k * 7 + 3) % len(words)].lower()} — {words[(k * 13 + 5) % len(words)]} {k}"
        for k in range(size)
    ]
