"""Fault plugins: one module per fault, selected by name (see faults/registry.py)."""
from chaos.params import Param
from faults.interface import Fault, FaultContext, FaultError, Plan
from faults.registry import FAULTS, describe_fault, fault_class, fault_names, get_fault

__all__ = ["FAULTS", "Fault", "FaultContext", "FaultError", "Param", "Plan",
           "describe_fault", "fault_class", "fault_names", "get_fault"]
