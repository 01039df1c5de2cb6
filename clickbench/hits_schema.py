"""ClickBench's ``hits`` table: its schema (``CREATE TABLE hits``, ``hits_schema.sql``) as Arrow, and
the physical layout of the official ``hits.parquet`` a generated table is written in.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

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
TIME_COLUMNS = ("EventTime", "ClientEventTime", "LocalEventTime")


def hits_schema() -> pa.Schema:
    """The Arrow schema of ``CREATE TABLE hits``: names, order, types, NOT NULL as non-nullable."""
    fields = []
    for line in _SCHEMA.strip().splitlines():
        name, kind, *rest = line.split()
        fields.append(pa.field(name, _ARROW_TYPES[kind.upper()], nullable=rest != ["NOT", "NULL"]))
    return pa.schema(fields)


def to_parquet_layout(table: pa.Table) -> pa.Table:
    """The official ``hits.parquet`` layout: times as INT64 Unix seconds, EventDate as UINT16 days,
    strings as binary (read with ``binary_as_string``)."""
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if field.name in TIME_COLUMNS:
            column = pc.divide(column.cast(pa.int64()), 1_000_000)
        elif field.name == "EventDate":
            column = column.cast(pa.int32()).cast(pa.uint16())
        elif pa.types.is_string(field.type):
            column = column.cast(pa.binary())
        columns.append(column)
    return pa.table(columns, names=table.column_names)
