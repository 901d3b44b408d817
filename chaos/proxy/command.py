"""The proxy's `serve` command line, declared once: `python -m chaos.proxy serve` (what a
cluster starts: the proxy alone, quick to start) and `python -m chaos proxy serve` (the
same command among the others) both use it."""
from __future__ import annotations

import argparse
import socket
from pathlib import Path
from typing import Any

from chaos.errors import BadArguments


def add_serve_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `serve` on a sub-parsers object; its `func` is `run`."""
    serve = commands.add_parser(
        "serve",
        help="serve the Toxiproxy HTTP API and its proxies until SIGTERM/SIGINT",
        description="Serve the Toxiproxy 2.x HTTP API. Exits on SIGTERM/SIGINT, or when the "
        "process named by CHAOS_PARENT_PID dies.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="API address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8474, help="API port, 0 = pick a free one (default 8474)")
    serve.add_argument("--config", type=Path, help="JSON array of proxies to create at start (as POST /populate)")
    serve.add_argument("--port-file", type=Path, help="write the bound API port here once ready (tmp + rename)")
    serve.set_defaults(func=run)
    return serve


def run(args: argparse.Namespace) -> int:
    """Check the arguments (BadArguments naming the fix), then serve until stopped."""
    from chaos.proxy.api import ApiError
    from chaos.proxy.server import serve

    if not 0 <= args.port <= 65535:
        raise BadArguments(f"--port {args.port} is out of range: give 0-65535 (0 picks a free port)")
    config = None
    if args.config is not None:
        try:
            config = args.config.read_bytes()
        except OSError as exc:
            raise BadArguments(f"--config {args.config}: cannot read it ({exc.strerror}); give a readable JSON file") from None
    if args.port_file is not None and not args.port_file.parent.is_dir():
        raise BadArguments(f"--port-file {args.port_file}: directory {args.port_file.parent} does not exist; create it first")
    try:
        serve(args.host, args.port, config, args.port_file)
    except ApiError as exc:
        raise BadArguments(f"--config {args.config}: {exc.message} (the file is a JSON array of "
                           '{"name","listen","upstream","enabled"} objects, as for POST /populate)') from None
    except socket.gaierror as exc:
        raise BadArguments(f"--host {args.host}: cannot resolve it ({exc.strerror}); "
                           "give an address such as 127.0.0.1") from None
    except OSError as exc:
        raise BadArguments(f"cannot serve the API on {args.host}:{args.port}: {exc.strerror}; "
                           "pick another --port (0 picks a free one)") from None
    return 0
