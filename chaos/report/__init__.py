"""Reports for people: Allure attachments, a run's timeline plot, the matrix page.

Imported lazily by what needs them: matplotlib is only loaded by the timeline.
"""
from __future__ import annotations

from chaos.report.allure_cell import allure_active, report_cell
from chaos.report.matrix import render_matrix, write_matrix

__all__ = ["allure_active", "render_matrix", "report_cell", "write_matrix"]
