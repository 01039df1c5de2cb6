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

The parts: ``clickbench/hits_schema.py`` (the schema and the file layout), ``sampling.py`` (the
seeded draws) and ``planted.py`` (the planted rows and the scaled constants).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from clickbench import distributions as dist
from clickbench import sampling
from clickbench.hits_schema import TIME_COLUMNS, hits_schema, to_parquet_layout
from clickbench.planted import (
    MOSCOW_OFFSET_S,
    PLANTED_REFERER,
    PLANTED_REFERER_HASH,
    PLANTED_URL,
    PLANTED_URL_HASH,
    PLANTED_USER_ID,
    planted_rows,
    scale_query,
    scaled,
)

#: The data's API: the table, its schema and file layout, and the scaling of the queries' constants.
__all__ = [
    "N_FULL",
    "PLANTED_REFERER_HASH",
    "PLANTED_URL_HASH",
    "PLANTED_USER_ID",
    "generate_hits",
    "hits_schema",
    "scale_query",
    "scaled",
    "to_parquet_layout",
]

N_FULL = dist.N_FULL
FIRST_DAY = 15888  # 2013-07-02, days since 1970-01-01: EventDate runs over 30 days from here
DAYS = 30
MIN_ROWS = 1000


def generate_hits(rows: int, seed: int) -> pa.Table:
    """``rows`` rows of ClickBench's ``hits`` table, deterministic for a ``seed``; see the module doc."""
    plants = planted_rows(rows)
    if rows < max(MIN_ROWS, 2 * plants.rows):
        raise ValueError(f"generate at least {max(MIN_ROWS, 2 * plants.rows)} rows")
    rnd = sampling.Random(rows, seed)
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
    user_mix = sampling.mix(user, seed)
    c["UserID"] = pc.cast(pc.modulo(user_mix, pa.scalar(5_060_000_000_000_000_000, pa.uint64())), pa.int64())
    ip_of_user = sampling.int32(sampling.mix(user, seed + 1))
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
        rnd.chance("pw3?", 0.5), sampling.join(" ", pc.take(words, rnd.skewed("pw3", len(dist.PHRASE_WORDS), 1.2))), ""
    )
    number = pc.if_else(
        rnd.chance("pnum?", 0.3),
        sampling.join(" ", pc.cast(rnd.integers("pnum", 1, max(10, rows // 10)), pa.string())),
        "",
    )
    combined = sampling.join(
        pc.take(words, rnd.skewed("pw1", len(dist.PHRASE_WORDS), 1.6)), " ", second_word, third, number
    )
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
    hosts, length_class = sampling.site_pool(len(counter_ids))
    fillers = pa.array(sampling.filler(dist.URL_PATH_LENGTHS, "u"))
    page = sampling.page(
        rnd, "url_page", sampling.pages(rows, [w for _, w in heads], 100.0 - head_share, dist.TAIL_COUNTERS, 1.3), site
    )
    section = pc.take(pa.array(dist.SECTIONS), pc.modulo(page, len(dist.SECTIONS)))
    path_id = pc.cast(page, pa.string())
    scheme = pc.if_else(rnd.chance("https", 0.08), "https://", "http://")
    site_url = sampling.join(
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
    titles = pa.array(sampling.titles(max(50, min(20_000, rows // 20))))
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
    referer_fillers = pa.array(sampling.filler(dist.REFERER_PATH_LENGTHS, "r"))
    named_shares = [w for _, w in dist.REFERER_DOMAINS]
    referer_page = sampling.page(
        rnd, "ref_page", sampling.pages(rows, named_shares, 85.0 - sum(named_shares), dist.REFERER_TAIL, 1.4), domain
    )
    referer_class = pc.modulo(pc.multiply(domain, 3), len(dist.REFERER_PATH_LENGTHS))
    referer = sampling.join(
        pc.if_else(rnd.chance("ref_https", 0.3), "https://", "http://"),
        pc.if_else(rnd.chance("ref_www", 0.3), "www.", ""),
        pc.take(pa.array(domains), domain),
        pc.if_else(
            rnd.chance("ref_no_path", 0.005),
            "",
            sampling.join(
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
    c["URLHash"] = sampling.string_hash(c["URL"], {PLANTED_URL: PLANTED_URL_HASH})
    c["RefererHash"] = sampling.string_hash(c["Referer"], {PLANTED_REFERER: PLANTED_REFERER_HASH})

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
        Params=pc.if_else(
            rnd.chance("params", 0.02), sampling.join("param=", pc.cast(small("pv", 0, 999), pa.string())), ""
        ),
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
            pc.cast(pc.modulo(sampling.mix(user, seed + 2), pa.scalar(1 << 62, pa.uint64())), pa.int64()),
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
        RemoteIP=sampling.int32(sampling.mix(user, seed + 3)),
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
        if field.name in TIME_COLUMNS:
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
