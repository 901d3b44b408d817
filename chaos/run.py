"""The orchestrator's old address: everything it offered is in chaos/orchestrator/ now, and
stays importable from here (`from chaos.run import run_cell`)."""
from __future__ import annotations

from chaos.orchestrator import (  # noqa: F401 - re-exports
    RIG_ERRORS, Phase, PrimaryRedis, RigWatch, RunContext, RunMetrics, WorkerHandle, disk_full, fault_label,
    fault_phases, late_fault_notes, plan_workload, run_cell)
