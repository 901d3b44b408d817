"""The result records: what a run and a cell measured, at the bottom of the house.

Workers write a `FinalState`, the checker (chaos/checker.py, the algorithm only) turns a
history and a final state into a `RunResult` and sums runs into a `CellResult`, and the
orchestrator adds what it measured around the runs (`Phase`, `RunMetrics`, run dirs,
notes) when it builds the cell's result. Everything above reads these records; this
module imports nothing of the project, so a worker process never loads the checker.
The meaning of every count is in docs/checker.md.
"""
from __future__ import annotations

from collections import defaultdict
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"
VERDICT_PRIORITY = {VALID: 0, UNKNOWN: 1, INVALID: 2}  # Jepsen's merge-valid: the worst wins
SCHEMA_VERSION = 1
MAX_ANOMALIES_PER_KIND = 10  # per run and per cell; the counts stay exact
MAX_EXAMPLES = 5

# Anomaly kinds (Jepsen-style names). The first four are violations (see
# chaos.checker.violations()); a wrong-final-state anomaly of an unsettled key is not.
LOST, REORDERED, WRONG_FINAL_STATE, UNEXPECTED = "lost", "reordered", "wrong-final-state", "unexpected"
DUPLICATED, PROJECTION_DRIFT = "duplicated", "projection-drift"
UNHELD_EFFECT = "unheld-effect"  # an effect the workers claim that the projection does not hold
STOPPED_CONSUMING = "stopped-consuming"   # a violation too (liveness), when the caller vouches for it


@dataclass(frozen=True)
class Phase:
    """One phase of one run (timed by the phase clock, chaos/orchestrator/phaseclock.py): reset,
    arm, workload, fault:<name>, heal, drain, stop, check; `start`/`end` are
    time.monotonic() seconds, like the history's op times."""

    run: int
    name: str
    start: float
    end: float

    @property
    def duration_s(self) -> float:
        return self.end - self.start


@dataclass
class RunMetrics:
    """Timing of one run beside the checker's counts (throughput for the S2/S3 cells)."""

    run: int
    seed: int
    wall_s: float
    handled: int
    work_s: float | None          # first publish -> last effect
    throughput: float | None      # handled events per second of work_s
    run_dir: str


class FinalRows(Mapping):
    """PostgreSQL's final rows (key -> {"status", "version"}) as two lists in read order, the
    keys (unique: the table's primary key) and their rows, with no hash table over them: at
    10^6 keys a dict was ~40 MB, its last resize ~60 MB at once, beside the checker's records
    (chaos.workload.schema reads them so; equal rows are one shared dict there). The checker
    reads the lists (`pairs`); a lookup by key builds the index once (tests, reports: small runs).
    `behind(read)`: the lists filled by a thread of their own while the caller goes on; any use
    waits for it to end first, and raises its error."""

    def __init__(self, keys: list[str] | None = None, rows: list[dict] | None = None) -> None:
        self._keys: list[str] = [] if keys is None else keys
        self._rows: list[dict] = [] if rows is None else rows
        self._index: dict[str, int] | None = None
        self._reading: threading.Thread | None = None
        self._error: BaseException | None = None

    @classmethod
    def behind(cls, read: Callable[[list[str], list[dict]], None]) -> FinalRows:
        """`read(keys, rows)` (which appends to both) run in a thread of its own."""
        out = cls()

        def reading() -> None:
            try:
                read(out._keys, out._rows)
            except BaseException as exc:  # noqa: BLE001 - raised to the caller at its first use
                out._error = exc
        out._reading = threading.Thread(target=reading, name="chaos-final-rows", daemon=True)
        out._reading.start()
        return out

    def wait(self) -> None:
        """The read behind, ended (its error raised, at every use after it too)."""
        if self._reading is not None:
            self._reading.join()
            self._reading = None
        if self._error is not None:
            raise self._error

    @property
    def keys_read(self) -> list[str]:
        self.wait()
        return self._keys

    @property
    def rows(self) -> list[dict]:
        self.wait()
        return self._rows

    def add(self, key: str, row: dict) -> None:
        self.keys_read.append(key)
        self.rows.append(row)
        self._index = None

    def pairs(self) -> Iterator[tuple[str, dict]]:
        """(key, row) in read order."""
        return zip(self.keys_read, self.rows)

    def __getitem__(self, key: str) -> dict:
        index = self._index
        if index is None:
            index = self._index = {k: i for i, k in enumerate(self.keys_read)}
        return self.rows[index[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_read)

    def __len__(self) -> int:
        return len(self.keys_read)

    def items(self) -> Iterator[tuple[str, dict]]:   # type: ignore[override]
        return self.pairs()

    def __repr__(self) -> str:
        return f"FinalRows({dict(self.pairs())!r})"

    def __reduce__(self) -> tuple:
        return (FinalRows, (self.keys_read, self.rows))


@dataclass
class FinalState:
    """What the orchestrator reads after the drain (docs/INTERFACES.md section 5)."""

    rows: Mapping[str, dict] = field(default_factory=dict)   # a dict, or FinalRows (schema.read_rows)
    projection: dict[str, int] = field(default_factory=dict)
    stream_entries: list[dict] = field(default_factory=list)
    pending: list[dict] = field(default_factory=list)
    undelivered: list[dict] = field(default_factory=list)
    dlq: list[dict] = field(default_factory=list)
    outbox: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        """Plain JSON, so a run dir can keep its final state and be checked again later."""
        return {**asdict(self), "rows": plain_rows(self.rows)}

    @classmethod
    def from_json(cls, data: dict) -> FinalState:
        """The inverse of to_json; a wrong shape is an error naming the field."""
        if not isinstance(data, dict):
            raise ValueError(f"a final state is a JSON object, got {type(data).__name__}")
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"final state has unknown fields {sorted(unknown)}; "
                             f"fields are {[f.name for f in fields(cls)]}")
        for f in fields(cls):
            value = data.get(f.name)
            wanted = dict if f.name in ("rows", "projection") else list
            if value is not None and not isinstance(value, wanted):
                raise ValueError(f"final state field {f.name!r} must be a {wanted.__name__}, "
                                 f"got {type(value).__name__}")
        return cls(**{k: v for k, v in data.items() if v is not None})


