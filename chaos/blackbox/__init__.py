"""Testing a team's own consumer black-box: run its command under the faults, observe its
effects with triggers, and check them with the built-in checker (docs/blackbox.md).

Modules: ``config`` (the TOML file), ``encoders`` (library message formats), ``workers``
(the worker contract), ``effects`` (the triggers), ``redis_state``, ``verdict`` (effects
-> checker counts), ``expect`` (the user's bounds), ``session`` (one cell), ``cli`` and
``pytest_api`` (the two ways in).
"""
