"""`reset_peer`: on the first chunk (dropped), wait `timeout` ms, then close the connection.

Connections opened while the toxic exists get SO_LINGER 0 on both sockets, so the close
is a TCP RST (clients see ECONNRESET); connections already open get a plain FIN.
"""
from __future__ import annotations

from chaos.proxy.toxics.base import INT64, Deadline, Stage, ToxicType, later


class ResetPeerStage(Stage):
    """Idle connections are untouched; the first byte (or EOF) triggers the reset."""

    def start(self) -> None:
        self.timer: Deadline | None = None
        self.triggered = False

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def rerun(self) -> None:
        if self.triggered:
            return  # as in Toxiproxy, a reset that has started waiting cannot be interrupted
        super().rerun()

    def _trigger(self) -> None:
        if self.triggered or self.closed:
            return
        self.triggered = True
        ms = max(self.settings.attributes["timeout"], 0)
        if ms == 0:
            self.close_output()
        else:
            self.timer = later(self.link.loop, ms / 1000.0, self.close_output)

    def push(self, data: bytes, ts: float) -> None:
        if not self.active:
            super().push(data, ts)
        else:
            self._trigger()

    def push_eof(self) -> None:
        if not self.active:
            super().push_eof()
        else:
            self._trigger()


RESET_PEER = ToxicType(name="reset_peer", go_name="ResetToxic", attributes={"timeout": INT64}, stage=ResetPeerStage)
