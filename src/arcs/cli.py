"""The ``arcs`` command."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from arcs import envvars
from arcs.allocator import arrow_on_c_heap
from arcs.settings import Settings


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
        from arcs.holder import DataDirectoryBusy
        from arcs.runtime import local_runtime
        from arcs.server import serve as run_server

        settings = Settings.from_env().with_(backend="local", data_dir=args.data_dir)
        try:
            runtime = local_runtime(settings, serve=True)
        except DataDirectoryBusy as exc:
            raise SystemExit(f"arcs serve: {exc}") from exc
        runtime.reclaim_compaction()
        run_server(runtime, args.host, args.port, args.workers)
    elif args.command == "local":
        from arcs.emulation import run_local

        run_local(args.host, args.port, args.moto_port)


if __name__ == "__main__":
    main()
