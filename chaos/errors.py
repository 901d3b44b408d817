"""Usage errors and exit codes: the bottom of the house, imported by every layer.

Exit codes follow Jepsen's: 0 matches the expectation (or none is set), 1 mismatch,
2 unknown, 254 bad arguments, 255 internal error. Every error raised for bad input says
what is wrong and how to fix it, as hypothesis's errors do, and is raised before anything
starts, so nothing is left half-done by it.

Where bad input ends and a rig failure begins: whatever stops a run before its topology is
up (arguments, variables, binaries, a backend, an endpoint that does not answer, a server
that will not start) is bad input: exit 254, one line naming the fix, nothing left behind.
Once the topology is up, a part of it that dies or hangs is a rig failure: verdict
`unknown`, exit 2. Anything else is a framework bug: exit 255, one line naming the
exception and the file that holds its traceback (chaos/cli/failures.py).

    ChaosError
     ├── BadArguments   input the framework cannot act on (a spec, a parameter, a path)
     └── RigFailure     the framework's own parts failed (a server, a proxy, the fork
                        server): the verdict is `unknown` and no strategy is to blame
"""
from __future__ import annotations

EXIT_OK, EXIT_MISMATCH, EXIT_UNKNOWN, EXIT_BAD_ARGS, EXIT_INTERNAL = 0, 1, 2, 254, 255


class ChaosError(Exception):
    """Base of the framework's own errors."""


class BadArguments(ChaosError):
    """Input the framework cannot act on; the message names the problem and the fix.

    Raised before any server, worker or run dir exists, so a bad spec leaves nothing
    behind. The CLI turns it into exit code 254; the pytest plugin into a usage error.
    """


class RigFailure(ChaosError):
    """The rig could not vouch for a run: one of the framework's own parts (a server, the
    proxy, the fork server, the orchestrator's connections) died, hung or could not be read
    outside any configured fault. The message names the component and carries its log tail.

    A pytest cell raises it (not AssertionError), so Allure shows the cell *broken*, apart
    from a strategy that broke its expectation.
    """
