"""Dropping a database: its catalog entries first, then its data objects (``DELETE /api/v1/databases/{name}``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from arcs.layout import parse_data_key
from arcs.ports import DataCatalog, ObjectStore

_DELETE_WORKERS = 8


@dataclass(frozen=True, slots=True)
class DropResult:
    existed: bool  # the catalog knew the database (or a crashed drop had left part of it)
    objects_deleted: int
    objects_kept: int  # written by a write that raced the drop, and listed again since


def database_prefix(prefix: str, database: str) -> str:
    """The key prefix of every data object of ``database`` (``{prefix}/{db}/``)."""
    head = prefix.strip("/")
    return f"{head}/{database}/" if head else f"{database}/"


def drop_database(catalog: DataCatalog, store: ObjectStore, prefix: str, database: str) -> DropResult:
    """Delete a database: its catalog entries first, then its data objects.

    The order is what makes a crash harmless. Readers find files only through the catalog, and
    the catalog drops schemas before file records (``Catalog.drop_database``), so once the first
    step has begun no query can see part of a measurement; objects deleted after that are
    already invisible. The other order would let a crash leave file records pointing at deleted
    objects: queries of the measurement would fail, or silently miss rows. Calling this again
    after a crash finishes the job (the catalog step is idempotent, the objects are listed anew).

    Writes that race the drop may or may not survive it; whatever a write listed in the catalog
    after the catalog step is kept, so no file record is left pointing at a deleted object.
    """
    existed = catalog.drop_database(database)
    keys = [info.key for info in store.list(database_prefix(prefix, database))]
    keep: set[str] = set()
    measurements = {_measurement_of(prefix, key) for key in keys}
    for measurement in sorted(m for m in measurements if m is not None):
        if catalog.get_schema(database, measurement) is not None:
            keep.update(f.key for f in catalog.list_files(database, measurement))
    doomed = [key for key in keys if key not in keep]
    if doomed:
        with ThreadPoolExecutor(max_workers=min(_DELETE_WORKERS, len(doomed))) as pool:
            list(pool.map(store.delete, doomed))  # list() surfaces the first failure
    return DropResult(existed, len(doomed), len(keys) - len(doomed))


def _measurement_of(prefix: str, key: str) -> str | None:
    try:
        return parse_data_key(prefix, key).measurement
    except ValueError:
        return None
