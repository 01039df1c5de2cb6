"""The ``arcs`` command."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
from pathlib import Path

from arcs import envvars
from arcs.allocator import arrow_on_c_heap
from arcs.settings import Settings

#: What ``arcs serve`` needs beyond the base install (which is what the Lambda functions run):
#: the ``server`` extra. ``arcs local`` needs moto too, unless it is pointed at another emulator.
SERVER_MODULES = ("uvicorn", "google_crc32c")
EXTRA_HINT = "install it with pip install '.[server]' in a clone of the repository"


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module blocked in sys.modules
        return False


def require_server_extra(command: str, modules: tuple[str, ...] = SERVER_MODULES) -> None:
    """One line naming the extra to install, instead of a traceback from deep inside the server."""
    missing = [name for name in modules if not _importable(name)]
    if missing:
        raise SystemExit(f"arcs {command} needs the 'server' extra ({', '.join(missing)} not installed): {EXTRA_HINT}")


def main(argv: list[str] | None = None) -> None:
    arrow_on_c_heap()  # before anything loads pyarrow
    parser = argparse.ArgumentParser(prog="arcs", description="Arc Serverless")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the standalone server on a local data directory")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--data-dir", type=Path, default=Path(os.environ.get(envvars.DATA_DIR, "./data")))
    serve.add_argument("--workers", type=int, default=8, help="request threads")
    local = commands.add_parser("local", help="run the serverless topology on a local AWS emulator")
    local.add_argument("--host", default="127.0.0.1")
    local.add_argument("--port", type=int, default=8000)
    local.add_argument("--moto-port", type=int, default=0, help="port of the embedded moto server (0: any)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        require_server_extra("serve")
        from arcs.adapters.local.holder import DataDirectoryBusy
        from arcs.http.server import serve as run_server
        from arcs.runtime import local_runtime

        settings = Settings.from_env().with_(backend="local", data_dir=args.data_dir)
        try:
            runtime = local_runtime(settings, serve=True)
        except DataDirectoryBusy as exc:
            raise SystemExit(f"arcs serve: {exc}") from exc
        runtime.reclaim_compaction()
        run_server(runtime, args.host, args.port, args.workers)
    elif args.command == "local":
        require_server_extra("local", SERVER_MODULES + (() if os.environ.get("AWS_ENDPOINT_URL") else ("moto",)))
        from arcs.emulation import run_local

        run_local(args.host, args.port, args.moto_port)


if __name__ == "__main__":
    main()
