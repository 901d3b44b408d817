"""Grades: one black-box cell's counts -> pass / fail / unknown per property, with evidence.

The properties (docs/scorecard.md) read the checker's counts as docs/checker.md defines
them, summed over the cell's runs:

* ``no_loss``: ``lost`` = 0 (published, never written, not pending, not undelivered);
* ``no_duplicate_side_effects``: ``duplicated_side_effects`` = 0 (needs ``[side_effects]``);
* ``final_state``: ``wrong_final_state_runs`` = 0 (per key, the newest version's state);
* ``keeps_consuming``: nothing published is left undelivered at the end, no
  ``stopped-consuming`` anomaly, and the group's sampled lag is back at 0;
* ``pel_drains``: ``pending_left`` = 0;
* ``poison_handled``: only where the config declares a poison payload (``[poison]``) and the
  cell published it (fault ``poison:source=config``): every poison entry read and acked (or
  dead-lettered), none left pending or unread, no consumer process died, and the consumer
  consumed every other event; else ``unknown``.

A run the rig cannot vouch for, or whose fault did not do what the cell needs (``MISSED_MARK``),
grades every property ``unknown`` (the reason is the evidence); a consumer that crashed on start
grades every property ``fail`` with its log tail.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PROPERTIES = ("no_loss", "no_duplicate_side_effects", "final_state", "keeps_consuming", "pel_drains",
              "poison_handled")
PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
CRASH_MARKS = ("exited before it connected", "did not connect to its Redis proxy")
DIED_MARK = "exited unexpectedly"    # a worker that died during the run, not by a kill fault
# A fault that did not do what the cell needs (faults.effects.missing: a failover's hold that never
# saw what its `until` waits for): the run tested nothing, even where a loss made its verdict invalid
# (a failover that took back no read entry says nothing of what the consumer does with a copy).
MISSED_MARK = "missed the workload"
# Faults that destroy entries in Redis itself: what they destroy is lost for every built-in
# strategy too (docs/strategies.md), so a loss under them says nothing of the consumer's design.
DESTROYS_ENTRIES = frozenset({"promote-replica", "replica-overflow", "sentinel-failover", "maxlen-trim",
                              "redis-restart", "group-loss", "delete-consumer"})
# Count -> the property an [expect] bound on it promises.
PROMISES = {"lost": "no_loss", "duplicated_side_effects": "no_duplicate_side_effects",
            "wrong_final_state_runs": "final_state", "wrong_keys": "final_state", "reordered": "final_state",
            "undelivered": "keeps_consuming", "stalled_after_heal_s": "keeps_consuming",
            "stopped_consuming": "keeps_consuming",
            "pending_left": "pel_drains", "dlq": "poison_handled", "poison_pending": "poison_handled",
            "poison_undelivered": "poison_handled"}


@dataclass
class Grade:
    """One property of one cell."""

    status: str
    evidence: str
    examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def crash_reason(cell: Any) -> str:
    """The log tail of a consumer that never got going, or ''."""
    for reason in cell.cell.unknown_reasons:
        if any(mark in reason for mark in CRASH_MARKS):
            return reason
    return ""


def died(cell: Any) -> list[str]:
    """The reasons naming a consumer that died during the run, when nothing else made it unknown."""
    reasons = cell.cell.unknown_reasons
    if cell.cell.rig_failures or not reasons or not all(DIED_MARK in r for r in reasons):
        return []
    return list(reasons)


def _examples(cell: Any, *kinds: str) -> list[str]:
    out: list[str] = []
    for a in cell.cell.anomalies:
        if a.kind in kinds and len(out) < 5:
            ids = ", ".join(a.examples[:3])
            out.append(f"run {a.run}: key {a.key}: {a.kind} x{a.count}" + (f" ({ids})" if ids else "")
                       + (f" versions {a.versions}" if a.kind in ("reordered", "wrong-final-state") else ""))
    return out


def _zero(value: int, what: str, examples: list[str] = ()) -> Grade:
    return Grade(PASS if value == 0 else FAIL, what, list(examples))


def stalled_s(cell: Any) -> float | None:
    """Seconds without consumer progress after the last heal (the run JSON's field), worst run."""
    values = [getattr(getattr(r, "liveness", None), "stalled_after_heal_s", None) for r in cell.runs]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def end_lag(samples: list[Any]) -> int | None:
    """The group's lag plus PEL at the last sample Redis answered (None: no answer)."""
    for s in reversed(samples or []):
        if s.lag is not None and s.pending is not None:
            return s.lag + s.pending
    return None


def grade(cell: Any, samples: list[Any] | None = None) -> dict[str, Grade]:
    """Every property of ``cell`` (a chaos.blackbox.session.BlackBoxRuns)."""
    crashed = crash_reason(cell)
    if crashed:
        return {p: Grade(FAIL, "the consumer crashed on start: " + crashed) for p in PROPERTIES}
    result, extra, cfg = cell.cell, cell.extra, cell.config
    deaths = died(cell)
    missed = [r for r in result.unknown_reasons if MISSED_MARK in r]
    if (result.verdict == "unknown" and not deaths) or not cell.runs or missed:
        why = "; ".join(r.splitlines()[0] for r in (missed or result.unknown_reasons)) or "no run finished"
        return {p: Grade(UNKNOWN, "the run cannot vouch for itself: " + why) for p in PROPERTIES}
    c = result.counts
    grades = {
        "no_loss": _zero(c.lost, f"lost {c.lost} of {c.published} published "
                                 f"(dropped {c.dropped}, indeterminate {c.indeterminate})", _examples(cell, "lost")),
        "final_state": _zero(c.wrong_final_state_runs,
                             f"wrong final state in {c.wrong_final_state_runs} of {result.run_count} runs "
                             f"({c.wrong_keys} keys), reordered writes {c.reordered}",
                             _examples(cell, "wrong-final-state", "reordered")),
        "pel_drains": _zero(c.pending_left, f"pending left {c.pending_left}"),
    }
    if cfg.side_effects is None:
        grades["no_duplicate_side_effects"] = Grade(UNKNOWN, "the config declares no [side_effects] table")
    else:
        grades["no_duplicate_side_effects"] = _zero(
            extra.duplicated_side_effects, f"events with more than one side effect: {extra.duplicated_side_effects} "
            f"(state writes duplicated: {c.duplicated})", _examples(cell, "duplicated"))
    stopped = result.anomaly_counts.get("stopped-consuming", 0)
    lag = end_lag(samples or [])
    stall = stalled_s(cell)
    text = (f"undelivered {c.undelivered}, stopped-consuming {stopped}"
            + ("" if lag is None else f", lag + pending at the last sample {lag}")
            + ("" if stall is None else f", no progress for {stall:g} s after the heal"))
    # Judged on the stream at the end (undelivered), not on XINFO's lag: entries trimmed or lost
    # before anyone read them keep Redis's lag counter above 0 for good.
    caught_up = c.undelivered == 0 and not stopped
    if deaths:      # a process that died is a finding; the property is whether the group still caught up
        text = (f"{len(deaths)} consumer process(es) died during the run"
                + ("; the others consumed what was published" if caught_up else "") + ": "
                + "\n".join(deaths) + "\n" + text)
    grades["keeps_consuming"] = Grade(PASS if caught_up else FAIL, text, _examples(cell, "stopped-consuming"))
    grades["poison_handled"] = poison_grade(cell, deaths, stopped)
    return {p: grades[p] for p in PROPERTIES}


def poison_grade(cell: Any, deaths: list[str], stopped: int) -> Grade:
    """``poison_handled`` from the poison entries' fate (chaos/blackbox/verdict.py split_poison)."""
    extra, c, cfg = cell.extra, cell.cell.counts, cell.config
    if cfg.poison is None:
        return Grade(UNKNOWN, "the config declares no poison payload ([poison] fields = {...})")
    if not extra.poison_published:
        return Grade(UNKNOWN, "no poison published in this cell (the fault poison:source=config publishes "
                              f"the config's payload {cfg.poison.fields})")
    acked = extra.poison_published - extra.poison_pending - extra.poison_undelivered
    dlq = f" ({extra.poison_dlq} dead-lettered to {cfg.worker.dlq_stream})" if cfg.worker.dlq_stream else ""
    text = (f"poison {cfg.poison.fields}: {extra.poison_published} published, {acked} read and acked{dlq}, "
            f"{extra.poison_pending} left pending, {extra.poison_undelivered} never read; the other events: "
            f"undelivered {c.undelivered}, stopped-consuming {stopped}")
    failed = extra.poison_pending or extra.poison_undelivered or deaths or c.undelivered or stopped
    if deaths:
        text = f"{len(deaths)} consumer process(es) died during the run: " + "\n".join(deaths) + "\n" + text
    return Grade(FAIL if failed else PASS, text)


def promised(bounds: dict[str, Any]) -> list[str]:
    """The properties the config's ``[expect]`` bounds speak for, in PROPERTIES order, and
    keeps_consuming always (liveness is promised by every consumer: chaos/blackbox/expect.py)."""
    from chaos.blackbox.expect import ALWAYS
    named = {PROMISES[name] for name in {**ALWAYS, **bounds} if name in PROMISES}
    return [p for p in PROPERTIES if p in named]


@dataclass(frozen=True)
class Profile:
    """A built-in strategy's known figures under faults, as properties it keeps and breaks."""

    name: str
    text: str
    loses: bool
    duplicates: bool
    wrong: bool


# The built-in presets' documented outcomes (docs/strategies.md, DESIGN.md's reference table).
PROFILES = (
    Profile("s5 + inbox (recommended)", "nothing lost, no duplicate, the newest version wins", False, False, False),
    Profile("s1 + ack-after", "nothing lost, redelivered copies applied twice", False, True, False),
    Profile("baseline (2 consumers, plain UPDATE)", "nothing lost, parallel consumers reorder a key's writes",
            False, False, True),
    Profile("baseline + ack-after", "nothing lost, redelivered copies applied twice and out of order",
            False, True, True),
    Profile("ack-on-receive", "acknowledged before the effect: a crash loses the batch", True, False, False),
    Profile("ack-on-receive", "acknowledged before the effect: a crash loses the batch", True, True, False),
    Profile("ack-on-receive + plain UPDATE in a group", "loses work and reorders a key's writes", True, False, True),
    Profile("ack-on-receive + plain UPDATE in a group", "loses work, applies copies twice and reorders", True, True,
            True),
)


def behaves_like(grades: dict[str, Grade], cell: Any, fault: str = "") -> str:
    """'like s1 + ack-after: nothing lost, redelivered copies applied twice', from the grades
    (``fault``: the cell's fault name, ``PlannedCell.fault``).

    Under a fault that destroys entries in Redis (``DESTROYS_ENTRIES``) a loss, and the wrong
    final state it leaves, is the server's: the consumer is matched on duplicates alone."""
    if any(g.status == UNKNOWN for k, g in grades.items() if k in ("no_loss", "final_state")):
        return "not judged: the run cannot vouch for itself"
    if grades["no_loss"].evidence.startswith("the consumer crashed"):
        return "not judged: the consumer crashed on start"
    c = cell.cell.counts
    stops = grades["keeps_consuming"].status == FAIL
    loses = grades["no_loss"].status == FAIL
    dup = grades["no_duplicate_side_effects"].status == FAIL or c.duplicated > 0
    # a wrong final state with no write out of order comes from what was never consumed (or lost)
    wrong = c.reordered > 0 or (grades["final_state"].status == FAIL and not stops and not loses)
    name = fault
    server_loss = loses and name in DESTROYS_ENTRIES
    if server_loss:
        loses, wrong = False, c.reordered > 0
    profile = next(p for p in PROFILES if (p.loses, p.duplicates, p.wrong) == (loses, dup, wrong))
    text = profile.text
    if server_loss:
        text = ("nothing applied twice" if not dup else "redelivered copies applied twice") + \
            (", a key's writes reordered" if wrong else "") + \
            f"; the {c.lost} entries {name} destroyed in Redis are lost, as for every built-in strategy"
    if stops:
        text = f"{text.replace('the newest version wins', 'no write out of order')} while it runs; then it " \
               f"stops consuming ({c.undelivered} events never consumed, {c.pending_left} left pending)"
    if died(cell) and not stops:
        text += "; a consumer process died (its log tail is in keeps_consuming), the others caught up"
    if grades["pel_drains"].status == FAIL and not stops:
        text += f", and leaves {c.pending_left} entries pending"
    return f"like {profile.name}: {text}"
