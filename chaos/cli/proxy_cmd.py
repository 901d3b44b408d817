"""`python -m chaos proxy serve`: the Toxiproxy-compatible fault proxy as its own process
(the command itself is chaos/proxy/command.py, shared with `python -m chaos.proxy`)."""
from __future__ import annotations

from typing import Any

from chaos.proxy.command import add_serve_parser


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("proxy", help="the embedded Toxiproxy-compatible fault proxy")
    add_serve_parser(parser.add_subparsers(dest="proxy_command", required=True))
