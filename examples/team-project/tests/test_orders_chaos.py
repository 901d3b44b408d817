"""The team's chaos tests: its consumer under faults (black-box), a scorecard cell, and a
built-in preset's cell, beside the team's own `cluster` and `postgres` fixtures."""
from __future__ import annotations

import pytest

WORKER = "python -m orders_team.worker"


@pytest.mark.blackbox(command=WORKER, config="worker.toml")
def test_no_order_event_lost_when_a_worker_dies(blackbox, cluster, postgres):
    assert cluster["name"] == "orders-prod" and postgres.startswith("postgresql://orders@")   # ours, untouched
    cell = blackbox(fault="kill-consumer:at_ms=300")
    assert cell.count("lost") == 0
    assert cell.count("duplicated_side_effects") == 0


@pytest.mark.blackbox(command=WORKER, config="worker.toml")
def test_a_publish_blip_loses_nothing(blackbox):
    cell = blackbox(fault="publish-blip")
    assert cell.count("lost") == 0


@pytest.mark.blackbox(command=WORKER, config="worker.toml")
@pytest.mark.scorecard(faults="kill-consumer:at_ms=300")
def test_scorecard(blackbox, scorecard_fault):
    cell = blackbox.scorecard(scorecard_fault)
    assert cell.grades["no_loss"].status == "pass", cell.grades


def test_the_ack_after_preset_survives_a_consumer_kill(chaos_cell, cluster):
    assert cluster["name"] == "orders-prod"
    chaos_cell("ack-after", "kill-consumer:at=holding,delivered=100")   # judged by the framework's expectation table
