"""Root conftest: makes the chaos plugin active for runs from a checkout, gives this
repository's tests the fixtures' short names (``cluster``, ``postgres``, ...: aliases of the
``chaos_*`` fixtures), and orders the tests for xdist so that a session does not end with
one worker running a long test alone.

When the package is pip-installed the `pytest11` entry point (named
``chaos.pytest_plugin``) registers the plugin already and its line below is a no-op.
"""
from __future__ import annotations

import fcntl
import heapq
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

pytest_plugins = ["chaos.pytest_plugin", "chaos.pytest_plugin.aliases"]

CELL_FIXTURES = frozenset({"chaos_cell", "blackbox"})   # a test that runs cells
# The figures below are seconds from `pytest -n 4 --durations=0` of the whole suite on a quiet
# machine (a clean-clone CI run, with the cuts measured since): call + set-up. Only an order
# hint: a stale one costs a little wall time, never a result. A set-up that only waited for
# another worker's `shared_once` build is not counted: the module's first test in this order
# pays the build (its figure includes it) and the others, dispatched later, find it made.
CELL_SECONDS = 5.0      # the mean of the suites' tests (median 3.8; the long cells are listed below)
SLOW_SECONDS = 6.0      # ``slow`` without a figure: 2-8 s measured, mostly black-box cells (longer: below)
# Modules whose tests run pytest sessions, clusters or the CLI in child processes: the median
# of their tests (the long ones are listed below).
CHILD_SESSION_MODULES = {
    "tests/blackbox/test_sentinel_examples.py": 7.5, "tests/report/test_report_in_browser.py": 2.0,
    "tests/report/test_replay.py": 5.0, "tests/cells/test_readme_cell_tests.py": 6.5,
    "tests/cluster/test_cluster_isolation.py": 4.5, "tests/cluster/test_cluster_cli.py": 5.0,
    "tests/cluster/test_cluster_cleanup.py": 4.0, "tests/cells/test_cell_summary.py": 4.0,
    "tests/nightly/test_kept_runs.py": 2.5, "tests/nightly/test_merge.py": 1.0,
    "tests/nightly/test_shard.py": 1.0, "tests/report/test_allure_cell.py": 1.0,
    "tests/report/test_pytest_allure.py": 1.0, "tests/workload/test_load_producer.py": 1.5,
    "tests/cluster/test_cluster_plugin.py": 1.0, "tests/docs/test_readme.py": 1.0,
    "tests/outbox/test_relay_load.py": 2.0, "tests/outbox/test_dispatcher.py": 1.0,
    "tests/proxy/test_proxy_robustness.py": 1.5,
}

