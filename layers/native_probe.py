"""What a core layer's C library computes, through ctypes and the standard library alone.

Run as ``python -I -S native_probe.py CORE_LAYER_PYTHON_DIR`` by any CPython 3 of the layer's
architecture (under qemu for a foreign one, :mod:`layers.emulation`); prints one JSON document.
:mod:`layers.check` compares the documents of both architectures' layers: the same sources must
give the same answers on each, at the edges where integer width and division differ most.
"""

from __future__ import annotations

import ctypes
import json
import platform
import sys

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INTEGERS = (0, 7, -1, 99, 100, -12345, 10**18, INT64_MIN, INT64_MAX)
#: Around the epoch, before it (floor division), leap days, and far from both.
TIMESTAMPS_S = (0, -1, 951_782_400, 1_709_164_800, 1_700_000_000, -62_135_596_800, 253_402_300_799)


def _texts(data: ctypes.Array[ctypes.c_uint8], offsets: ctypes.Array[ctypes.c_int64], count: int) -> list[str]:
    raw = bytes(data)
    return [raw[offsets[i] : offsets[i + 1]].decode() for i in range(count)]


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    from arcs import native

    library = native.library()
    assert library is not None, f"no library at {native.LIBRARY_PATH}"
    count = len(INTEGERS)
    values = (ctypes.c_int64 * count)(*INTEGERS)
    offsets = (ctypes.c_int64 * (count + 1))()
    data = (ctypes.c_uint8 * (20 * count))()
    written = library.arcs_format_int64(values, count, offsets, data)
    answers: dict[str, object] = {"int64": _texts(data, offsets, count), "int64_bytes": written}
    for digits, per_second in ((0, 1), (3, 1000), (6, 1_000_000), (9, 1_000_000_000)):
        stamps = [s * per_second + (per_second - 1 if s % 2 else 0) for s in TIMESTAMPS_S]
        if digits == 9:  # nanoseconds since the epoch only reach 1677..2262
            stamps = [s for s in stamps if -(2**63) <= s <= 2**63 - 1]
        n = len(stamps)
        width = library.arcs_timestamp_width(digits)
        offsets = (ctypes.c_int64 * (n + 1))()
        data = (ctypes.c_uint8 * (width * n))()
        library.arcs_format_timestamps((ctypes.c_int64 * n)(*stamps), n, digits, offsets, data)
        answers[f"timestamps_{digits}"] = _texts(data, offsets, n)
    print(json.dumps({"machine": platform.machine(), "answers": answers}))


if __name__ == "__main__":
    main()
