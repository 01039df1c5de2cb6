"""A foreign architecture's Python, run here under qemu's user-mode emulation.

Debian's packages for the other architecture (bookworm: CPython 3.11 with its C library) are
fetched with apt's own client into a private apt state, nothing installed on this machine, and
unpacked with ``dpkg-deb -x`` into a root that qemu takes as ``-L``. Python 3.11 cannot load the
layers' CPython 3.12 wheels, but :mod:`layers.native_probe` needs only the standard library: it
checks that the core layer's C library, compiled for that architecture, loads and computes what
this machine's does. The whole smoke test needs a 3.12 of that architecture (``layers.check``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

#: Debian's names for Lambda's architectures, and qemu's emulator of each.
DEBIAN_ARCHITECTURES = {"arm64": "arm64", "x86_64": "amd64"}
EMULATORS = {"arm64": "qemu-aarch64-static", "x86_64": "qemu-x86_64-static"}
SUITE = "bookworm"
PYTHON = "/usr/bin/python3.11"
#: python3.11-minimal and what ctypes needs (``_ctypes`` is in the stdlib package, on libffi).
PACKAGES = (
    "libc6",
    "zlib1g",
    "libexpat1",
    "libssl3",
    "libffi8",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "python3.11-minimal",
)
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


class Unavailable(Exception):
    """This machine cannot run the layers of an architecture; the message says what is missing."""


def emulator(arch: str) -> str:
    """qemu's user-mode emulator of ``arch`` on the PATH."""
    found = shutil.which(EMULATORS[arch])
    if found is None:
        raise Unavailable(f"no {EMULATORS[arch]} to run {arch} code here (apt-get install qemu-user-static)")
    return found


def debian_root(arch: str, directory: Path) -> Path:
    """A root holding Debian's Python 3.11 of ``arch`` and its C library, made once in ``directory``."""
    root = directory / "root"
    if (root / PYTHON.lstrip("/")).is_file():
        return root
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise Unavailable(f"no {tool} to fetch Debian's {arch} Python")
    state = directory / "apt"
    for sub in ("lists/partial", "cache/archives/partial", "debs"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    sources = state / "sources.list"
    debian_arch = DEBIAN_ARCHITECTURES[arch]
    sources.write_text(f"deb [arch={debian_arch} signed-by={KEYRING}] http://deb.debian.org/debian {SUITE} main\n")
    options = [
        f"-oDir::Etc::sourcelist={sources}",
        "-oDir::Etc::sourceparts=/dev/null",
        f"-oDir::State::Lists={state / 'lists'}",
        f"-oDir::Cache={state / 'cache'}",
        "-oDir::State::status=/dev/null",
        f"-oAPT::Architecture={debian_arch}",
        f"-oAPT::Architectures::={debian_arch}",
        "-oDebug::NoLocking=1",
        "-oAPT::Sandbox::User=root",
    ]
    for command in (["update", "-qq"], ["download", "-qq", *PACKAGES]):
        done = subprocess.run(
            ["apt-get", *options, *command], cwd=state / "debs", capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise Unavailable(
                f"apt-get {command[0]} of Debian {SUITE} {debian_arch} failed: {done.stderr.strip()[-500:]}"
            )
    staging = directory / "root.partial"
    shutil.rmtree(staging, ignore_errors=True)
    for deb in sorted((state / "debs").glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(staging)], check=True)
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def python_command(arch: str, directory: Path) -> list[str]:
    """The command that runs Debian's Python of ``arch`` here, under qemu."""
    qemu = emulator(arch)
    root = debian_root(arch, directory)
    return [qemu, "-L", str(root), str(root / PYTHON.lstrip("/"))]
