"""`python -m chaos.proxy serve ...`: the same as `python -m chaos proxy serve ...`, loading
only the proxy command (faster to start, and independent of the other command modules)."""
import sys

import chaos.cli

chaos.cli.COMMAND_MODULES[:] = ["chaos.cli.proxy_cmd"]
sys.exit(chaos.cli.main(["proxy", *sys.argv[1:]]))
