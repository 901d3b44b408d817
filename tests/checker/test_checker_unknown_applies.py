"""Applies of unknown outcome (C2): `apply info` (the COMMIT's reply was lost) and an apply
invoke whose process died. The checker decides them only where the inbox, the projection
or the final row proves what happened (docs/checker.md, "Unknown-outcome applies")."""
from __future__ import annotations

import pytest
from checker_histories import CREATED_42, PAID_42, Ev, History, final

from chaos.checker import VALID, check_run

CREATED = {"42": ("created", 1)}
PAID = {"42": ("paid", 2)}


def reply_lost_then_redelivered(*, second: str | None, dangling: bool = False, **marker) -> History:
    """created: delivered to C1, whose COMMIT outcome is unknown; then C2 gets it from the PEL."""
    h = History().publish(CREATED_42, entry_id="1-0").deliver(CREATED_42, "1-0")
    h.apply_unknown(CREATED_42, dangling=dangling)
    if second is not None:
        h.deliver(CREATED_42, "1-0", via="claim", count=2, process="C2")
        h.apply(CREATED_42, second, process="C2", **marker).ack(CREATED_42, "1-0", process="C2")
    return h


class TestInboxProvesTheCommit:
    @pytest.mark.parametrize("projection", [{"42": 1}, {}])
    @pytest.mark.parametrize("dangling", [False, True])
    def test_info_then_inbox_duplicate_is_handled_once(self, projection, dangling):
        """The inbox row commits with the effect: "seen" means the first apply committed."""
        h = reply_lost_then_redelivered(second="duplicate", dangling=dangling, inbox="seen")
        result = check_run(h.ops, final(CREATED, projection=projection))
        c = result.counts
        assert (c.lost, c.handled, c.indeterminate, c.duplicated, c.projection_drift) == (0, 1, 0, 0, 0)
        assert result.verdict == VALID

    def test_a_redis_marker_proves_nothing_and_the_projection_shows_the_loss(self):
        """SET NX is set before the write: "seen" after an unknown apply says nothing about
        the effect; a projection without the event's write shows it never landed."""
        h = reply_lost_then_redelivered(second="duplicate", dedupe="seen")
        gone = check_run(h.ops, final({"42": ("new", 0)}, projection={"42": 0})).counts
        unproven = check_run(h.ops, final({"42": ("new", 0)})).counts
        assert (gone.lost, gone.indeterminate) == (1, 0)
        assert (unproven.lost, unproven.indeterminate, unproven.handled) == (0, 1, 0)


class TestPlainGuardAppliedAgain:
    @pytest.mark.parametrize("projection, duplicated, drift", [
        ({"42": 2}, 1, 1),  # the projection holds both effects: the first COMMIT landed
        ({"42": 1}, 0, 0),  # one effect: the first transaction rolled back
        ({}, 0, 0),         # no projection: not provable, so not counted
    ])
    def test_info_then_applied_is_duplicated_when_the_projection_proves_it(self, projection, duplicated, drift):
        h = reply_lost_then_redelivered(second="applied")
        c = check_run(h.ops, final(CREATED, projection=projection)).counts
        assert (c.duplicated, c.projection_drift) == (duplicated, drift)
        assert (c.handled, c.lost, c.indeterminate) == (1, 0, 0)


class TestNothingElseHandledIt:
    """The entry is gone (acked on receive, or lost in a failover) after the unknown apply."""

    @pytest.mark.parametrize("projection, rows, handled, lost, indeterminate", [
        ({"42": 1}, CREATED, 1, 0, 0),         # the projection has its effect
        ({"42": 0}, {"42": ("new", 0)}, 0, 1, 0),  # no effect, and any commit would have written
        ({}, CREATED, 1, 0, 0),                # no projection: the final row is its state
        ({}, {"42": ("new", 0)}, 0, 0, 1),     # nothing proves either way
    ])
    def test_outcome_follows_the_proof(self, projection, rows, handled, lost, indeterminate):
        h = reply_lost_then_redelivered(second=None)
        result = check_run(h.ops, final(rows, projection=projection))
        c = result.counts
        assert (c.handled, c.lost, c.indeterminate) == (handled, lost, indeterminate)

    def test_older_version_after_a_newer_write_may_have_been_a_stale_commit(self):
        """paid is applied, then created's COMMIT is lost: a CAS commit would match 0 rows and
        leave the projection as it is, so an unchanged projection proves nothing."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.handle(PAID_42, "2-0").deliver(CREATED_42, "1-0").apply_unknown(CREATED_42)
        result = check_run(h.ops, final(PAID, projection={"42": 1}))
        assert (result.counts.lost, result.counts.indeterminate) == (0, 1)
        assert result.verdict == VALID

    def test_one_landed_of_two_unknown_applies_proves_neither(self):
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.deliver(CREATED_42, "1-0").apply_unknown(CREATED_42)
        h.deliver(PAID_42, "2-0").apply_unknown(PAID_42)
        c = check_run(h.ops, final({"42": ("new", 0)}, projection={"42": 1})).counts
        assert (c.handled, c.lost, c.indeterminate) == (0, 0, 2)


def test_a_landed_unknown_write_is_not_ordered():
    """Its commit time is unknown, so it takes no part in `reordered` (the final state still
    shows the damage)."""
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    h.handle(PAID_42, "2-0").deliver(CREATED_42, "1-0").apply_unknown(CREATED_42)
    c = check_run(h.ops, final(CREATED, projection={"42": 2})).counts
    assert (c.handled, c.reordered, c.wrong_keys) == (2, 0, 1)


def test_recovered_when_the_unknown_apply_followed_a_claim_after_a_fault():
    h = History().publish(CREATED_42, entry_id="1-0").deliver(CREATED_42, "1-0")
    h.fault("pg-reset", "start").deliver(CREATED_42, "1-0", via="claim", count=2, process="C2")
    h.apply_unknown(CREATED_42, process="C2").fault("pg-reset", "stop")
    c = check_run(h.ops, final(CREATED, projection={"42": 1})).counts
    assert (c.recovered, c.handled, c.lost) == (1, 1, 0)


@pytest.mark.parametrize("landed", [False, True])
def test_ack_on_receive_kill_mid_apply_keeps_lost_equal_to_delivered_minus_handled(landed):
    """The delivery suite's invariant must hold whichever way the killed apply went."""
    jobs = [Ev(f"ej{n}-1", f"j{n}", 1, "done") for n in range(3)]
    h = History()
    for n, job in enumerate(jobs):
        h.publish(job, entry_id=f"{n}-0").deliver(job, f"{n}-0").ack(job, f"{n}-0")
    h.apply(jobs[0]).apply_unknown(jobs[1], dangling=True)  # SIGKILL during the second job's apply
    projection = {"j0": 1, "j1": int(landed), "j2": 0}
    c = check_run(h.ops, final(projection=projection)).counts
    assert (c.handled, c.lost, c.indeterminate) == (1 + landed, 2 - landed, 0)
    assert c.lost == c.delivered - c.handled
