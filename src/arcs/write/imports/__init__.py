"""Bulk import: a file of line protocol, MessagePack, CSV or Parquet, stored as writes are.

A file of any size is read in bounded chunks, twice. The first pass decodes every chunk and checks
it against the stored schemas (planned as if the chunks before it were stored) and stores nothing:
a file that is wrong anywhere is a 4xx naming the lines or rows, and changes nothing. Then the
columns the file adds are recorded in one catalog write, and the second pass decodes the chunks
again and stores them through the ingest protocol (``arcs.write.ingest``), a group of chunks per
attempt, each chunk a write whose id is derived from the database, the import id and the chunk's
number. A retried import (the same id), or one resumed after a crash, stores every chunk once:
the write markers say which chunks a previous run committed.

What one import holds at once is a chunk being decoded, or one being written, whatever the
file's size. Its progress is a small JSON record under
``{prefix}/_arcs/imports/{database}/{id}.json``, updated as it runs (docs/import.md).

``options`` holds what an import is asked to do; ``decompress`` and ``chunks`` read the file in
bounded chunks; ``check`` checks it whole; ``store`` stores it chunk by chunk and resumes an
import a crash stopped. The package itself imports nothing: each user loads only what it needs.
"""
