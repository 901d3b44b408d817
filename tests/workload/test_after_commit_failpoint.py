"""The `after_commit` failpoint (committed, apply op not yet written) takes no `fail` action:
nothing is left to fail there, and recording the committed apply as `fail` would be a lie."""
from __future__ import annotations

import pytest

from chaos.workload.failpoints import validate


@pytest.mark.parametrize("action", ["kill", "pause", "signal"])
def test_after_commit_takes_kill_pause_signal(action):
    validate({"after_commit": {"action": action}})


def test_after_commit_refuses_fail_naming_the_fix():
    with pytest.raises(ValueError, match="after_commit: action fail is not possible there .*use kill, pause or signal"):
        validate({"after_commit": {"action": "fail"}})
