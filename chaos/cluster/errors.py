"""The errors a topology raises: each message names the problem and the fix.

A topology that cannot be *started* as configured (unknown backend, missing binary, a bad
or unreachable endpoint, a server that will not start) is bad input: ``config_problem``
gives the one line the CLI prints (exit 254) and the cluster up supervisor logs. The same
classes raised once the topology is up (a reset, a failover) are rig failures at run time.
"""
from __future__ import annotations

from chaos.errors import BadArguments


class ClusterError(Exception):
    """The topology could not be started, reset or driven as asked."""


class UnknownBackend(ClusterError):
    """A backend name that does not exist; the message lists the valid names."""


class MissingBinary(ClusterError):
    """A server binary is not installed; the message names the command that installs it."""


class ServerStartError(ClusterError):
    """A server process exited or never became ready; the message carries its log tail."""


class PortInUse(ServerStartError):
    """The port picked for a server was taken before the server could bind it (retry another)."""


class EngineUnreachable(ClusterError):
    """The compose backend was asked for but no Docker engine answers."""


class Unsupported(ClusterError):
    """The backend cannot do this (e.g. SIGKILL a server on the external backend)."""


def one_line(text: str) -> str:
    """A message on one line: its first line, plus the last line of a log tail it carries
    (a server's own last words usually say why it would not start)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return ""
    first, rest = lines[0], [line for line in lines[1:] if not line.startswith("---")]
    if first.endswith("log tail:") and rest:
        return f"{first[:-len('log tail:')].rstrip(' ;,')}; its log ends: {rest[-1]}"
    return first


def config_problem(exc: BaseException) -> str | None:
    """The one-line bad-configuration message for an exception raised while a topology
    *starts*, or None when it is not the configuration's doing (a framework bug)."""
    from chaos.proxy.client import ToxiproxyError

    if isinstance(exc, ServerStartError) and not isinstance(exc, PortInUse):
        return (f"{one_line(str(exc))} (fix what the log says; CHAOS_REDIS_SERVER, CHAOS_PG_BIN and "
                "CHAOS_CLUSTER_BASE choose the binaries and the dir)")
    if isinstance(exc, (ClusterError, BadArguments)):
        return one_line(str(exc))
    if isinstance(exc, ImportError) and exc.name:
        return (f"Python package {exc.name!r} is not installed, and this backend needs it: `pip install "
                f"{exc.name}` (or run scripts/setup.sh), or use the native backend")
    if isinstance(exc, ToxiproxyError) and exc.status == 0:
        return (f"the proxy server does not answer: {one_line(exc.message)}; start it there, or fix "
                "TOXIPROXY_URL (unset it to have each cluster start its own proxy server)")
    if isinstance(exc, ValueError) and "Toxiproxy URL" in str(exc):
        return f"TOXIPROXY_URL: {one_line(str(exc))}"
    if isinstance(exc, OSError) and exc.filename:
        return (f"{exc.filename}: {exc.strerror or exc}: the topology's dir could not be made; give a writable "
                "dir with room in CHAOS_CLUSTER_BASE")
    return None
