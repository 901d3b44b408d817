"""``python -m chaos.cluster.proxy_main serve ...``: `python -m chaos proxy serve` for a cluster.

Same command and flags, but only the proxy sub-command is loaded: the other command
modules pull in the whole framework, and a cluster start waits for this process.
"""
from __future__ import annotations

import sys

import chaos.cli


def main(argv: list[str]) -> int:
    chaos.cli.COMMAND_MODULES[:] = ["chaos.cli.proxy_cmd"]
    return chaos.cli.main(["proxy", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
