"""`timeout`: drop all data; close after `timeout` ms without data (0 = never) or when
the source ends.

Removing the toxic closes the connection, as in Toxiproxy (its Cleanup closes the stub).
"""
from __future__ import annotations

from chaos.proxy.toxics.base import INT64, Deadline, Stage, ToxicType, later


class TimeoutStage(Stage):
    """Swallows data; Toxiproxy re-arms its timer on every chunk, and so do we."""

    def start(self) -> None:
        self.timer: Deadline | None = None
        self._arm()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        ms = self.settings.attributes["timeout"]
        if self.active and ms > 0 and not self.closed:
            self.timer = later(self.link.loop, ms / 1000.0, self.close_output)

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def push(self, data: bytes, ts: float) -> None:
        if not self.active:
            super().push(data, ts)
        elif not self.closed:
            self._arm()

    def push_eof(self) -> None:
        if not self.active:
            super().push_eof()
        else:
            self.close_output()   # the source ended: Toxiproxy closes at once

    def cleanup(self) -> bool:
        # Toxiproxy calls Cleanup whatever the toxicity draw was.
        self.close_output()
        return True


TIMEOUT = ToxicType(name="timeout", go_name="TimeoutToxic", attributes={"timeout": INT64}, stage=TimeoutStage)
