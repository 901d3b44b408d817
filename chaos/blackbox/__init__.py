"""Testing a team's own consumer black-box: run its command under the faults, observe its
effects with triggers, and check them with the built-in checker (docs/blackbox.md).

Modules: ``config`` (the TOML file), ``encoders`` (library message formats), ``workers``
(the worker contract), ``effects`` (the triggers), ``redis_state``, ``counts``, ``verdict`` (effects
-> checker counts), ``expect`` (the user's bounds), ``session`` (one cell) and
``pytest_api`` (the pytest way in; the command line's is chaos/cli/blackbox_cmd.py, the
run command's black-box mode).
"""
