"""The orchestrator: run one preset x faults cell N times, each run checked on its own.

One run: reset the state (truncate + flush, fast), create the groups and the rows,
start the consumers as real OS processes (fork server) on their own proxies and wait
until each blocks in XREADGROUP, arm the faults, start the producers, watch every
process, wait for the workload to go quiet, heal the faults, drain with XAUTOCLAIM
recovery (bounded and scaled), stop the workers, read the FinalState and call the
checker. A worker that dies without a fault or failpoint having killed it makes the
run's verdict `unknown`, with its exit signal and log tail in the reasons.

The rig vouches for itself: a watch thread checks the cluster's servers and proxies and
the worker fork server throughout the run (chaos/cluster/health.py). A component that
died, stopped or stopped answering when no configured fault may take it down
(``Fault.takes_down``), or an error of the orchestrator's own Redis or PostgreSQL
connection, is a rig failure: the run ends at once (no drain, no waiting out a bound),
its verdict is `unknown` with the component named in ``rig_failures``, and it still gets
a RunResult (empty counts when the final state cannot be read).

Where each part lives: cell.py the cell loop (`run_cell`: N runs, the summary, notes,
tidying); sequence.py the order of one run's phases, the one sequence of both runners
(`run_phases` over a runner's steps: `Orchestrated` there, the black box's session);
phases.py reset, arm and workload (faultthreads.py the faults' schedule and heal); drain.py
the drain and what its end explains; check.py the final state, the checker and the run's metrics; run.py the run's state and the wait loop the phases share;
workers.py the worker processes; rigwatch.py the one rig watcher; primary.py the
orchestrator's Redis client that follows the primary; faultcontext.py the FaultContext;
notes.py the faults' phases and notes from the history; livefold.py the history folded for
the check while it is written; priority.py a large run's fold ahead of its workers.
"""
from chaos.orchestrator.cell import cell_spec, fault_label, run_cell, run_spec
from chaos.orchestrator.faultcontext import RunContext
from chaos.orchestrator.notes import fault_phases, late_fault_notes
from chaos.orchestrator.phases import plan_workload
from chaos.orchestrator.primary import PrimaryRedis
from chaos.orchestrator.rigwatch import RIG_ERRORS, RigWatch, disk_full
from chaos.orchestrator.workers import WorkerHandle
from chaos.results import Phase, RunMetrics

__all__ = ["RIG_ERRORS", "Phase", "PrimaryRedis", "RigWatch", "RunContext", "RunMetrics", "WorkerHandle",
           "disk_full", "fault_label", "fault_phases", "late_fault_notes", "plan_workload", "run_cell",
           "run_spec", "cell_spec"]
