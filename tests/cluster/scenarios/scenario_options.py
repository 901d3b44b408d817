"""Run by test_cluster_plugin.py in a child pytest: writes this worker's chaos_options."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path


def test_options(chaos_options):
    out = Path(os.environ["CHAOS_SCENARIO_OUT"]) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'master')}.json"
    out.write_text(json.dumps(dataclasses.asdict(chaos_options)))
