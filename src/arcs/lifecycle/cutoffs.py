"""Cutoffs: which stored hours and files are old enough to go, for retention policies and for the
rules continuous queries derive (``arcs.continuous_queries.retention``).

A cutoff is ``now - retention_days - buffer_days``; an hour partition (a day or month file) goes only
once its whole span ends at or before it, so no row newer than the cutoff is ever touched.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from arcs import layout
from arcs.ports import FileRecord, RetentionPolicy

HOUR = timedelta(hours=1)
DEFAULT_BUFFER_DAYS = 7  # as Arc's


def days_cutoff(now: datetime, retention_days: int, buffer_days: int) -> datetime:
    """Rows older than this may go: the retention period plus the buffer before ``now``."""
    return now - timedelta(days=retention_days + buffer_days)


def cutoff(policy: RetentionPolicy, now: datetime) -> datetime:
    return days_cutoff(now, policy.retention_days, policy.buffer_days)


def expired(hour: datetime, limit: datetime) -> bool:
    """True if the whole hour partition starting at ``hour`` ends at or before ``limit``."""
    return hour + HOUR <= limit


def file_expired(record: FileRecord, limit: datetime) -> bool:
    """True if everything ``record`` can hold is older than ``limit``: the whole hour of an hour's
    file, the whole day (month) of a day (month) file (one that straddles the limit holds rows to
    keep, so it stays)."""
    return layout.tier_end(record.hour, layout.key_tier(record.key)) <= limit


def last_expired_hour(limit: datetime) -> datetime:
    """The latest hour partition that is entirely older than ``limit``."""
    return layout.floor_hour(limit) - HOUR
