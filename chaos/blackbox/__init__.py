"""Testing a team's own consumer black-box: run its command under the faults, observe its
effects with triggers, and check them with the built-in checker (docs/blackbox.md).

Modules: ``config`` (the TOML file), ``workers`` (the worker contract), ``effects`` (the
triggers), ``redis_state``, ``counts``, ``verdict`` (effects -> checker counts), ``expect``
(the user's bounds), ``session`` (one cell) and ``pytest_api`` (the pytest way in). The
library message formats are chaos/encoders.py (the producer process writes them); the
command line is the run command's black-box mode, chaos/cli/blackbox_cmd.py.
"""
