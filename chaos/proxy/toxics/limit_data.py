"""`limit_data`: forward at most `bytes` bytes in total on this connection, then close.

The count is per connection and direction and survives updates of the toxic.
"""
from __future__ import annotations

from chaos.proxy.toxics.base import INT64, Stage, ToxicType


class LimitDataStage(Stage):
    """Cuts the chunk that crosses the limit, then ends the stream."""

    def start(self) -> None:
        self.sent = getattr(self, "sent", 0)

    def push(self, data: bytes, ts: float) -> None:
        if not self.active:
            super().push(data, ts)
            return
        if self.closed:
            return
        remaining = self.settings.attributes["bytes"] - self.sent
        if remaining > 0:
            piece = data[:remaining]
            self.sent += len(piece)
            self.out.push(piece, ts)
            remaining -= len(piece)
        if remaining <= 0:
            self.close_output()


LIMIT_DATA = ToxicType(name="limit_data", go_name="LimitDataToxic", attributes={"bytes": INT64}, stage=LimitDataStage)
