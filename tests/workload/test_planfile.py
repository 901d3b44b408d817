"""A producer plan's rows through a file of the run dir (chaos/workload/planfile.py)."""
from __future__ import annotations

from chaos.events import Event
from chaos.workload import planfile


def _rows(n: int) -> list[tuple]:
    return [Event(key=f"k{i % 7}", etype="paid", event_id=f"e{i}", version=i, at_ms=float(i % 5)).to_row()
            for i in range(n)]


def test_rows_come_back_in_order_with_their_types_across_chunks(tmp_path):
    rows = _rows(2 * planfile.CHUNK + 3)
    spec = {"producer": {"name": "retrying"}, "events": rows}
    spilled = planfile.spill(spec, tmp_path / f"P{planfile.SUFFIX}")
    assert "events" not in spilled and spilled["producer"] == spec["producer"]
    assert spec["events"] is rows   # the caller's spec is not changed
    assert list(planfile.rows(spilled)) == rows
    assert list(planfile.rows(spilled)) == rows   # read again from its start (a respawn)
    planfile.remove(spilled)
    assert not (tmp_path / f"P{planfile.SUFFIX}").exists()


def test_a_spec_without_a_file_is_read_as_it_is(tmp_path):
    rows = _rows(3)
    dicts = [Event.from_plan(r).to_dict() for r in rows]   # the black box's inline plan
    assert list(planfile.rows({"events": dicts})) == dicts
    assert planfile.spill({"events": []}, tmp_path / "x") == {"events": []}
    assert not (tmp_path / "x").exists()


def test_a_file_that_cannot_be_written_keeps_the_rows_inline(tmp_path):
    spec = {"events": _rows(3)}
    assert planfile.spill(spec, tmp_path / "no-such-dir" / f"P{planfile.SUFFIX}") is spec
