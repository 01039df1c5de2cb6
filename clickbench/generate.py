"""ClickBench-shaped ``hits`` data for tests and benchmarks: all 105 columns, realistic skew, planted rows.

    generate_hits(rows, seed) -> pyarrow.Table

The columns, their order and their types are those of ClickBench's ``CREATE TABLE hits``
(``hits_schema.sql``): BIGINT int64, INTEGER int32, SMALLINT int16, TEXT / VARCHAR / CHAR string,
TIMESTAMP timestamp[us] (no zone), Date date32; NOT NULL columns are non-nullable fields, and no
value is ever NULL (ClickBench writes '' and 0). :func:`to_parquet_layout` turns the table into the
physical layout of the official ``hits.parquet`` (INT64 Unix seconds, UINT16 days, binary strings),
on which ClickBench's ``create.sql`` view for DuckDB runs unchanged.

The 25 columns the 43 queries read follow the distributions in ``clickbench/distributions.py``
(taken from DuckDB's answers on the full 99,997,497-row dataset): a 30-day July 2013 with a daily
cycle (EventTime UTC, EventDate the Moscow date), the skewed CounterID, RegionID, UserID (with heavy
users whose SearchPhrase is empty), AdvEngineID, URL and Referer distributions, 13 % non-empty
mostly Cyrillic search phrases, rare 'google' URLs, and hashes of URL and Referer. The others get
plausible constant-ish values. Rows are sorted like the official file, by ClickHouse's primary key
(CounterID, EventDate, UserID, EventTime, WatchID). Everything is vectorized with
``pyarrow.compute``; the only Python loop is one hash per distinct URL / Referer.

Planted rows make the queries with ``OFFSET`` return rows, in the numbers the full dataset needs
scaled to ``rows`` (:func:`scaled`); :func:`scale_query` scales the ``HAVING COUNT(*) >
100000`` and ``OFFSET`` constants of a query the same way (at full size it changes nothing). With
both, every one of the 43 queries returns rows, down to a few thousand rows of data.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from clickbench import distributions as dist

N_FULL = dist.N_FULL
FIRST_DAY = 15888  # 2013-07-02, days since 1970-01-01: EventDate runs over 30 days from here
DAYS = 30
MOSCOW_OFFSET_S = 4 * 3600  # EventDate is the Moscow date (UTC+4) of EventTime (UTC)
PLANTED_USER_ID = 435090932899640449  # Q20
PLANTED_REFERER_HASH = 3594120000172545465  # Q41
PLANTED_URL_HASH = 2868770270353813622  # Q42
PLANTED_REFERER = "http://mysw.info/goods/list?counter=62&from=tracker"  # its RefererHash is planted
PLANTED_URL = "http://62.example.ru/catalog/index.html"  # its URLHash is planted
Q43_FIRST_DAY = 15900  # 2013-07-14
MIN_ROWS = 1000

_SCHEMA = """
WatchID BIGINT NOT NULL
JavaEnable SMALLINT NOT NULL
Title TEXT
GoodEvent SMALLINT NOT NULL
EventTime TIMESTAMP NOT NULL
EventDate Date NOT NULL
CounterID INTEGER NOT NULL
ClientIP INTEGER NOT NULL
RegionID INTEGER NOT NULL
UserID BIGINT NOT NULL
CounterClass SMALLINT NOT NULL
OS SMALLINT NOT NULL
UserAgent SMALLINT NOT NULL
URL TEXT
Referer TEXT
IsRefresh SMALLINT NOT NULL
RefererCategoryID SMALLINT NOT NULL
RefererRegionID INTEGER NOT NULL
URLCategoryID SMALLINT NOT NULL
URLRegionID INTEGER NOT NULL
ResolutionWidth SMALLINT NOT NULL
ResolutionHeight SMALLINT NOT NULL
ResolutionDepth SMALLINT NOT NULL
FlashMajor SMALLINT NOT NULL
FlashMinor SMALLINT NOT NULL
FlashMinor2 TEXT
NetMajor SMALLINT NOT NULL
NetMinor SMALLINT NOT NULL
UserAgentMajor SMALLINT NOT NULL
UserAgentMinor VARCHAR(255) NOT NULL
CookieEnable SMALLINT NOT NULL
JavascriptEnable SMALLINT NOT NULL
IsMobile SMALLINT NOT NULL
MobilePhone SMALLINT NOT NULL
MobilePhoneModel TEXT
Params TEXT
IPNetworkID INTEGER NOT NULL
TraficSourceID SMALLINT NOT NULL
SearchEngineID SMALLINT NOT NULL
SearchPhrase TEXT
AdvEngineID SMALLINT NOT NULL
IsArtifical SMALLINT NOT NULL
WindowClientWidth SMALLINT NOT NULL
WindowClientHeight SMALLINT NOT NULL
ClientTimeZone SMALLINT NOT NULL
ClientEventTime TIMESTAMP NOT NULL
SilverlightVersion1 SMALLINT NOT NULL
SilverlightVersion2 SMALLINT NOT NULL
SilverlightVersion3 INTEGER NOT NULL
SilverlightVersion4 SMALLINT NOT NULL
PageCharset TEXT
CodeVersion INTEGER NOT NULL
IsLink SMALLINT NOT NULL
IsDownload SMALLINT NOT NULL
IsNotBounce SMALLINT NOT NULL
FUniqID BIGINT NOT NULL
OriginalURL TEXT
HID INTEGER NOT NULL
IsOldCounter SMALLINT NOT NULL
IsEvent SMALLINT NOT NULL
IsParameter SMALLINT NOT NULL
DontCountHits SMALLINT NOT NULL
WithHash SMALLINT NOT NULL
HitColor CHAR NOT NULL
LocalEventTime TIMESTAMP NOT NULL
Age SMALLINT NOT NULL
Sex SMALLINT NOT NULL
Income SMALLINT NOT NULL
Interests SMALLINT NOT NULL
Robotness SMALLINT NOT NULL
RemoteIP INTEGER NOT NULL
WindowName INTEGER NOT NULL
OpenerName INTEGER NOT NULL
HistoryLength SMALLINT NOT NULL
BrowserLanguage TEXT
BrowserCountry TEXT
SocialNetwork TEXT
SocialAction TEXT
HTTPError SMALLINT NOT NULL
SendTiming INTEGER NOT NULL
DNSTiming INTEGER NOT NULL
ConnectTiming INTEGER NOT NULL
ResponseStartTiming INTEGER NOT NULL
ResponseEndTiming INTEGER NOT NULL
FetchTiming INTEGER NOT NULL
SocialSourceNetworkID SMALLINT NOT NULL
SocialSourcePage TEXT
ParamPrice BIGINT NOT NULL
ParamOrderID TEXT
ParamCurrency TEXT
ParamCurrencyID SMALLINT NOT NULL
OpenstatServiceName TEXT
OpenstatCampaignID TEXT
OpenstatAdID TEXT
OpenstatSourceID TEXT
UTMSource TEXT
UTMMedium TEXT
UTMCampaign TEXT
UTMContent TEXT
UTMTerm TEXT
FromTag TEXT
HasGCLID SMALLINT NOT NULL
RefererHash BIGINT NOT NULL
URLHash BIGINT NOT NULL
CLID INTEGER NOT NULL
"""
_ARROW_TYPES = {
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "SMALLINT": pa.int16(),
    "TEXT": pa.string(),
    "VARCHAR(255)": pa.string(),
    "CHAR": pa.string(),
    "TIMESTAMP": pa.timestamp("us"),
    "DATE": pa.date32(),
}
_TIME_COLUMNS = ("EventTime", "ClientEventTime", "LocalEventTime")


def hits_schema() -> pa.Schema:
    """The Arrow schema of ``CREATE TABLE hits``: names, order, types, NOT NULL as non-nullable."""
    fields = []
    for line in _SCHEMA.strip().splitlines():
        name, kind, *rest = line.split()
        fields.append(pa.field(name, _ARROW_TYPES[kind.upper()], nullable=rest != ["NOT", "NULL"]))
    return pa.schema(fields)


def scaled(count: int, rows: int) -> int:
    """A count of the full dataset (a threshold, an offset) at ``rows`` rows: proportional, at least 1."""
    return max(1, count * rows // N_FULL)


_HAVING = re.compile(r"(HAVING\s+COUNT\(\*\)\s*>\s*)(\d+)", re.IGNORECASE)
_OFFSET = re.compile(r"(\bOFFSET\s+)(\d+)", re.IGNORECASE)


def scale_query(sql: str, rows: int) -> str:
    """``sql`` with its ``HAVING COUNT(*) > n`` and ``OFFSET n`` constants scaled to ``rows`` rows."""

    def scale(match: re.Match[str]) -> str:
        return match.group(1) + str(scaled(int(match.group(2)), rows))

    return _OFFSET.sub(scale, _HAVING.sub(scale, sql))


def to_parquet_layout(table: pa.Table) -> pa.Table:
    """The official ``hits.parquet`` layout: times as INT64 Unix seconds, EventDate as UINT16 days,
    strings as binary (read with ``binary_as_string``)."""
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if field.name in _TIME_COLUMNS:
            column = pc.divide(column.cast(pa.int64()), 1_000_000)
        elif field.name == "EventDate":
            column = column.cast(pa.int32()).cast(pa.uint16())
        elif pa.types.is_string(field.type):
            column = column.cast(pa.binary())
        columns.append(column)
    return pa.table(columns, names=table.column_names)


class _Random:
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


def _mix(values: pa.Array, salt: int) -> pa.Array:
    """splitmix64 of int64 ``values`` (as uint64) xor a salt: a vectorized integer hash."""
    salted = int.from_bytes(hashlib.blake2b(str(salt).encode(), digest_size=8).digest(), "little")
    x = pc.bit_wise_xor(pc.cast(values, pa.uint64(), safe=False), pa.scalar(salted, pa.uint64()))
    x = pc.add(x, pa.scalar(0x9E3779B97F4A7C15, pa.uint64()))
    for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        x = pc.multiply(
            pc.bit_wise_xor(x, pc.shift_right(x, pa.scalar(shift, pa.uint64()))), pa.scalar(factor, pa.uint64())
        )
    return pc.bit_wise_xor(x, pc.shift_right(x, pa.scalar(31, pa.uint64())))


def _int32(values: pa.Array) -> pa.Array:
    """A hash (uint64) as a signed int32, kept clear of the int32 minimum (Q36 computes ClientIP - 3)."""
    low = pc.cast(pc.modulo(values, pa.scalar(1 << 32, pa.uint64())), pa.int64())
    return pc.max_element_wise(pc.subtract(low, 1 << 31), -(1 << 31) + 16)


def _join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def _string_hash(strings: pa.Array, planted: dict[str, int]) -> pa.Array:
    """A signed 64-bit hash of each string (one Python hash per distinct value), planted ones forced."""
    encoded = pc.dictionary_encode(strings)
    hashes = [
        planted.get(value)
        if value in planted
        else int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "little", signed=True)
        for value in encoded.dictionary.to_pylist()
    ]
    return pc.take(pa.array(hashes, pa.int64()), encoded.indices)


def _pages(rows: int, head_shares: Sequence[float], tail_share: float, tail_size: int, exponent: float) -> list[int]:
    """Distinct pages of each site (heads, then the tail of ``_Random.skewed``): its expected rows / 5.

    About one row in five then has a URL of its own (NOTES: ~20M distinct URLs in 100M rows).
    """
    expected = [rows * share / 100 for share in head_shares]
    expected += [
        rows * tail_share / 100 * (((k + 1) / tail_size) ** (1 / exponent) - (k / tail_size) ** (1 / exponent))
        for k in range(tail_size)
    ]
    return [max(1, round(e / 5)) for e in expected]


def _page(rnd: _Random, key: str, pages: list[int], site: pa.Array) -> pa.Array:
    """A page number (int64) of each row's site: uniform over the site's pages."""
    drawn = pc.floor(pc.multiply(rnd.uniform(key), pc.cast(pc.take(pa.array(pages, pa.int64()), site), pa.float64())))
    return pc.cast(drawn, pa.int64())


def _site_pool(size: int) -> tuple[list[str], list[int]]:
    """Host and URL path length class of each site (one site per counter)."""
    hosts = [
        f"{dist.SITE_WORDS[k % len(dist.SITE_WORDS)]}{'' if k < len(dist.SITE_WORDS) else k}{dist.SITE_SUFFIXES[k % 7]}"
        for k in range(size)
    ]
    return hosts, [(k * 5 + k // 8) % len(dist.URL_PATH_LENGTHS) for k in range(size)]


def _filler(lengths: Sequence[int], salt: str) -> list[str]:
    """Query-string-like padding of each length."""
    chunk = f"&{salt}=" + hashlib.sha256(salt.encode()).hexdigest() + "&utm_source=direct&p="
    return [(chunk * (length // len(chunk) + 1))[:length] for length in lengths]


def _titles(size: int) -> list[str]:
    words = dist.TITLE_WORDS
    return [
        f"{words[k % len(words)]} {words[(k * 7 + 3) % len(words)].lower()} — {words[(k * 13 + 5) % len(words)]} {k}"
        for k in range(size)
    ]


class _Plants:
    """Values for the first rows of some columns (None: keep the generated value)."""

    def __init__(self) -> None:
        self.rows = 0
        self.values: dict[str, dict[int, object]] = {}

    def add(self, count: int, **columns: Sequence[object] | object) -> None:
        for name, value in columns.items():
            values = value if isinstance(value, list) else [value] * count
            target = self.values.setdefault(name, {})
            for offset, item in enumerate(values):
                target[self.rows + offset] = item
        self.rows += count

    def apply(self, columns: dict[str, pa.Array]) -> None:
        for name, planted in self.values.items():
            column = columns[name]
            head = pa.array([planted.get(i) for i in range(self.rows)], column.type)
            columns[name] = pa.concat_arrays([pc.coalesce(head, column.slice(0, self.rows)), column.slice(self.rows)])


def _plants(rows: int) -> _Plants:
    """Rows that make Q20-Q24 and the OFFSET queries Q39-Q43 return rows (NOTES, scaled to ``rows``)."""
    plants = _Plants()
    minutes = min(2 * 24 * 60, scaled(1000, rows) + 10)
    # Q39/Q40/Q43: counter 62, distinct link URLs, each in its own minute of 07-14..07-15 (Moscow).
    plants.add(
        minutes,
        CounterID=62,
        IsRefresh=0,
        DontCountHits=0,
        IsLink=1,
        IsDownload=0,
        URL=[f"http://62.example.ru/link/{i}.html" for i in range(minutes)],
        EventTime=[
            Q43_FIRST_DAY * 86400 - MOSCOW_OFFSET_S + 60 * (i * (2880 // minutes)) + i % 60 for i in range(minutes)
        ],
    )
    # Q41: one Referer (its hash planted), traffic sources -1 and 6, distinct URLs.
    count = scaled(100, rows) + 10
    plants.add(
        count,
        CounterID=62,
        IsRefresh=0,
        TraficSourceID=[6 if i % 2 else -1 for i in range(count)],
        Referer=PLANTED_REFERER,
        URL=[f"http://62.example.ru/from-mysw/{i}" for i in range(count)],
    )
    # Q42: one URL (its hash planted) seen in many distinct window sizes.
    count = scaled(10_000, rows) + 10
    plants.add(
        count,
        CounterID=62,
        IsRefresh=0,
        DontCountHits=0,
        URL=PLANTED_URL,
        WindowClientWidth=[320 + i % 1600 for i in range(count)],
        WindowClientHeight=[200 + i // 1600 for i in range(count)],
    )
    plants.add(4, UserID=PLANTED_USER_ID)  # Q20
    # Q21-Q24: 'google' URLs with search phrases; half with 'Google' titles and no '.google.' in the URL.
    count = max(10, round(15_911 * rows / N_FULL))
    plants.add(
        count,
        URL=[
            f"https://google.com/url?sa=t&source=web&cd={i}" if i % 2 else f"http://www.google.ru/search?q={i}&lr=213"
            for i in range(count)
        ],
        Title=[f"Google — результаты поиска {i}" if i % 2 else f"Поиск {i}" for i in range(count)],
        SearchPhrase=[dist.TOP_PHRASES[i % len(dist.TOP_PHRASES)][0] for i in range(count)],
        SearchEngineID=[2 + i % 2 for i in range(count)],
    )
    return plants


def generate_hits(rows: int, seed: int) -> pa.Table:
    """``rows`` rows of ClickBench's ``hits`` table, deterministic for a ``seed``; see the module doc."""
    plants = _plants(rows)
    if rows < max(MIN_ROWS, 2 * plants.rows):
        raise ValueError(f"generate at least {max(MIN_ROWS, 2 * plants.rows)} rows")
    rnd = _Random(rows, seed)
    n_full = float(N_FULL)
    c: dict[str, pa.Array] = {}

    # Time: 30 Moscow days from 07-02, busiest around midday; EventTime is UTC.
    day = rnd.integers("day", 0, DAYS - 1)
    second = pc.cast(pc.floor(pc.multiply(pc.add(rnd.uniform("t1"), rnd.uniform("t2")), 43200.0)), pa.int64())
    c["EventTime"] = pc.subtract(pc.add(pc.multiply(pc.add(day, FIRST_DAY), 86400), second), MOSCOW_OFFSET_S)

    # Counters: named and mid-size ones, then a long tail; each counter has its site.
    heads = dist.NAMED_COUNTERS + dist.MID_COUNTERS
    head_share = sum(w for _, w in heads)
    counter_head = rnd.index("counter", [w for _, w in heads] + [100.0 - head_share])
    in_tail = pc.equal(counter_head, len(heads))
    tail = rnd.skewed("counter_tail", dist.TAIL_COUNTERS, 1.3)
    site = pc.if_else(in_tail, pc.add(tail, len(heads)), counter_head)
    counter_ids = [cid for cid, _ in heads] + [2_000_000 + 37 * k for k in range(dist.TAIL_COUNTERS)]
    c["CounterID"] = pc.take(pa.array(counter_ids, pa.int64()), site)
    regions = rnd.index("region", [w for _, w in dist.NAMED_REGIONS] + [100.0 - sum(w for _, w in dist.NAMED_REGIONS)])
    region_ids = [r for r, _ in dist.NAMED_REGIONS] + [300 + 3 * k for k in range(dist.TAIL_REGIONS)]
    region_tail = pc.add(rnd.skewed("region_tail", dist.TAIL_REGIONS, 1.5), len(dist.NAMED_REGIONS))
    c["RegionID"] = pc.take(
        pa.array(region_ids, pa.int64()), pc.if_else(pc.equal(regions, len(dist.NAMED_REGIONS)), region_tail, regions)
    )

    # Users: ~5.7 rows each, plus heavy users (top 29,097 of 100M rows) who rarely search.
    users = max(1, rows * 10 // 57)
    user = rnd.integers("user", 0, users - 1)
    heavy = rnd.index("heavy", [n_full - sum(dist.HEAVY_USERS)] + [float(w) for w in dist.HEAVY_USERS])
    is_heavy = pc.greater(heavy, 0)
    user = pc.if_else(is_heavy, pc.negate(heavy), user)  # heavy users: -1..-10
    user_mix = _mix(user, seed)
    c["UserID"] = pc.cast(pc.modulo(user_mix, pa.scalar(5_060_000_000_000_000_000, pa.uint64())), pa.int64())
    ip_of_user = _int32(_mix(user, seed + 1))
    heavy_ip = rnd.index("heavy_ip", [n_full - sum(dist.HEAVY_IPS)] + [float(w) for w in dist.HEAVY_IPS])
    top_ips = [0] + [
        int(v) - (1 << 31)
        for v in (
            0x5F0A1C02,
            0x4D9C2E11,
            0x2E8B5521,
            0x7A01B3C4,
            0x0D3E2F10,
            0xB2C4D5E6,
            0xC0A80101,
            0x91E2A3B4,
            0xD4C3B2A1,
            0xE0F1A2B3,
        )
    ]
    c["ClientIP"] = pc.if_else(pc.greater(heavy_ip, 0), pc.take(pa.array(top_ips, pa.int64()), heavy_ip), ip_of_user)
    c["WatchID"] = pc.add(
        pc.multiply(pc.cast(pc.floor(pc.multiply(rnd.uniform("w1"), 2.0**30)), pa.int64()), 1 << 32),
        pc.cast(pc.floor(pc.multiply(rnd.uniform("w2"), 2.0**32)), pa.int64()),
    )

    # Search: 13 % of rows have a phrase (heavy users none); a few phrases are very frequent.
    has_phrase = pc.and_(rnd.chance("phrase", 0.13), pc.invert(is_heavy))
    words = pa.array(dist.PHRASE_WORDS)
    second_word = pc.take(words, rnd.skewed("pw2", len(dist.PHRASE_WORDS), 1.4))
    third = pc.if_else(
        rnd.chance("pw3?", 0.5), _join(" ", pc.take(words, rnd.skewed("pw3", len(dist.PHRASE_WORDS), 1.2))), ""
    )
    number = pc.if_else(
        rnd.chance("pnum?", 0.3), _join(" ", pc.cast(rnd.integers("pnum", 1, max(10, rows // 10)), pa.string())), ""
    )
    combined = _join(pc.take(words, rnd.skewed("pw1", len(dist.PHRASE_WORDS), 1.6)), " ", second_word, third, number)
    top_phrase = rnd.index("top_phrase", [13_000_000 * 0.977] + [float(w) for _, w in dist.TOP_PHRASES])
    phrase = pc.if_else(
        pc.greater(top_phrase, 0), pc.take(pa.array([""] + [p for p, _ in dist.TOP_PHRASES]), top_phrase), combined
    )
    c["SearchPhrase"] = pc.if_else(has_phrase, phrase, "")
    engines = rnd.choice("engine", [e for e, _ in dist.SEARCH_ENGINES], [w for _, w in dist.SEARCH_ENGINES], pa.int64())
    c["SearchEngineID"] = pc.if_else(has_phrase, engines, 0)
    c["AdvEngineID"] = rnd.choice("adv", [a for a, _ in dist.ADV_ENGINES], [w for _, w in dist.ADV_ENGINES], pa.int64())
    c["TraficSourceID"] = rnd.choice(
        "trafic", [t for t, _ in dist.TRAFIC_SOURCES], [w for _, w in dist.TRAFIC_SOURCES], pa.int64()
    )

    # URL: a top URL (8.6 %), else the counter's site with a path whose length depends on the site.
    hosts, length_class = _site_pool(len(counter_ids))
    fillers = pa.array(_filler(dist.URL_PATH_LENGTHS, "u"))
    page = _page(
        rnd, "url_page", _pages(rows, [w for _, w in heads], 100.0 - head_share, dist.TAIL_COUNTERS, 1.3), site
    )
    section = pc.take(pa.array(dist.SECTIONS), pc.modulo(page, len(dist.SECTIONS)))
    path_id = pc.cast(page, pa.string())
    scheme = pc.if_else(rnd.chance("https", 0.08), "https://", "http://")
    site_url = _join(
        scheme,
        pc.take(pa.array(hosts), site),
        "/",
        section,
        "/",
        path_id,
        ".html?",
        pc.take(fillers, pc.take(pa.array(length_class), site)),
    )
    top_url = rnd.index("top_url", [100.0 - sum(w for _, w in dist.TOP_URLS)] + [w for _, w in dist.TOP_URLS])
    url = pc.if_else(pc.greater(top_url, 0), pc.take(pa.array([""] + [u for u, _ in dist.TOP_URLS]), top_url), site_url)
    url = pc.if_else(rnd.chance("url_empty", 0.01), "", url)
    is_62 = pc.equal(c["CounterID"], 62)
    c["URL"] = pc.if_else(pc.and_(is_62, rnd.chance("url62", 0.14)), "http://62.example.ru/", url)
    titles = pa.array(_titles(max(50, min(20_000, rows // 20))))
    title = pc.take(titles, rnd.skewed("title", len(titles), 2.0))
    title = pc.if_else(rnd.chance("title_empty", 0.05), "", title)
    c["Title"] = pc.if_else(pc.and_(is_62, rnd.chance("title62", 0.165)), "Каталог товаров — 62.example.ru", title)

    # Referer: 15 % empty; named domains, then a tail; http/https, www. or not; a few without a path.
    domains = [d for d, _ in dist.REFERER_DOMAINS] + [
        f"ref{k}{dist.SITE_SUFFIXES[k % 7] or '.ru'}" for k in range(dist.REFERER_TAIL)
    ]
    domain_head = rnd.index(
        "ref_domain", [w for _, w in dist.REFERER_DOMAINS] + [85.0 - sum(w for _, w in dist.REFERER_DOMAINS)]
    )
    domain = pc.if_else(
        pc.equal(domain_head, len(dist.REFERER_DOMAINS)),
        pc.add(rnd.skewed("ref_tail", dist.REFERER_TAIL, 1.4), len(dist.REFERER_DOMAINS)),
        domain_head,
    )
    referer_fillers = pa.array(_filler(dist.REFERER_PATH_LENGTHS, "r"))
    named_shares = [w for _, w in dist.REFERER_DOMAINS]
    referer_page = _page(
        rnd, "ref_page", _pages(rows, named_shares, 85.0 - sum(named_shares), dist.REFERER_TAIL, 1.4), domain
    )
    referer_class = pc.modulo(pc.multiply(domain, 3), len(dist.REFERER_PATH_LENGTHS))
    referer = _join(
        pc.if_else(rnd.chance("ref_https", 0.3), "https://", "http://"),
        pc.if_else(rnd.chance("ref_www", 0.3), "www.", ""),
        pc.take(pa.array(domains), domain),
        pc.if_else(
            rnd.chance("ref_no_path", 0.005),
            "",
            _join(
                "/",
                pc.take(pa.array(dist.SECTIONS), pc.modulo(referer_page, len(dist.SECTIONS))),
                "?id=",
                pc.cast(referer_page, pa.string()),
                pc.take(referer_fillers, referer_class),
            ),
        ),
    )
    referer = pc.if_else(rnd.chance("ref_upper", 0.0005), pc.utf8_upper(referer), referer)
    c["Referer"] = pc.if_else(rnd.chance("ref_empty", 0.15), "", referer)

    # Flags and screens.
    c["IsRefresh"] = rnd.flag("refresh", 0.10)
    c["DontCountHits"] = rnd.flag("dont_count", 0.03)
    c["IsLink"] = rnd.flag("link", 0.03)
    c["IsDownload"] = rnd.flag("download", 0.005)
    screen = rnd.index("screen", [w for _, _, w in dist.WIDTHS])
    c["ResolutionWidth"] = pc.take(pa.array([w for w, _, _ in dist.WIDTHS], pa.int64()), screen)
    c["ResolutionHeight"] = pc.take(pa.array([h for _, h, _ in dist.WIDTHS], pa.int64()), screen)
    c["WindowClientWidth"] = pc.max_element_wise(pc.subtract(c["ResolutionWidth"], rnd.integers("ww", 0, 400)), 0)
    c["WindowClientHeight"] = pc.max_element_wise(pc.subtract(c["ResolutionHeight"], rnd.integers("wh", 60, 400)), 0)
    model = rnd.index("model", [w for _, w in dist.MOBILE_MODELS])
    c["MobilePhoneModel"] = pc.take(pa.array([m for m, _ in dist.MOBILE_MODELS]), model)
    ipad = pc.if_else(rnd.chance("ipad_code", 0.9), 1, 5)
    other_phone = rnd.choice("phone", [5, 6, 7, 26, 44], [5, 3, 2, 1, 1], pa.int64())
    c["MobilePhone"] = pc.if_else(pc.equal(model, 0), 0, pc.if_else(pc.equal(model, 1), ipad, other_phone))
    c["IsMobile"] = pc.cast(pc.greater(model, 0), pa.int64())

    plants.apply(c)

    # Derived after planting: the Moscow date, the other clocks, the hashes.
    event_time = c.pop("EventTime")
    c["EventDate"] = pc.cast(pc.divide(pc.add(event_time, MOSCOW_OFFSET_S), 86400), pa.int32())
    c["EventTime"] = event_time
    c["ClientEventTime"] = pc.add(event_time, rnd.integers("client_clock", -90, 90))
    c["LocalEventTime"] = pc.add(event_time, pc.add(MOSCOW_OFFSET_S, rnd.integers("local_clock", -5, 5)))
    c["URLHash"] = _string_hash(c["URL"], {PLANTED_URL: PLANTED_URL_HASH})
    c["RefererHash"] = _string_hash(c["Referer"], {PLANTED_REFERER: PLANTED_REFERER_HASH})

    # The columns no query reads: plausible values.
    small = rnd.integers
    c.update(
        JavaEnable=rnd.flag("java", 0.8),
        GoodEvent=rnd.constant(1, pa.int64()),
        CounterClass=small("counter_class", 0, 2),
        OS=rnd.choice("os", [2, 44, 49, 56, 114, 118, 126], [30, 20, 15, 10, 10, 10, 5], pa.int64()),
        UserAgent=rnd.choice("ua", [2, 3, 4, 7, 13, 44], [30, 25, 15, 15, 10, 5], pa.int64()),
        RefererCategoryID=small("ref_cat", 0, 20),
        RefererRegionID=c["RegionID"],
        URLCategoryID=small("url_cat", 0, 20),
        URLRegionID=c["RegionID"],
        ResolutionDepth=rnd.choice("depth", [24, 32, 16], [60, 38, 2], pa.int64()),
        FlashMajor=rnd.choice("flash", [0, 10, 11], [30, 20, 50], pa.int64()),
        FlashMinor=small("flash_minor", 0, 9),
        FlashMinor2=pc.if_else(rnd.chance("flash2", 0.4), "", pc.cast(small("flash2v", 0, 999), pa.string())),
        NetMajor=small("net_major", 0, 4),
        NetMinor=small("net_minor", 0, 9),
        UserAgentMajor=small("ua_major", 0, 30),
        UserAgentMinor=rnd.choice("ua_minor", ["0", "1", "5", "D0", "10", "b"], [40, 20, 10, 10, 10, 10], pa.string()),
        CookieEnable=rnd.flag("cookie", 0.98),
        JavascriptEnable=rnd.flag("js", 0.98),
        Params=pc.if_else(rnd.chance("params", 0.02), _join("param=", pc.cast(small("pv", 0, 999), pa.string())), ""),
        IPNetworkID=small("ip_net", 0, 5_000_000),
        IsArtifical=rnd.flag("artificial", 0.01),
        ClientTimeZone=rnd.choice("tz", [-1, 0, 3, 4, 5, 6], [5, 5, 10, 70, 5, 5], pa.int64()),
        SilverlightVersion1=rnd.choice("sl1", [0, 4, 5], [60, 10, 30], pa.int64()),
        SilverlightVersion2=small("sl2", 0, 1),
        SilverlightVersion3=rnd.choice("sl3", [0, 51204, 60310, 61118], [60, 15, 15, 10], pa.int64()),
        SilverlightVersion4=small("sl4", 0, 3),
        PageCharset=rnd.choice("charset", ["windows-1251", "utf-8", ""], [50, 45, 5], pa.string()),
        CodeVersion=rnd.choice("code", [0, 500, 588, 680], [10, 30, 30, 30], pa.int64()),
        IsNotBounce=rnd.flag("bounce", 0.3),
        FUniqID=pc.if_else(
            rnd.chance("funiq0", 0.4),
            0,
            pc.cast(pc.modulo(_mix(user, seed + 2), pa.scalar(1 << 62, pa.uint64())), pa.int64()),
        ),
        OriginalURL=pc.if_else(rnd.chance("orig", 0.03), c["URL"], ""),
        HID=small("hid", -(2**31), 2**31 - 1),
        IsOldCounter=rnd.flag("old", 0.2),
        IsEvent=rnd.flag("event", 0.02),
        IsParameter=rnd.flag("parameter", 0.01),
        WithHash=rnd.flag("with_hash", 0.01),
        HitColor=rnd.choice("color", ["5", "D", "E", "F"], [40, 20, 20, 20], pa.string()),
        Age=rnd.choice("age", [0, 1, 2, 3, 4, 5], [40, 5, 20, 20, 10, 5], pa.int64()),
        Sex=small("sex", 0, 2),
        Income=small("income", 0, 4),
        Interests=rnd.choice("interests", [0, 1, 16, 256, 797, 2052], [40, 10, 10, 10, 20, 10], pa.int64()),
        Robotness=rnd.choice("robot", [0, 1, 2, 4], [90, 4, 3, 3], pa.int64()),
        RemoteIP=_int32(_mix(user, seed + 3)),
        WindowName=pc.if_else(rnd.chance("window_name", 0.6), -1, small("wn", 0, 2**31 - 1)),
        OpenerName=pc.if_else(rnd.chance("opener_name", 0.8), -1, small("on", 0, 2**31 - 1)),
        HistoryLength=small("history", 0, 20),
        BrowserLanguage=rnd.choice("lang", ["ru", "en", "uk", "be", "de", ""], [70, 10, 8, 4, 3, 5], pa.string()),
        BrowserCountry=rnd.choice("country", ["ru", "ua", "by", "kz", "de", ""], [70, 10, 5, 5, 5, 5], pa.string()),
        SocialNetwork=rnd.constant("", pa.string()),
        SocialAction=rnd.constant("", pa.string()),
        HTTPError=pc.if_else(rnd.chance("http_error", 0.002), 404, 0),
        SendTiming=small("send", 0, 500),
        DNSTiming=small("dns", 0, 300),
        ConnectTiming=small("connect", 0, 500),
        ResponseStartTiming=small("response_start", 0, 2000),
        ResponseEndTiming=small("response_end", 0, 3000),
        FetchTiming=small("fetch", 0, 5000),
        SocialSourceNetworkID=rnd.constant(0, pa.int64()),
        SocialSourcePage=rnd.constant("", pa.string()),
        ParamPrice=pc.if_else(rnd.chance("price", 0.01), small("price_v", 1, 100_000), 0),
        ParamOrderID=rnd.constant("", pa.string()),
        ParamCurrency=pc.if_else(rnd.chance("currency", 0.01), "RUB", ""),
        ParamCurrencyID=rnd.constant(0, pa.int64()),
        OpenstatServiceName=rnd.constant("", pa.string()),
        OpenstatCampaignID=rnd.constant("", pa.string()),
        OpenstatAdID=rnd.constant("", pa.string()),
        OpenstatSourceID=rnd.constant("", pa.string()),
        UTMSource=pc.if_else(rnd.chance("utm", 0.02), "direct", ""),
        UTMMedium=pc.if_else(rnd.chance("utm_medium", 0.02), "cpc", ""),
        UTMCampaign=rnd.constant("", pa.string()),
        UTMContent=rnd.constant("", pa.string()),
        UTMTerm=rnd.constant("", pa.string()),
        FromTag=rnd.constant("", pa.string()),
        HasGCLID=rnd.flag("gclid", 0.001),
        CLID=pc.if_else(rnd.chance("clid", 0.05), small("clid_v", 1, 2_000_000), 0),
    )

    schema = hits_schema()
    arrays = []
    for field in schema:
        column = c[field.name]
        if field.name in _TIME_COLUMNS:
            column = pc.multiply(column, 1_000_000).cast(pa.timestamp("us"))
        elif field.name == "EventDate":
            column = column.cast(pa.date32())
        arrays.append(column.cast(field.type))
    table = pa.Table.from_arrays(arrays, schema=schema)
    order = pc.sort_indices(
        table,
        sort_keys=[(key, "ascending") for key in ("CounterID", "EventDate", "UserID", "EventTime", "WatchID")],
    )
    return table.take(order)
