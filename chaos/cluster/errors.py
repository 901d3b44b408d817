"""The errors a topology raises: each message names the problem and the fix."""
from __future__ import annotations


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