# Single tests far longer than their module's or kind's figure (node id prefixes; the first
# that matches counts). A measured figure goes before a ``slow`` marker's.
LONG_TESTS = {
    "suites/sentinel/test_sentinel_failover.py::test_sentinel_cell[s1]": 21.0,
    "suites/failover/test_failover.py::test_failover_cell[p2-entry-id]": 19.5,
    "suites/sentinel/test_sentinel_failover.py::test_sentinel_cell[s5]": 19.0,
    "suites/failover/test_failover.py::test_failover_cell[inbox]": 18.0,
    "suites/ordering/test_lock_races.py::test_s4a_wrong_rate_is_above_zero": 16.5,
    "tests/docs/test_doc_commands.py::test_readme_failover_example": 9.0,      # --runs 1 since 873bea6
    "tests/install/test_setup_script.py::test_the_quick_start_sets_up_and_collects": 16.0,
    "tests/report/test_report_in_browser.py::test_failover_cell_shows": 10.0,      # builds the report (cells at 0.5)
    "tests/install/test_team_project.py::test_the_team_project_passes": 13.0,       # builds the team venv
    "suites/ordering/test_lock_races.py::test_s4b_wrong_about_half": 12.5,
    "suites/ordering/test_lock_races.py::test_s4c_a_release_leaves": 2.5,              # at scale 0.5
    "tests/nightly/test_merge.py::test_two_shards_merge": 12.5,                     # builds the shards
    "suites/failover/test_failover.py::test_wait_confirmed_producer_loses_far_less": 7.0,    # the WAIT cell alone
    "tests/cells/test_readme_cell_tests.py::test_the_readme_cell_tests_run_as_written": 4.5,
    "tests/scorecard/test_cli.py::test_poison_is_graded": 10.5,
    "tests/report/test_replay.py::test_allure_and_summary_cells_replay": 10.5,
    "suites/sentinel/test_sentinel_failover.py::test_sentinel_cell[s1|mode=manual": 10.0,
    "tests/workload/test_planfile.py::test_neither_side_holds_the_whole_plan": 5.0,     # 20,000 / 80,000 events
    "tests/nightly/test_shard.py::test_recorded_durations_balance_the_shards": 9.5,
    "suites/ordering/test_sharding_fanout.py::test_s2_and_s3_keep_order_and_scale": 3.0,       # at scale 0.5
    "suites/redelivery/test_nemesis.py::test_nemesis_cell[s5:claim_idle_ms=500|nemesis": 5.5,   # at scale 0.5
    "tests/scorecard/test_cli.py::test_json_schema_grid_page": 9.0,
    "tests/cluster/test_cluster_isolation.py::test_four_xdist_workers_get_isolated_clusters": 9.0,
    "tests/blackbox/test_examples.py::test_ack_after_processing_loses_nothing_when_a_worker_is_killed[taskiq]": 8.5,
    "tests/blackbox/test_sentinel_examples.py::test_a_consumer_pinned": 7.0,
    "suites/failover/test_failover.py::test_failover_cell[s4b]": 7.5,
    "tests/cluster/test_sentinel.py::test_a_sentinel_that_never_elects": 7.5,
    "tests/cells/test_cell_summary.py::test_a_cell_whose_rig_broke": 7.5,
    "suites/ordering/test_reference_rows.py::test_bulk_row_without_fault[ack-after]": 4.5,       # at scale 0.25
    "tests/blackbox/test_sentinel_examples.py::test_the_sentinel_aware_twin": 7.0,
    "suites/failover/test_failover.py::test_failover_cell[s4a]": 7.0,
    "suites/production/test_maxmemory.py::test_maxmemory_cell[s1|maxmemory:at=before_publish,after_entries=10,refused=75]": 4.0,
    "suites/production/test_maxmemory.py::test_maxmemory_cell[s5|maxmemory:at=before_publish,after_entries=10,refused=75]": 4.0,
    "tests/blackbox/test_examples.py::test_ack_after_processing_loses_nothing_when_a_worker_is_killed[faststream]": 6.5,
    "suites/ordering/test_reference_rows.py::test_bulk_row_without_fault[ack-on-receive]": 4.5,
    "suites/ordering/test_reference_rows.py::test_reference_row[s1]": 3.0,          # 10 runs at scale 0.25
    "suites/ordering/test_reference_rows.py::test_reference_row[s5]": 3.0,
    "suites/ordering/test_reference_rows.py::test_reference_row[": 1.5,
    "suites/ordering/test_reference_rows.py::test_forced_reference_row[": 1.5,      # at scale 0.5
    "suites/ordering/test_reference_rows.py::test_bulk_row_without_fault[poison": 2.0,
    "suites/ordering/test_sharding_fanout.py::test_s3_reader_killed_mid_stream": 2.5,  # at scale 0.5
    "tests/cluster/test_cluster_cleanup.py::test_sigkill_of_an_xdist_worker": 6.0,
    "suites/redelivery/test_server_faults.py::test_server_fault_cell[ack-after:respawn=1|sigterm": 4.0,
    "suites/operations/test_field_incidents.py::test_delete_consumer_cell[baseline|kill-consumer": 6.0,
    "tests/report/test_replay.py::test_a_black_box_run_on_the_sentinel_topology": 6.0,
    "tests/nightly/test_kept_runs.py::test_a_failing_cell_keeps_its_dirs": 6.0,     # builds the sessions
    "tests/structure/test_recipes.py::test_a_cells_row_and_a_new_area": 5.5,
    "tests/cells/test_cell_summary.py::test_the_table_and_the_json_list_every_cell[xdist]": 5.5,
    "suites/failover/test_failover.py::test_failover_cell[s5+latency]": 4.0,        # 20 ms jobs
    "suites/redelivery/test_xautoclaim.py::test_xautoclaim_cell[": 2.0,              # at scale 0.5
    "tests/rig/test_run_rig_health.py::test_a_killed_replica_is_named_as_the_replica": 5.5,
    "suites/producer/test_publish_blip.py::test_publish_blip_cell[": 3.5,            # the blip on conditions only
    "tests/workload/test_drain_keeps_hands.py::test_a_claimed_page_is_not_claimed_again": 5.0,
    "tests/proxy/test_proxy_robustness.py::test_no_fd_or_task_leak_after_10000_short_connections": 5.0,
    "tests/blackbox/test_session.py::test_drain_waits_for_a_slow_worker": 6.0,
    "tests/proxy/test_proxy_client_compat.py::test_create_toxic_disable_destroy_through_toxiproxy_python": 4.5,
    "suites/sentinel/test_sentinel_failover.py::test_a_failover_after_the_workload_ended": 4.5,
    "suites/sentinel/test_sentinel_failover.py::test_sentinels_starved_into_tilt": 6.5,    # (K, session 32: 6.1-6.2 s)
    "tests/blackbox/test_session.py::test_a_failover_whose_hold_never_saw": 4.5,           # (K: 2.6-7 s)
    "tests/report/test_allure_cell.py::test_history_id_does_not_depend_on_the_seed": 4.5,
    "tests/report/test_report_in_browser.py::test_allure2_applies": 4.0,
    "tests/nightly/test_workflow.py::test_every_command_the_workflows_run_exists_in_the_project": 4.0,
    "tests/cluster/test_sentinel.py::test_reset_restores_the_original_roles": 4.0,
    "suites/sentinel/test_sentinel_failover.py::test_a_writer_told_the_old_address": 4.0,
    "tests/report/test_report_in_browser.py::test_matrix_page": 4.0,
    "tests/workload/test_liveness.py::test_consumers_that_hang_alive_stop_consuming": 4.0,
    "tests/report/test_allure_cell.py::test_labels_parameters_steps_and_attachments": 4.0,  # the seed-100 session
    "tests/scorecard/test_interrupt.py::test_ctrl_c_ends_the_card_after_the_cell_it_hit": 4.0,
    "tests/rig/test_cli_rundirs.py::test_ctrl_c_mid_run_exits_130_and_leaves_nothing": 4.0,
    "tests/mutants/test_mutants.py::test_a_mutant_is_killed_and_its_control_is_not[sharded-random-shard]": 4.0,
    "tests/workload/test_drain_keeps_hands.py::test_a_live_consumers_batch_is_not_claimed": 3.5,
    "tests/nightly/test_shard.py::test_shards_of_the_real_collection_are_disjoint": 3.5,
    "tests/nightly/test_shard.py::test_shards_follow_a_keyword_filter": 3.5,          # builds the collections
    "tests/blackbox/test_fault_schedule.py::test_a_failing_fault_is_healed_and_named_the_same": 3.5,
    "tests/workload/test_fanout_acker.py::test_the_reader_does_not_block_in_xreadgroup": 3.5,
    "tests/workload/test_orchestrator.py::test_a_run_that_keeps_progressing_is_not_cut": 3.5,
    "tests/blackbox/test_workers.py::test_worker_that_never_connects": 3.5,
    "suites/operations/test_field_incidents.py::test_long_job_cell[": 3.0,
    "tests/rig/test_run_rig.py::test_the_orchestrators_own_connections_killed": 3.0,
    "tests/proxy/test_proxy_toxics.py::test_toxicity_is_drawn_again_when_the_chain_changes": 3.0,
    "tests/faults/test_effect_cells.py::test_a_fault_that_missed_the_workload_makes_the_run_unknown[delete": 3.0,
    "tests/report/test_pytest_allure.py::test_environment_and_categories_from_an_xdist_session": 3.0,
    "suites/redelivery/test_pg_reset.py::test_pg_reset_cell[": 1.6,                  # at scale 0.5
    "suites/production/test_replica_overflow.py::test_replica_overflow_cell[": 3.5,   # at scale 0.5
    "tests/blackbox/test_examples.py::test_ack_after_processing_loses_nothing": 4.0,   # (a new example)
    "suites/redelivery/test_server_faults.py::test_server_fault_cell[ack-after|maxlen-trim": 1.0,
    "suites/delivery/test_kill_consumer.py::test_kill_consumer_cell[ack-on-receive|kill-consumer:at=holding": 0.5,
    "suites/delivery/test_kill_consumer.py::test_kill_consumer_cell[ack-after|kill-consumer:at=holding": 0.5,
}


