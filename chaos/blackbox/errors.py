"""Errors of the black-box runner, each saying what went wrong and what to do.

``ConfigError`` is bad input (a BadArguments, exit 254 from the CLI); ``WorkerError``
means the user's worker could not be judged (verdict unknown, exit 2) and carries the
worker's exit code and the tail of its output.
"""
from __future__ import annotations

from chaos.errors import BadArguments


class ConfigError(BadArguments):
    """The worker config (or a table or column it names) is wrong; nothing was started."""


class WorkerError(RuntimeError):
    """A worker exited at once, never connected, or hung: the run cannot be judged."""

    def __init__(self, message: str, *, worker: str, exit_code: int | None, output_tail: str) -> None:
        code = "still running" if exit_code is None else f"exit code {exit_code}"
        tail = output_tail.strip() or "(no output)"
        super().__init__(f"{message} [{worker}: {code}]\n--- last output of {worker} ---\n{tail}")
        self.worker = worker
        self.exit_code = exit_code
        self.output_tail = output_tail
