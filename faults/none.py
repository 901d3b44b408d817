"""none: no fault; the cell measures the strategy on its own."""
from __future__ import annotations
from faults.interface import Fault


class NoFault(Fault):
    name = "none"
    touches_publish = False   # nothing acts
    description = "no fault: the workload runs undisturbed"