# Tests that keep about a core busy while they run (CPU s of the test's whole process tree:
# user + sys, children and servers included; psutil, -n 0 and -n 2), against the 10-25 s of
# their figure: two pip installs into fresh venvs, the two-shard nightly merge, the replayed
# pytest session, the two poison scorecards. A cell keeps 0.1-0.3 cores busy (2-5 CPU s).
CPU_HEAVY = {
    "tests/install/test_team_project.py::test_the_team_project_passes": 15.6,
    "tests/install/test_setup_script.py::test_the_quick_start_sets_up_and_collects": 16.4,
    "tests/nightly/test_merge.py::test_two_shards_merge": 13.2,
    "tests/report/test_replay.py::test_allure_and_summary_cells_replay": 7.5,
    "tests/scorecard/test_cli.py::test_poison_is_graded": 7.4,
}


def expected_seconds(item: pytest.Item) -> float:
    """A rough cost, only to order the tests: 0 for a test marked to skip, a LONG_TESTS figure,
    else ``@pytest.mark.slow(seconds=N)`` (SLOW_SECONDS without N), CELL_SECONDS for a test that
    runs cells, the module's figure above, else 0 (most tests take well under a second)."""
    if any(mark.name == "skip" or (mark.name == "skipif" and mark.args and mark.args[0] is True)
           for mark in item.iter_markers()):
        return 0.0                                              # it will skip: no cost
    for prefix, seconds in LONG_TESTS.items():
        if item.nodeid.startswith(prefix):
            return seconds
    slow = item.get_closest_marker("slow")
    if slow is not None:
        return float(slow.kwargs.get("seconds", SLOW_SECONDS))
    if CELL_FIXTURES & set(getattr(item, "fixturenames", ())):
        return CELL_SECONDS
    return CHILD_SESSION_MODULES.get(item.nodeid.split("::", 1)[0], 0.0)


