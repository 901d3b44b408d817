"""The worker process entry point: a spec in, a role's main loop run, an exit code out.

Roles are one line each in ROLES; a role's `main(env) -> int` gets a WorkerEnv built
from its WorkerSpec (history, links, scale, failpoints). Started by the fork server; also
runnable alone for debugging: `python -m chaos.workload.worker spec.json`.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from chaos import extensions
from chaos.workload import consumer, dispatcher, fanout, outbox, producer
from chaos.workload.env import WorkerEnv
from chaos.workload.workerspec import WorkerSpec

ROLES: dict[str, Callable[[WorkerEnv], int]] = {
    "producer": producer.main,
    "consumer": consumer.main,
    "reader": fanout.main,
    outbox.WRITER_ROLE: outbox.producer_main,
    dispatcher.ROLE: dispatcher.main,
}
extensions.attach("roles", ROLES)   # a part's own process code (chaos/extensions.py)


def run(spec: WorkerSpec | Mapping[str, Any]) -> int:
    """Run the role a WorkerSpec (or its JSON form) names."""
    worker = WorkerSpec.of(spec)
    role = ROLES.get(worker.role)
    if role is None:
        raise ValueError(f"unknown worker role {worker.role!r}; roles are: {', '.join(ROLES)}")
    env = WorkerEnv(worker)
    env.op("info", "log", value={"started": worker.role})
    try:
        return role(env)
    finally:
        env.close()


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        sys.exit(run(json.load(fh)))
