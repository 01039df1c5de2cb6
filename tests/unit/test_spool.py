"""The standalone server's spool: an fsynced append-only log, group commit, restart and cleanup."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from arcs.adapters.local.queue import MAX_FREE_SEGMENTS, Spool
from arcs.errors import StorageFault


def _ids(spool: Spool) -> list[str]:
    return [entry.write_id for entry in spool.take(10_000)]


def _segments(root: Path) -> list[Path]:
    return sorted(root.glob("*.log"))


def test_records_come_back_in_order_and_whole(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    envelopes = {f"w{i}": os.urandom(i * 37) for i in range(20)}
    for write_id, envelope in envelopes.items():
        spool.enqueue(write_id, envelope)
    entries = spool.take(100)
    assert [e.write_id for e in entries] == list(envelopes)
    assert [spool.read(e) for e in entries] == list(envelopes.values())
    assert [e.write_id for e in spool.take(3)] == ["w0", "w1", "w2"]  # take does not consume
    assert len({e.handle for e in entries}) == 20


def test_restart_redelivers_what_is_not_done(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for i in range(6):
        spool.enqueue(f"w{i}", b"x" * i)
    spool.done(spool.take(2))
    again = Spool(tmp_path)
    # Done records of the segment still being appended to come back too (their markers say done).
    assert _ids(again) == [f"w{i}" for i in range(6)]
    again.enqueue("w6", b"new")
    assert _ids(again)[-1] == "w6"
    assert len(_segments(tmp_path)) == 2  # a restart appends to a new segment


def test_segments_rotate_and_are_deleted_once_all_done(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=200)
    for i in range(10):
        spool.enqueue(f"w{i}", b"y" * 250)
    assert len(_segments(tmp_path)) == 10
    spool.done(spool.take(4))
    assert len(_segments(tmp_path)) == 6
    spool.done(spool.take(100))
    assert len(_segments(tmp_path)) == 1  # the active segment stays until the next rotation
    spool.enqueue("w10", b"z" * 250)
    assert len(_segments(tmp_path)) == 1
    assert _ids(Spool(tmp_path)) == ["w10"]


def test_a_torn_or_corrupt_tail_ends_the_segment(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for i in range(3):
        spool.enqueue(f"w{i}", b"payload-%d" % i)
    (segment,) = _segments(tmp_path)
    _first, second, last = spool.take(3)
    whole = segment.read_bytes()
    end = last.offset + last.length
    # The last record cut short, as by a crash before its sync: its tail still reads as zeros.
    segment.write_bytes(whole[: end - 4] + bytes(4) + whole[end:])
    assert _ids(Spool(tmp_path)) == ["w0", "w1"]
    damaged = bytearray(whole)
    damaged[second.offset + second.length // 2] ^= 0xFF  # a flipped bit inside the second record
    for stale in _segments(tmp_path):
        stale.unlink()
    segment.write_bytes(bytes(damaged))
    restarted = Spool(tmp_path)
    entries = restarted.take(10)
    assert [e.write_id for e in entries] == ["w0"]
    assert restarted.read(entries[0]) == b"payload-0"


def test_an_empty_leftover_segment_is_removed(tmp_path: Path) -> None:
    (tmp_path / "0000000000000007.log").write_bytes(b"")
    spool = Spool(tmp_path)
    assert spool.take(10) == []
    spool.enqueue("w", b"1")
    assert [p.name for p in _segments(tmp_path)] == ["0000000000000008.log"]


def test_concurrent_writers_share_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = []
    real = os.fdatasync

    def slow_sync(fd: int) -> None:
        syncs.append(fd)
        time.sleep(0.01)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_sync)
    spool = Spool(tmp_path)
    spool.enqueue("first", b"0")  # opens the segment before the race

    def writer(n: int) -> None:
        for i in range(10):
            spool.enqueue(f"t{n}-{i}", b"v" * 100)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(syncs) < 60  # 81 writes; each waited for a sync that covered it
    assert sorted(_ids(Spool(tmp_path))) == sorted(["first", *(f"t{n}-{i}" for n in range(8) for i in range(10))])


def test_a_failed_sync_is_a_storage_fault_and_nothing_is_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = Spool(tmp_path)
    spool.enqueue("ok", b"1")
    real = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(StorageFault, match="could not sync"):
        spool.enqueue("lost", b"2")
    assert _ids(spool) == ["ok"]
    monkeypatch.setattr(os, "fdatasync", real)
    spool.enqueue("later", b"3")
    assert _ids(spool) == ["ok", "later"]
    assert len(_segments(tmp_path)) == 2  # after a failed sync, appends go to a new segment


def test_dead_letters_are_kept_and_leave_the_queue(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_attempts=2)
    spool.enqueue("bad", b"poison")
    spool.enqueue("good", b"fine")
    first = spool.take(1)[0]
    assert not spool.failed(first)
    second = spool.take(1)[0]
    assert second.attempts == 2
    assert spool.failed(second)
    assert _ids(spool) == ["good"]
    (kept,) = (tmp_path / "dead-letter").iterdir()
    assert kept.read_bytes() == b"poison" and "bad" in kept.name
    # Its segment is still the active one, so a restart before the next rotation reads it again
    # (and sets it aside again, under the same name).
    assert _ids(Spool(tmp_path)) == ["bad", "good"]


def test_files_of_the_earlier_one_file_per_write_spool_are_delivered(tmp_path: Path) -> None:
    legacy = tmp_path / "00000000000000000001-00000001-abc.write"
    legacy.write_bytes(b"old envelope")
    spool = Spool(tmp_path)
    spool.enqueue("new", b"n")
    entries = spool.take(10)
    assert [(e.write_id, spool.read(e)) for e in entries] == [("abc", b"old envelope"), ("new", b"n")]
    spool.done(entries[:1])
    assert not legacy.exists()


def test_segments_are_preallocated_and_written_over_in_place(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=4096)
    spool.enqueue("w0", b"a" * 100)
    (segment,) = _segments(tmp_path)
    assert segment.stat().st_size == 4096  # zeroed ahead: a sync then changes no file size
    spool.enqueue("w1", b"b" * 100)
    assert segment.stat().st_size == 4096
    assert _ids(Spool(tmp_path)) == ["w0", "w1"]


def test_a_recycled_segment_never_yields_its_earlier_records(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=1024)
    for i in range(8):
        spool.enqueue(f"old{i}", b"o" * 100)  # fills the first segment past its size
    spool.enqueue("rotate", b"r")  # starts the second segment
    first = _segments(tmp_path)[0]
    spool.done([e for e in spool.take(100) if e.write_id.startswith("old")])
    assert not first.exists() and len(list(tmp_path.glob("*.free"))) == 1
    for i in range(8):
        spool.enqueue(f"fill{i}", b"f" * 100)  # rotates into the recycled file
    spool.enqueue("new", b"n")
    names = [p.name for p in _segments(tmp_path)]
    assert len(names) == 2 and not list(tmp_path.glob("*.free"))
    # The recycled file still holds the old records after the new one; they are not read back.
    recycled = tmp_path / names[-1]
    assert b"old7" in recycled.read_bytes()
    assert _ids(Spool(tmp_path)) == ["rotate", *(f"fill{i}" for i in range(8)), "new"]


def test_free_segments_are_capped_and_count_toward_numbering(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=256)
    for i in range(6):
        spool.enqueue(f"w{i}", b"x" * 300)  # one segment each
    spool.done(spool.take(5))
    assert len(list(tmp_path.glob("*.free"))) == MAX_FREE_SEGMENTS
    assert len(_segments(tmp_path)) == 1
    spool.done(spool.take(1))
    spool.enqueue("late", b"y" * 300)
    # The newest segment's number lives on in a free file; a restart numbers after it.
    highest = max(int(p.name.split(".")[0]) for p in tmp_path.iterdir() if p.is_file())
    again = Spool(tmp_path, segment_bytes=256)
    again.enqueue("after", b"z")
    assert int(_segments(tmp_path)[-1].name.split(".")[0]) == highest + 1
    assert _ids(again)[-1] == "after"


def test_segments_of_the_earlier_growing_format_are_read(tmp_path: Path) -> None:
    import struct
    import zlib

    records = b""
    for write_id, envelope in (("v1a", b"first"), ("v1b", b"second")):
        key = write_id.encode()
        checksum = zlib.crc32(envelope, zlib.crc32(key))
        records += struct.pack("<4sIII", b"ARS1", len(key), len(envelope), checksum) + key + envelope
    (tmp_path / "0000000000000003.log").write_bytes(records + b"ARS1\x05")  # a torn third record
    spool = Spool(tmp_path)
    spool.enqueue("v2", b"third")
    entries = spool.take(10)
    assert [(e.write_id, spool.read(e)) for e in entries] == [("v1a", b"first"), ("v1b", b"second"), ("v2", b"third")]


def test_records_of_the_previous_version_s_checksum_are_read_beside_new_ones(tmp_path: Path) -> None:
    import struct
    import zlib

    import google_crc32c

    nonce = 0x1234_5678_9ABC_DEF0
    segment = struct.pack("<4s4xQ", b"ARSG", nonce)
    for write_id, envelope in (("v2a", b"first"), ("v2b", b"second")):  # zlib's CRC-32, as v2 wrote
        key, fields = write_id.encode(), struct.pack("<QII", nonce, len(write_id), len(envelope))
        checksum = zlib.crc32(envelope, zlib.crc32(key, zlib.crc32(fields)))
        segment += b"ARS2" + fields + struct.pack("<I", checksum) + key + envelope
    key, envelope = b"v3", b"third"
    fields = struct.pack("<QII", nonce, len(key), len(envelope))
    checksum = google_crc32c.extend(google_crc32c.extend(google_crc32c.value(fields), key), envelope)
    segment += b"ARS3" + fields + struct.pack("<I", checksum) + key + envelope
    # A record whose CRC-32C does not match (here: zlib's, the wrong one for v3) ends the segment.
    key, envelope = b"bad", b"fourth"
    fields = struct.pack("<QII", nonce, len(key), len(envelope))
    segment += b"ARS3" + fields + struct.pack("<I", zlib.crc32(envelope, zlib.crc32(key, zlib.crc32(fields))))
    segment += key + envelope
    (tmp_path / "0000000000000003.log").write_bytes(segment + bytes(64))
    spool = Spool(tmp_path)
    spool.enqueue("new", b"fifth")
    entries = spool.take(10)
    assert [(e.write_id, spool.read(e)) for e in entries] == [
        ("v2a", b"first"),
        ("v2b", b"second"),
        ("v3", b"third"),
        ("new", b"fifth"),
    ]
    new_segment = entries[-1].path.read_bytes()
    assert new_segment[16:20] == b"ARS3"  # the first record after the segment's header


def test_read_shares_one_descriptor_per_segment_and_refuses_finished_records(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=1024)
    envelopes = {f"w{i}": os.urandom(300 + i) for i in range(6)}  # two segments' worth
    for write_id, envelope in envelopes.items():
        spool.enqueue(write_id, envelope)
    entries = spool.take(10)
    assert [spool.read(e) for e in entries] == list(envelopes.values())
    assert len(spool._readers) == len({e.path for e in entries})
    first = [e for e in entries if e.path == entries[0].path]
    rest = entries[len(first) :]
    assert first and rest
    spool.done(first)  # the first segment is finished: its descriptor is closed
    assert entries[0].path not in spool._readers
    with pytest.raises(StorageFault, match="not waiting"):
        spool.read(entries[0])
    assert spool.read(rest[0]) == envelopes[rest[0].write_id]


def test_a_large_file_of_the_earlier_spool_is_deleted_not_recycled(tmp_path: Path) -> None:
    legacy = tmp_path / "00000000000000000001-00000001-big.write"
    legacy.write_bytes(b"e" * 2048)
    spool = Spool(tmp_path, segment_bytes=1024)
    spool.done(spool.take(1))
    assert not legacy.exists() and not list(tmp_path.glob("*.free"))


def test_an_earlier_life_s_records_never_pass_for_the_new_one_s(tmp_path: Path) -> None:
    # Ids and envelopes of one size: new records end exactly where old ones start.
    spool = Spool(tmp_path, segment_bytes=2048)
    for i in range(9):
        spool.enqueue(f"old-{i}", b"o" * 200)  # fills the first segment
    for i in range(9):
        spool.enqueue(f"mid-{i}", b"m" * 200)  # fills the second
    spool.done([e for e in spool.take(100) if e.write_id.startswith("old")])
    spool.enqueue("new-0", b"n" * 200)  # rotates into the recycled first file
    spool.enqueue("new-1", b"n" * 200)
    recycled = _segments(tmp_path)[-1]
    assert b"old-2" in recycled.read_bytes() and b"old-1" not in recycled.read_bytes()
    ids = _ids(Spool(tmp_path, segment_bytes=2048))
    assert ids == [*(f"mid-{i}" for i in range(9)), "new-0", "new-1"]


def test_a_recycled_file_of_the_earlier_format_yields_nothing_after_a_crash(tmp_path: Path) -> None:
    import struct
    import zlib

    records = b""
    for i in range(20):
        key, envelope = f"v1-{i}".encode(), b"e" * 100
        checksum = zlib.crc32(envelope, zlib.crc32(key))
        records += struct.pack("<4sIII", b"ARS1", len(key), len(envelope), checksum) + key + envelope
    (tmp_path / "0000000000000001.log").write_bytes(records)
    spool = Spool(tmp_path, segment_bytes=1024)
    spool.done(spool.take(100))  # all done: the file is kept for reuse
    assert list(tmp_path.glob("*.free"))
    with spool._log:
        spool._rotate()  # the process dies right after the rotation, before any record is written
    assert Spool(tmp_path, segment_bytes=1024).take(100) == []


def test_a_failure_while_preparing_a_segment_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import arcs.adapters.local.queue as spool_module

    real = spool_module._write_at

    def disk_full(fd: int, pieces: tuple[bytes, ...], offset: int) -> None:
        if offset >= 512:  # the zeroing of a new segment, past its first bytes
            raise OSError(28, "No space left on device")
        real(fd, pieces, offset)

    spool = Spool(tmp_path, segment_bytes=4096)
    monkeypatch.setattr(spool_module, "_ZEROS", bytes(512))
    monkeypatch.setattr(spool_module, "_write_at", disk_full)
    for attempt in range(3):
        with pytest.raises(StorageFault, match="No space left"):
            spool.enqueue(f"lost{attempt}", b"x")
    assert _segments(tmp_path) == []
    monkeypatch.setattr(spool_module, "_write_at", real)
    spool.enqueue("kept", b"y")
    assert _ids(Spool(tmp_path, segment_bytes=4096)) == ["kept"]


def test_a_full_disk_asks_to_retry_later_and_the_spool_says_it_cannot_take_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import arcs.adapters.local.queue as spool_module
    from arcs.errors import DISK_FULL_RETRY_S, ServiceUnavailable

    real_write, real_statvfs = spool_module._write_at, os.statvfs
    spool = Spool(tmp_path, segment_bytes=4096)
    assert spool.writable()
    spool.enqueue("first", b"x")
    assert spool.writable()

    def disk_full(fd: int, pieces: tuple[bytes, ...], offset: int) -> None:
        raise OSError(28, "No space left on device")

    def little_room(path: object) -> os.statvfs_result:
        real = real_statvfs(path)  # type: ignore[arg-type]
        return os.statvfs_result((real.f_bsize, 1, real.f_blocks, 0, 0, *tuple(real)[5:]))

    monkeypatch.setattr(spool_module, "_write_at", disk_full)
    monkeypatch.setattr(os, "statvfs", little_room)
    with pytest.raises(ServiceUnavailable, match="No space left") as refused:
        spool.enqueue("lost", b"y")
    assert refused.value.retry_after_s == DISK_FULL_RETRY_S  # answered with Retry-After
    assert not spool.writable()
    monkeypatch.setattr(os, "statvfs", real_statvfs)
    assert spool.writable()  # room again: writes may come
    monkeypatch.setattr(spool_module, "_write_at", real_write)
    spool.enqueue("later", b"z")
    assert spool.writable()
    assert _ids(spool) == ["first", "later"]


def test_the_edge_s_batch_rides_with_its_record_until_done_within_a_budget(tmp_path: Path) -> None:
    from arcs.write.batch import WriteBatch

    spool = Spool(tmp_path, held_bytes=250)
    batches = [WriteBatch(f"w{i}", "db", ()) for i in range(3)]
    for batch in batches:
        spool.enqueue(batch.write_id, b"e" * 100, batch)
    entries = spool.take(10)
    # Two fit the budget; the third is read back from disk like any record.
    assert [e.batch for e in entries] == [batches[0], batches[1], None]
    assert spool.read(entries[2]) == b"e" * 100
    spool.done(entries[:1])
    spool.enqueue("w3", b"e" * 100, WriteBatch("w3", "db", ()))
    assert spool.take(10)[-1].batch is not None  # the done record's share was given back
    assert [e.batch for e in Spool(tmp_path).take(10)] == [None] * 4  # a restart reads the disk


def test_backlog_counts_what_is_not_done_and_ages_the_oldest(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    assert spool.backlog() == (0, 0.0)
    spool.enqueue("w0", b"a")
    time.sleep(0.05)
    spool.enqueue("w1", b"b")
    depth, oldest_s = spool.backlog()
    assert depth == 2 and 0.05 <= oldest_s < 5
    spool.done(spool.take(1))
    depth, newer_s = spool.backlog()
    assert depth == 1 and newer_s < oldest_s
    # After a restart a record's age is its segment's, from when it was last written.
    past = time.time() - 600
    for segment in _segments(tmp_path):
        os.utime(segment, (past, past))
    depth, recovered_s = Spool(tmp_path).backlog()
    assert depth == 2 and 599 <= recovered_s < 700  # the done record of the open segment comes back too
