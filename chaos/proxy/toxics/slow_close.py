"""`slow_close`: after the source's EOF, wait `delay` ms before closing the destination."""
from __future__ import annotations

from chaos.proxy.toxics.base import INT64, SequentialStage, ToxicType


class SlowCloseStage(SequentialStage):
    """Data passes at once; only the end of the stream is delayed."""

    def plan_eof(self, now: float) -> float:
        return now + self.settings.attributes["delay"] / 1000.0


SLOW_CLOSE = ToxicType(name="slow_close", go_name="SlowCloseToxic", attributes={"delay": INT64}, stage=SlowCloseStage)
