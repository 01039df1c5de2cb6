"""Builds ``arcs.native``'s shared library from its C sources, for this machine or a Lambda architecture.

    uv run python -m layers.native                 # this machine: src/arcs/native/_arcs_native.so
    uv run python -m layers.native --arch arm64 --out DIR

Zig's C compiler (the ``ziglang`` package, pinned in uv.lock) builds both architectures from
any machine, against glibc 2.17 so the library loads on every Lambda Python runtime. The library
has no Python API in it (ctypes loads it), so one build serves every Python version.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NATIVE_SOURCE = REPO_ROOT / "src" / "arcs" / "native"
LIBRARY_NAME = "_arcs_native.so"
#: Lambda's architecture names (and this machine's) to Zig's target triples.
TARGETS = {"arm64": "aarch64-linux-gnu.2.17", "x86_64": "x86_64-linux-gnu.2.17"}
_MACHINES = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "x86_64", "amd64": "x86_64"}


def host_arch() -> str:
    machine = platform.machine().lower()
    if machine not in _MACHINES:
        raise SystemExit(f"no native build for this machine ({machine}); arcs runs without it, only slower")
    return _MACHINES[machine]


def sources() -> list[Path]:
    return sorted(NATIVE_SOURCE.glob("*.c"))


def build(arch: str, out_dir: Path = NATIVE_SOURCE) -> Path:
    """Compile the library for ``arch`` into ``out_dir``; its path."""
    target = out_dir / LIBRARY_NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "ziglang",
        "cc",
        "-target",
        TARGETS[arch],
        "-O3",
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-fPIC",
        "-shared",
        "-s",
        "-o",
        str(target),
        *map(str, sources()),
    ]
    subprocess.run(command, check=True)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=sorted(TARGETS), help="default: this machine's")
    parser.add_argument("--out", type=Path, default=NATIVE_SOURCE, help="directory of the library")
    args = parser.parse_args(argv)
    print(build(args.arch or host_arch(), args.out))


if __name__ == "__main__":
    main()