class Tally:
    """A dataclass of whole-number figures that add field by field (runs summed into a cell)."""

    def __add__(self, other: Any) -> Any:
        return type(self)(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Counts(Tally):
    """The measured figures of a run, or of a cell when summed (docs/checker.md defines each)."""

    published: int = 0
    lost: int = 0
    recovered: int = 0
    duplicated: int = 0
    redelivered: int = 0
    duplicate_entries: int = 0
    reordered: int = 0
    wrong_final_state_runs: int = 0
    wrong_keys: int = 0
    unsettled_keys: int = 0
    pending_left: int = 0
    undelivered: int = 0
    dlq: int = 0
    delivered: int = 0
    handled: int = 0
    handled_pending: int = 0
    unexpected: int = 0
    failed_publish_seen: int = 0
    dropped: int = 0
    indeterminate: int = 0
    retries: int = 0
    releases_failed: int = 0
    projection_drift: int = 0
    negative_drift: int = 0
    unattempted: int = 0
    stopped_consuming: int = 0   # published events a live, healed consumer never consumed (liveness)


COUNT_NAMES = tuple(f.name for f in fields(Counts))


@dataclass
class Anomaly:
    """One kind of wrongness on one key in one run, with a few event ids as examples."""

    kind: str
    key: str | None
    run: int
    versions: list = field(default_factory=list)  # versions applied to the key, in applied order
    examples: list[str] = field(default_factory=list)
    count: int = 1  # events (or writes, for reordered) of this kind on this key
    detail: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class RunResult:
    """The checker's answer for one run."""

    run: int
    counts: Counts
    verdict: str
    anomalies: list[Anomaly]
    anomaly_counts: dict[str, int]
    final_state: Mapping[str, dict]   # key -> {status, version}: a dict, or FinalRows
    unknown_reasons: list[str] = field(default_factory=list)
    seed: int | None = None
    # The framework's own parts that failed during the run (each names the component and
    # carries its log tail); also among unknown_reasons. Any makes the verdict unknown.
    rig_failures: list[str] = field(default_factory=list)
    # How the orchestrator's drain ended (`acked`, `nobody left`, `no claims`, `failed again`,
    # `timed out`, `not run`); None for a result checked outside a run (tests, black box).
    drain_end: str | None = None
    # The consumers alive, every fault healed, when the drain ended without progress: what
    # they left waiting is `stopped_consuming` (chaos/orchestrator/drain.py); [] otherwise.
    live_workers: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The `per_run` element of `run --json`: seed, counts (flat), drain end, final state."""
        return {
            "run": self.run, "seed": self.seed, "verdict": self.verdict, **self.counts.as_dict(),
            "anomaly_counts": dict(self.anomaly_counts), "unknown_reasons": list(self.unknown_reasons),
            "rig_failures": list(self.rig_failures), "drain_end": self.drain_end,
            **({} if self.drain_end is None else {"live_workers": list(self.live_workers)}),   # a drain ran
            "final_state": plain_rows(self.final_state),
        }


@dataclass
class CellResult:
    """Runs of one preset x fault cell: counts summed, verdicts merged, anomalies bounded
    (chaos.checker.summarize), with what the orchestrator measured around them."""

    counts: Counts
    verdict: str
    runs: list[RunResult]
    anomalies: list[Anomaly]
    anomaly_counts: dict[str, int]
    unknown_reasons: list[str]
    rig_failures: list[str] = field(default_factory=list)  # "run i: <component> ..." (RunResult's)
    # The orchestrator's (chaos.orchestrator run_cell gives them when it builds the result);
    # a result built by summarize() alone (the checker's own tests, a black-box session)
    # leaves them at their defaults.
    run_root: Path | None = None              # the cell's directory of run dirs
    run_dirs: list[Path] = field(default_factory=list)   # run i's directory (may be tidied away)
    metrics: list[RunMetrics] = field(default_factory=list)  # per run
    wall_s: float | None = None               # the whole cell, reset to check of the last run
    fault_errors: list[str] = field(default_factory=list)  # faults that did not act or heal
    label: str | None = None                  # the strategy's label ("s5:consumers=4")
    phases: list[Phase] = field(default_factory=list)    # of every run
    notes: list[str] = field(default_factory=list)       # human sentences: a fault that missed

    @property
    def run_count(self) -> int:
        return len(self.runs)

    def count(self, name: str) -> int | str:
        """A count by name (`lost`, ...), `verdict` or `runs`; bad names list the valid ones."""
        if name == "runs":
            return self.run_count
        if name == "verdict":
            return self.verdict
        if name not in COUNT_NAMES:
            raise KeyError(f"no count named {name!r}; counts are {', '.join(COUNT_NAMES)}, runs, verdict")
        return getattr(self.counts, name)

    def to_json(self, **context: Any) -> dict:
        """The `run --json` object; the orchestrator supplies preset, fault, seed, ... as context.

        `expected` may be an Expectation (serialized here, and `matches_expectation` and
        `mismatches` computed unless given) or an already serialized dict or None.
        """
        expected = context.pop("expected", None)
        mismatches = context.pop("mismatches", None)
        matches = context.pop("matches_expectation", None)
        if hasattr(expected, "mismatches"):
            if mismatches is None:
                mismatches = expected.mismatches(self)
            expected = expected.to_json()
        if matches is None:
            matches = True if expected is None else not mismatches
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "preset": context.pop("preset", None),
            "fault": context.pop("fault", None),
            "runs": context.pop("runs", self.run_count),
            "seed": context.pop("seed", None),
            "time_scale": context.pop("time_scale", None),
            **self.counts.as_dict(),
            "verdict": self.verdict,
            "anomalies": [a.as_dict() for a in self.anomalies],
            "anomaly_counts": dict(self.anomaly_counts),
            "unknown_reasons": list(self.unknown_reasons),
            "rig_failures": list(self.rig_failures),
            "expected": expected,
            "matches_expectation": matches,
            "mismatches": list(mismatches or []),
            "wall_s": context.pop("wall_s", None),
            "run_dir": _jsonable_path(context.pop("run_dir", None)),
            "reproduce": context.pop("reproduce", None),
        }
        out.update(context)
        out["per_run"] = [r.to_json() for r in self.runs]
        return out


def _jsonable_path(value: Any) -> Any:
    return None if value is None else str(value)


def merge_verdicts(verdicts: Iterable[str]) -> str:
    """The worst verdict (invalid > unknown > valid); no verdicts at all is unknown."""
    worst = None
    for verdict in verdicts:
        if verdict not in VERDICT_PRIORITY:
            raise ValueError(f"verdict {verdict!r} is not one of {sorted(VERDICT_PRIORITY)}")
        if worst is None or VERDICT_PRIORITY[verdict] > VERDICT_PRIORITY[worst]:
            worst = verdict
    return worst or UNKNOWN


class AnomalyLog:
    """The anomalies of one run as the checker finds them: exact counts per kind, at most
    MAX_ANOMALIES_PER_KIND of each kept."""

    def __init__(self, run: int) -> None:
        self.run = run
        self.kept: list[Anomaly] = []
        self.per_kind: dict[str, int] = defaultdict(int)
        self.kept_per_kind: dict[str, int] = defaultdict(int)

    def counted_only(self, kind: str, count: int = 1) -> bool:
        """Count `count` more of `kind` when no more of it are kept (True), so a caller
        skips building the detail of an anomaly that would not be kept."""
        if self.kept_per_kind[kind] < MAX_ANOMALIES_PER_KIND:
            return False
        self.per_kind[kind] += count
        return True

    def add(self, kind: str, key: str | None, *, count: int = 1, examples: Iterable[str] = (),
            versions: list | None = None, detail: str = "") -> None:
        self.per_kind[kind] += count
        if self.kept_per_kind[kind] >= MAX_ANOMALIES_PER_KIND:
            return
        self.kept_per_kind[kind] += 1
        self.kept.append(Anomaly(kind, key, self.run, list(versions or []),
                                 sorted(examples)[:MAX_EXAMPLES], count, detail))


def violations(counts: Counts) -> dict[str, int]:
    """The safety counts above zero that make a run invalid (docs/checker.md, Verdict)."""
    found = {"lost": counts.lost, "reordered": counts.reordered, "unexpected": counts.unexpected,
             "settled_wrong_keys": counts.wrong_keys - counts.unsettled_keys,
             "negative_drift": counts.negative_drift}
    return {name: n for name, n in found.items() if n > 0}


def summarize(runs: list[RunResult]) -> CellResult:
    """One cell from its runs: counts summed, verdict merged, anomalies bounded per kind."""
    if not runs:
        raise ValueError("summarize() needs at least one RunResult; did every run fail to start?")
    total = Counts()
    anomaly_counts: dict[str, int] = defaultdict(int)
    kept: list[Anomaly] = []
    kept_per_kind: dict[str, int] = defaultdict(int)
    reasons: list[str] = []
    rig: list[str] = []
    for result in runs:
        rig.extend(f"run {result.run}: {failure}" for failure in result.rig_failures)
        total = total + result.counts
        for kind, n in result.anomaly_counts.items():
            anomaly_counts[kind] += n
        for anomaly in result.anomalies:
            if kept_per_kind[anomaly.kind] < MAX_ANOMALIES_PER_KIND:
                kept_per_kind[anomaly.kind] += 1
                kept.append(anomaly)
        reasons.extend(f"run {result.run}: {reason}" for reason in result.unknown_reasons)
    return CellResult(counts=total, verdict=merge_verdicts(r.verdict for r in runs), runs=list(runs),
                      anomalies=kept, anomaly_counts=dict(anomaly_counts), unknown_reasons=reasons,
                      rig_failures=rig)


_STATUS_VERSION = ["status", "version"]


def final_state_of(rows: Mapping) -> Mapping[str, dict]:
    """RunResult.final_state: PostgreSQL's rows themselves when they are already keyed by str
    and just (status, version), as chaos.workload.schema reads them (10^6 keys: no second copy)."""
    if rows.__class__ is FinalRows:   # (its rows are a few shared dicts: each looked at once)
        if set(map(type, rows.keys_read)) <= {str} and all(
                len(row) == 2 and list(row) == _STATUS_VERSION for row in dict(zip(map(id, rows.rows), rows.rows)).values()):
            return rows
    elif rows.__class__ is dict and all(
            k.__class__ is str and len(row) == 2 and list(row) == _STATUS_VERSION for k, row in rows.items()):
        return rows
    return {str(k): status_version(row) for k, row in rows.items()}


def plain_rows(rows: Mapping) -> dict:
    """Final rows as a dict (JSON): FinalRows' pairs, a dict as it is."""
    return rows if isinstance(rows, dict) else dict(rows.items())


def status_version(row: dict) -> dict:
    """A final row as RunResult.final_state keeps it: the row itself when it is just that
    (PostgreSQL's rows are: 10^6 keys, one dict each, not two), else a copy of those two."""
    if len(row) == 2 and list(row) == _STATUS_VERSION:
        return row
    return {"status": row.get("status"), "version": row.get("version")}
