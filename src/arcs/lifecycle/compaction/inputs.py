"""A compaction job's inputs read into its work directory; a file that is not readable Parquet is
moved to the quarantine (outside every data prefix), recorded there, and its file record removed."""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from arcs import layout
from arcs.errors import NotFound
from arcs.lifecycle.compaction.merge import CorruptInput, check_parquet
from arcs.ports import FileRecord

if TYPE_CHECKING:
    from arcs.lifecycle.compaction.compactor import Compactor

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Staged:
    """An input that read as Parquet: its record, a local path to it, and its schema."""

    record: FileRecord
    path: Path
    schema: pa.Schema


def stage(c: Compactor, picked: list[FileRecord], tmp: Path, job_id: str) -> tuple[list[Staged], list[str]]:
    staged: list[Staged] = []
    quarantined: list[str] = []
    inputs = tmp / "inputs"
    inputs.mkdir()
    for index, record in enumerate(picked):
        try:
            path = _local_copy(c, record, inputs / f"{index:06d}.parquet")
            schema = check_parquet(path, record.rows)
        except CorruptInput as exc:
            _quarantine(c, record, exc.message, job_id)
            quarantined.append(record.key)
            continue
        staged.append(Staged(record, path, schema))
    return staged, quarantined


def _local_copy(c: Compactor, record: FileRecord, target: Path) -> Path:
    url = c.store.url(record.key)
    if "://" not in url:
        if not Path(url).is_file():
            raise CorruptInput(f"{record.key} is listed but missing")
        return Path(url)  # a local store: read in place
    try:
        data = c.store.get(record.key)
    except NotFound as exc:
        raise CorruptInput(f"{record.key} is listed but missing") from exc
    target.write_bytes(data)
    return target


def _quarantine(c: Compactor, record: FileRecord, reason: str, job_id: str) -> None:
    """Move a bad file out of the data prefixes, say why next to it, and stop listing it."""
    logger.error("quarantining %s: %s", record.key, reason)
    target = layout.quarantine_key(c.prefix, record.key)
    with contextlib.suppress(NotFound):  # if it is gone, the note below still says what was listed
        c.store.put(target, c.store.get(record.key))
    note = {
        "key": record.key,
        "reason": reason,
        "job_id": job_id,
        "at": c._now().isoformat(),
        "record": {"rows": record.rows, "size": record.size, "commit_id": record.commit_id},
    }
    c.store.put(target + ".json", json.dumps(note).encode())
    c.catalog.delete_files([record])
    c.store.delete(record.key)