def dispatch_order(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """Longest first (stable: equal costs keep the collection order), no two CPU_HEAVY tests at
    once where the figures can avoid it. xdist (``--dist load``, ``--maxschedchunk 1``) hands
    each worker the first two tests it has not handed out, then one test whenever a worker
    finishes one, and a worker's second test waits for its first: so the ``workers`` longest
    tests each get a short one, not a long one, queued behind them."""
    ranked = one_heavy_at_a_time(sorted(items, key=expected_seconds, reverse=True), workers)
    if workers < 2 or len(ranked) < 2 * workers or expected_seconds(ranked[-workers]) > 0:
        return ranked
    heads, tails, middle = ranked[:workers], ranked[-workers:], ranked[workers:-workers]
    paired = [item for pair in zip(heads, tails) for item in pair]
    return paired + middle


def cpu_heavy(item: pytest.Item) -> bool:
    return any(item.nodeid.startswith(prefix) for prefix in CPU_HEAVY)


def one_heavy_at_a_time(ranked: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``ranked`` as xdist would hand it out by the figures (the next test to the first free
    worker), except that a CPU_HEAVY test waits while another runs and the next other test goes
    first. Beside two CPU hogs the timing-sensitive cells that run meanwhile get the CPU the
    second pip install or CLI grid would have taken."""
    if workers < 2 or not any(cpu_heavy(item) for item in ranked):
        return ranked
    free = [0.0] * workers                              # when each worker is next free (a heap)
    waiting, order, heavy_until = list(ranked), [], 0.0
    while waiting:
        now = heapq.heappop(free)
        pick = next((i for i, item in enumerate(waiting) if now >= heavy_until or not cpu_heavy(item)), 0)
        item = waiting.pop(pick)
        seconds = expected_seconds(item)
        if cpu_heavy(item):
            heavy_until = now + seconds
        order.append(item)
        heapq.heappush(free, now + seconds)
    return order


@pytest.fixture(scope="session")
def shared_once(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Callable[[Path], Any]], Any]:
    """``shared_once(name, build)``: ``build(folder)``'s JSON-able result, made once per session
    even under xdist. A module- or session-scoped fixture runs once per xdist worker that gets
    one of its tests; an expensive one (a nested pytest session, a generated report) through
    this runs once: the first worker to ask builds it under a lock, in the base temp dir all
    workers of the session share, and the others read its result (and its files). A build that
    fails leaves no result, so the next worker to ask tries again and fails on its own."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                      # the controller's base temp, shared by its workers

    def once(name: str, build: Callable[[Path], Any]) -> Any:
        folder = base / f"shared-{name}"
        folder.mkdir(exist_ok=True)
        with open(folder / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = folder / "result.json"
            if done.exists():
                return json.loads(done.read_text())
            work = folder / "work"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            result = build(work)
            done.write_text(json.dumps(result))
            return result
    return once


def plugins_kept_out(args: list[str]) -> list[str]:
    """The ``-p no:NAME`` options among ``args`` (as pairs: ``["-p no:x", ...]``)."""
    return [f"-p {name}" for flag, name in zip(args, args[1:]) if flag == "-p" and name.startswith("no:")]


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist each worker takes the next test when it finishes one (``--maxschedchunk 1``,
    unless given), in the order below, instead of a batch handed out early: a batch can end the
    session with one worker running the long tests it was given while the others are idle.

    The nested pytest sessions the tests start (tests/report, tests/nightly, tests/cells, ...)
    mostly run in temp dirs, outside this repository's ini: they get its ``-p no:...``
    options through ``PYTEST_ADDOPTS``, else each pays ~1.3 s of CPU importing hypothesis,
    pytest-benchmark and anyio (pyproject.toml's addopts)."""
    if config.pluginmanager.hasplugin("xdist") and getattr(config.option, "maxschedchunk", 0) is None:
        config.option.maxschedchunk = 1
    current = os.environ.get("PYTEST_ADDOPTS", "")
    missing = [pair for pair in plugins_kept_out(config.getini("addopts")) if pair not in current]
    if missing:
        os.environ["PYTEST_ADDOPTS"] = " ".join([current, *missing]).strip()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers only (they collect what the controller hands out; every worker orders
    the same items the same way): a run without xdist keeps pytest's collection order."""
    worker_input = getattr(config, "workerinput", None)
    if worker_input is None:
        return
    items[:] = dispatch_order(items, int(worker_input.get("workercount", 1)))
