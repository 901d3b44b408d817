"""What the CLI prints when something goes wrong: never a bare traceback.

Three kinds, by when and why (chaos/errors.py has the rule):

* bad input or configuration (BadArguments, or anything that stops a topology from
  *starting*: ``start_topology``): one line ``error: ...`` naming the fix, exit 254;
  nothing is left running and no run dir is made;
* a rig failure once the topology is up (a ClusterError or RigFailure escaping a run):
  one line ``rig failure: ...``, exit 2 (the verdict is unknown), the traceback kept;
* anything else is a framework bug: one line ``internal error: <Exception>: ...`` naming the
  file the traceback was written to (in the run dir when there is one), exit 255.

Commands say where the current run dir is (``crash_site.run_dir``) and how to print the
JSON of what finished (``crash_site.partial_json``), so ``--json`` still prints an object
when a cell result exists.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from chaos.errors import EXIT_BAD_ARGS, EXIT_INTERNAL, EXIT_UNKNOWN, BadArguments, RigFailure


@dataclass
class CrashSite:
    """Where the command is: its run dir (for the traceback) and the JSON of what finished
    (``cell_json``: the cell under way; ``partial_json``: the command's whole object; both
    take the rig failures that ended the cell, if any, to count the broken run unknown)."""

    run_dir: Path | None = None
    cell_json: Callable[[list[str]], dict | None] | None = None
    partial_json: Callable[[list[str]], dict | None] | None = None
    rig_problems: list[str] = field(default_factory=list)   # found when an exception left the cell
    runs_done: int = 0


crash_site = CrashSite()


def start_topology(backend: str | None, name: str, **options: Any) -> Any:
    """``start_cluster``, with every failure the configuration explains turned into
    BadArguments naming the fix (the cluster has stopped whatever it had started)."""
    from chaos.cluster import start_cluster
    from chaos.cluster.errors import config_problem

    try:
        _check_shared_proxy(backend)
        return start_cluster(backend, name, **options)
    except Exception as exc:
        problem = config_problem(exc)
        if problem is None:
            raise
        raise BadArguments(problem) from None


@contextmanager
def watching(cluster: Any, spared: set[str]) -> Iterator[None]:
    """An exception escaping a cell while a server or proxy of ``cluster`` is dead or hung
    (not one ``spared`` by a configured fault) is the rig's failure, not a crash: its
    problems are noted here, before the cluster is closed, for ``failure`` to report."""
    try:
        yield
    except Exception:
        from chaos.cluster.health import rig_problems
        try:
            crash_site.rig_problems = rig_problems(cluster, spared)
        except Exception:  # noqa: BLE001 - the original exception is what propagates
            pass
        raise


def _check_shared_proxy(backend: str | None) -> None:
    """A native topology on a shared proxy server (TOXIPROXY_URL): it must answer before a
    server starts (the external backend checks all its endpoints itself)."""
    from chaos.cluster import check_backend
    from chaos.proxy.client import ToxiproxyClient

    url = os.environ.get("TOXIPROXY_URL")
    if not url or check_backend(backend) != "native":
        return
    client = ToxiproxyClient(url, timeout=2.0)
    try:
        client.version()
    finally:
        client.close()


def bad_input(exc: BaseException) -> int:
    from chaos.cluster.errors import one_line

    print(f"error: {one_line(str(exc))}", file=sys.stderr)
    return EXIT_BAD_ARGS


def failure(exc: BaseException, args: Any) -> int:
    """A rig failure (exit 2) or a crash (exit 255): one line, the traceback in a file, and
    the JSON of what finished when ``--json`` asked for it."""
    from chaos.cluster.errors import ClusterError, one_line

    problems = list(crash_site.rig_problems)
    rig = bool(problems) or isinstance(exc, (ClusterError, RigFailure))
    path = write_traceback(exc, args)
    text = one_line(str(exc)) or "(no message)"
    if problems:
        print(f"rig failure: {problems[0].splitlines()[0]} ({type(exc).__name__}: {text}): the cell cannot be "
              f"judged (verdict unknown); traceback in {path}", file=sys.stderr)
    elif rig:
        print(f"rig failure: {text}: the cell cannot be judged (verdict unknown); traceback in {path}",
              file=sys.stderr)
    else:
        print(f"internal error: {type(exc).__name__}: {text} (a framework bug; traceback in {path})",
              file=sys.stderr)
    if getattr(args, "json", False) and crash_site.partial_json is not None:
        try:
            out = crash_site.partial_json((problems or [f"rig failure: {exc}"]) if rig else [])
        except Exception:  # noqa: BLE001 - the crash is what we report, not this
            out = None
        if out is not None:
            if not rig:
                out["internal_error"] = f"{type(exc).__name__}: {text}"
            out["traceback"] = str(path)
            print(json.dumps(out, default=str))
    return EXIT_UNKNOWN if rig else EXIT_INTERNAL


def write_traceback(exc: BaseException, args: Any) -> Path:
    """The full traceback in ``<run dir>/traceback.txt``, else beside the run dirs (or in
    the temp dir when even that cannot be written)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    candidates = []
    if crash_site.run_dir is not None and crash_site.run_dir.is_dir():
        candidates.append(crash_site.run_dir / "traceback.txt")
    from chaos.cli.options import runs_root
    candidates.append(runs_root(args) / f"crash-{getattr(args, 'command', 'chaos')}-{stamp}.txt")
    candidates.append(Path(tempfile.gettempdir()) / f"chaos-crash-{stamp}.txt")
    for path in candidates:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return candidates[-1]
