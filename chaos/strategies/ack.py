"""Ack policy: when a delivered entry leaves the PEL, and what happens to one that keeps failing.

* `after` (the default): XACK after the effect committed; a crash leaves the entry pending,
  recoverable by XAUTOCLAIM.
* `on-receive`: XREADGROUP NOACK (or XACK right after the read with noack=0); a crash loses
  everything delivered and not yet done.
* `batch=1` (with after): one multi-id XACK per read batch instead of one per entry; fewer
  round trips, and a crash mid-batch redelivers the processed part of the batch too.
* `max_attempts` > 0: an entry whose handling failed on its max_attempts-th delivery goes
  to the DLQ stream and is acked; 0 keeps it pending forever (the poison reference row).
"""
from __future__ import annotations

from typing import ClassVar

from chaos.errors import BadArguments
from chaos.params import Param, format_spec
from chaos.strategies.part import Part

DLQ_STREAM = "orders:dlq"


class AckPolicy(Part):
    slot: ClassVar[str] = "ack"
    name = "ack"
    summary = "when to XACK, and max attempts before the DLQ"
    params = (
        Param("mode", "after", "after processing, or on receive", choices=("after", "on-receive")),
        Param("noack", True, "on-receive via XREADGROUP NOACK (else XACK right after the read)"),
        Param("max_attempts", 0, "deliveries before a failing entry goes to the DLQ (0 = never)", minimum=0),
        Param("dlq", DLQ_STREAM, "dead-letter stream"),
        Param("batch", False, "ack after: one XACK for the processed entries of a read, at its end "
              "(a crash mid-batch then redelivers the processed part too)"),
    )

    def validate(self) -> None:
        if self.mode == "on-receive" and self.max_attempts:
            raise BadArguments("ack on-receive with max_attempts: an entry acked on receive is never "
                               "redelivered, so it cannot reach the DLQ; use mode=after")

    @property
    def after(self) -> bool:
        return self.mode == "after"

    @property
    def uses_noack(self) -> bool:
        return self.mode == "on-receive" and self.noack

    def label(self) -> str:
        return format_spec(self.mode, {k: v for k, v in self.values.items()
                                       if k != "mode" and v != self.declared[k].default})

