"""Guards (the write side of a strategy); a new one is one module plus one line here (or an
entry point in `redis_streams_chaos.guards`, or `chaos.extensions.register`)."""
from chaos import extensions
from chaos.strategies.guards.base import Guard, Outcome
from chaos.strategies.guards.cas import Cas
from chaos.strategies.guards.inbox import Inbox
from chaos.strategies.guards.lock import Lock
from chaos.strategies.guards.noop import Noop
from chaos.strategies.guards.plain import Plain
from chaos.strategies.guards.reorder_buffer import ReorderBuffer
from chaos.strategies.guards.setnx_dedupe import SetnxDedupe
from chaos.strategies.guards.state_carried import StateCarried

GUARDS: dict[str, type[Guard]] = {
    "plain": Plain,
    "lock": Lock,
    "cas": Cas,
    "inbox": Inbox,
    "setnx-dedupe": SetnxDedupe,
    "reorder-buffer": ReorderBuffer,
    "state-carried": StateCarried,
    "noop": Noop,
}
extensions.attach("guards", GUARDS)

__all__ = ["GUARDS", "Guard", "Outcome"]
