"""The uploaded file as sent, undone of gzip or zstd and capped at the import limit.

A decompression bomb stops at the limit, and a zstd stream that stops inside a frame (a truncated
file) is a 400 rather than a file that silently ends early."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable
from typing import IO, Any, cast

import zstandard

from arcs.errors import BadRequest, PayloadTooLarge
from arcs.write.decoders.compression import GZIP_MAGIC, ZSTD_MAGIC

_READ = 1 << 20


class _Capped(io.RawIOBase):
    """A stream that refuses to give more than ``limit`` bytes (a decompression bomb stops there)."""

    def __init__(self, inner: IO[bytes], limit: int, on_read: Callable[[int], None]) -> None:
        self.inner = inner
        self.limit = limit
        self.count = 0
        self.on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        try:
            data = self.inner.read(len(view))
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            raise BadRequest(f"the file's compression is corrupt or truncated: {exc}") from exc
        n = len(data)
        self.count += n
        if self.count > self.limit:
            raise PayloadTooLarge(f"the file exceeds the import limit of {self.limit} bytes (decompressed)")
        view[:n] = data
        self.on_read(self.count)
        return n


def open_decompressed(raw: IO[bytes], limit: int, on_read: Callable[[int], None]) -> IO[bytes]:
    """``raw`` undone of gzip or zstd (found by their magic bytes), capped at ``limit`` bytes."""
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(_Plain(raw), _READ)
    magic = buffered.peek(4)[:4]
    inner: Any
    if magic.startswith(GZIP_MAGIC):
        inner = gzip.GzipFile(fileobj=buffered, mode="rb")
    elif magic.startswith(ZSTD_MAGIC):
        frames = _ZstdFrames(buffered)
        reader = zstandard.ZstdDecompressor().stream_reader(cast(IO[bytes], frames), read_across_frames=True)
        inner = _EndChecked(reader, frames)
    else:
        inner = buffered
    return io.BufferedReader(_Capped(inner, limit, on_read), _READ)


_SKIPPABLE = b"\x2a\x4d\x18"  # the last three bytes of a skippable frame's magic (0x184D2A5?)


class _ZstdFrames(io.RawIOBase):
    """The compressed bytes, followed through zstd's frame format (RFC 8878) as they are read.

    The decompressor reads a stream that ends inside a frame to its end without a word; this tells
    such a stream (a truncated file) from a whole one: ``whole`` once every frame ended.
    """

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner
        self.wanted = 4  # header bytes to gather next, into ``held``
        self.held = b""
        self.step: Callable[[bytes], None] = self._magic
        self.skip = 0  # bytes of a block (or skippable frame) to pass over
        self.checksum = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        self._follow(data)
        buffer[: len(data)] = data
        return len(data)

    @property
    def whole(self) -> bool:
        return self.step == self._magic and not self.held and not self.skip

    def _follow(self, data: bytes) -> None:
        pos = 0
        while pos < len(data):
            if self.skip:
                taken = min(self.skip, len(data) - pos)
                self.skip -= taken
                pos += taken
                continue
            taken = min(self.wanted - len(self.held), len(data) - pos)
            self.held += data[pos : pos + taken]
            pos += taken
            if len(self.held) == self.wanted:
                held, self.held = self.held, b""
                self.step(held)

    def _expect(self, count: int, step: Callable[[bytes], None]) -> None:
        self.wanted, self.step = count, step
        if count == 0:
            step(b"")

    def _magic(self, magic: bytes) -> None:
        if magic == ZSTD_MAGIC:
            self._expect(1, self._descriptor)
        elif magic[1:] == _SKIPPABLE and 0x50 <= magic[0] <= 0x5F:
            self._expect(4, self._skippable)
        else:
            raise BadRequest("the file's compression is corrupt: not a zstd frame")

    def _skippable(self, size: bytes) -> None:
        self.skip = int.from_bytes(size, "little")
        self._expect(4, self._magic)

    def _descriptor(self, descriptor: bytes) -> None:
        flags = descriptor[0]
        single = bool(flags & 0x20)
        self.checksum = bool(flags & 0x04)
        content_size = (1 if single else 0, 2, 4, 8)[flags >> 6]
        rest = (0 if single else 1) + (0, 1, 2, 4)[flags & 0x03] + content_size
        self._expect(rest, lambda _header: self._expect(3, self._block))

    def _block(self, header: bytes) -> None:
        value = int.from_bytes(header, "little")
        last, kind, size = value & 1, (value >> 1) & 3, value >> 3
        self.skip = 1 if kind == 1 else size
        if not last:
            self._expect(3, self._block)
        elif self.checksum:
            self._expect(4, lambda _sum: self._expect(4, self._magic))
        else:
            self._expect(4, self._magic)


class _EndChecked(io.RawIOBase):
    """The decompressed stream; its end is an error when the compressed one stopped inside a frame."""

    def __init__(self, inner: Any, frames: _ZstdFrames) -> None:
        self.inner = inner
        self.frames = frames

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        if not data and not self.frames.whole:
            raise BadRequest("the file's compression is corrupt or truncated: its zstd stream ends inside a frame")
        buffer[: len(data)] = data
        return len(data)


class _Plain(io.RawIOBase):
    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
