"""Expected figures under load: a backlog of many orders with many events each, and a fault
firing in the middle of it.

`recommended` (S2 sharding + CAS on the business version + inbox) and `baseline` (two
consumers in one group, plain UPDATE) each run under kill-consumer, publish-blip and
promote-replica, and all three at once. A killed consumer is restarted under its name
(`respawn=1`, as any deployment restarts a crashed worker) and reads its own PEL first;
consumers read 20 entries per XREADGROUP.

* kill-consumer: SIGKILL of a consumer once half of the events are in the streams.
* publish-blip: the producer's link resets for 800 ms half way through its publishing; the
  retrying producer (for `recommended`: 4 retries, the last 4 s after the first attempt) retries the failed batch while later events of the same orders go out,
  so the log holds older versions after newer ones (a producer reorder).
* promote-replica: once a quarter of the events are in the streams, replication is held for
  500 ms, the primary SIGKILLed and the replica promoted: what the old primary acknowledged
  in the hold and nobody read is gone (`lost`), and read-and-acked entries come back.

`recommended` keeps every key's final state right and applies nothing twice, except what a
failover destroys: a lost event may be its order's last one, and then that order ends one
step short (reported as `lost` and `wrong_keys`, never hidden). `baseline` shows what load
does to a plain consumer pair: writes of one order land out of order, and its final states
are wrong.

Sizes: `ci` (2,000 events: 100 orders x 20, 3 ms each, over 1 s; the default test run) or `full`
(10^5 events: 1,000 orders x 100 at cost 0, the benchmark and the nightly), passed by name:
suites/load runs `cells(load_size(name))` for the session's size (`--chaos-load-size`, else
$CHAOS_LOAD_SIZE, read at the plugin's edge into `ChaosOptions.load_size`); nothing here reads
the environment. The rows carry the size's workload, so each size has its own rows; the
table holds both sizes' rows. `CELLS` are the `ci` size's (the run counts `chaos matrix` plans by).
"""
from __future__ import annotations

from dataclasses import dataclass

from chaos.expectations.cells import Cell, rows
from chaos.expectations.table import RUNS, each_run, eq, ge


@dataclass(frozen=True)
class LoadSize:
    """One size of the load cells: orders x events each, and the gap between two publishes."""

    name: str
    keys: int
    events: int
    gap_ms: float
    cost_ms: float = 0.0

    @property
    def total(self) -> int:
        return self.keys * self.events

    @property
    def publish_ms(self) -> float:
        """How long the producer's schedule lasts."""
        return self.total * self.gap_ms

    @property
    def workload(self) -> str:
        return (f"many-orders:keys={self.keys},events={self.events},cost_ms={self.cost_ms:g},"
                f"gap_ms={self.gap_ms:g}")


# The faults must meet a backlog and a producer still publishing. At 10^5 events the
# consumers' own work (PostgreSQL through the proxy) is the bound and the schedule lasts 5 s.
# At the ci size cost-0 consumers kept up with a 200 ms schedule that the producer could
# finish before a fault's start: the failover's hold found nothing unread to lose (lost 0)
# and the blip no publish to refuse, now and then. So the ci schedule lasts 1 s (2,000
# events/s; the blip at 500 ms) and a 3 ms job caps four consumers at 1,333 events/s and two
# at 667/s: what is published in the hold is still unread when the primary dies.
SIZES = {"ci": LoadSize("ci", keys=100, events=20, gap_ms=0.5, cost_ms=3.0),
         "full": LoadSize("full", keys=1000, events=100, gap_ms=0.05)}


def load_size(name: str | None = None) -> LoadSize:
    """The size named, else `ci`; an unknown name is refused naming the sizes."""
    name = name or "ci"
    try:
        return SIZES[name]
    except KeyError:
        raise ValueError(f"load size {name!r} is not one of {', '.join(SIZES)} "
                         f"(set --chaos-load-size or $CHAOS_LOAD_SIZE to one of them)") from None


def faults(size: LoadSize, *, together: bool = False) -> dict[str, str]:
    """The three faults, each firing mid-backlog at this size: the failover's hold once a
    quarter of the events are in the streams (so the producer still publishes into it), the
    kill at half (with the others: at an eighth, before the primary it watches is killed),
    the blip half way through the producer's schedule."""
    kill_at = size.total // 8 if together else size.total // 2
    # The hold lasts 500 ms and then until the failover would take back what the rows need,
    # read on both servers: a processed entry that comes back (alone: also an acked entry
    # nobody read). Beside two CPU hogs a 500 ms hold alone once came back with nothing
    # (baseline duplicated 0); such a run is now `unknown` (the took-back effect), not a mismatch.
    until = "reread" if together else "reread/unread"
    return {"kill-consumer": f"kill-consumer:after_entries={kill_at},at_ms=0",
            "publish-blip": f"publish-blip:at_ms={0.5 * size.publish_ms:g},duration_ms=800",
            "promote-replica": f"promote-replica:after_entries={size.total // 4},at_ms=0,until={until}"}


# The recommended row's producer under the blip: the retrying one with 4 retries, so its last retry
# comes 4 s after an event's first attempt (the default's 2: 1 s). The row asks that no publish is
# given up (indeterminate == 0), which holds while the blip is shorter than the retries; the blip is
# 800 ms by its fault's clock, but its end is the fault thread's: a loaded machine (load ~23) held
# it 2.77 s, every attempt of 1,000 events fell inside, indeterminate 1000. The baseline row keeps the
# default producer: its reorder needs only retries landing after later events.
BLIP_PRODUCER = "retrying:retries=4"
# Read batches of 20 (prefetch): a kill then leaves read, unprocessed entries in the PEL.
RECOMMENDED = "recommended:respawn=1,count=20"
BASELINE = "baseline:respawn=1,count=20"
RUN_COUNT = 1


def cells(size: LoadSize) -> list[Cell]:
    kill, blip, promote = faults(size).values()
    parts = {"workload": size.workload}
    everything = tuple(faults(size, together=True).values())
    correct = dict(published=eq(size.total * RUNS), duplicated=eq(0), projection_drift=eq(0), reordered=eq(0))
    return [
        Cell(RECOMMENDED, (kill,), RUN_COUNT, dict(correct, lost=eq(0), indeterminate=eq(0), wrong_final_state_runs=eq(0)),
             parts=parts, id=f"recommended|kill-consumer|{size.name}",
             note="the restarted consumer finishes its PEL: every order ends right, nothing applied twice"),
        Cell(RECOMMENDED, (blip,), RUN_COUNT, dict(correct, lost=eq(0), indeterminate=eq(0), wrong_final_state_runs=eq(0)),
             parts={**parts, "producer": BLIP_PRODUCER}, id=f"recommended|publish-blip|{size.name}",
             note="retried publishes land after newer versions of their orders: CAS rejects them as stale"),
        Cell(RECOMMENDED, (promote,), RUN_COUNT, dict(correct, lost=each_run(ge(1)), redelivered=each_run(ge(1))),
             parts=parts, id=f"recommended|promote-replica|{size.name}",
             note="the failover loses what the old primary acked in the hold (an order whose last "
                  "event is lost ends short); redelivered copies are rejected, nothing applied twice"),
        Cell(RECOMMENDED, everything, RUN_COUNT, dict(duplicated=eq(0), projection_drift=eq(0), reordered=eq(0),
                                                  redelivered=each_run(ge(1))),
             parts=parts, id=f"recommended|all-three|{size.name}",
             note="kill, blip and failover in one run: nothing applied twice or out of order; what "
                  "the failover loses, and the publishes whose every retry fell into the blip or the "
                  "failover (indeterminate, not published), are reported, not bounded"),
        Cell(BASELINE, (kill,), RUN_COUNT, dict(lost=eq(0), indeterminate=eq(0), published=eq(size.total * RUNS)),
             parts=parts, id=f"baseline|kill-consumer|{size.name}",
             note="nothing lost (the restarted consumer re-reads its PEL), but the entry in hand may "
                  "be applied twice and the two consumers race an order's writes"),
        Cell(BASELINE, (blip,), RUN_COUNT, dict(reordered=each_run(ge(1)), wrong_final_state_runs=eq(RUNS)),
             parts=parts, id=f"baseline|publish-blip|{size.name}",
             note="retried publishes overwrite newer versions; consumer races reorder the rest"),
        Cell(BASELINE, (promote,), RUN_COUNT, dict(lost=each_run(ge(1)), duplicated=each_run(ge(1))),
             parts=parts, id=f"baseline|promote-replica|{size.name}",
             note="the failover loses acked entries and the redelivered copies are applied again"),
        Cell(BASELINE, everything, RUN_COUNT, dict(duplicated=each_run(ge(1)), wrong_final_state_runs=eq(RUNS)),
             parts=parts, id=f"baseline|all-three|{size.name}",
             note="all three faults: redelivered copies applied again, wrong final states"),
    ]


CELLS: list[Cell] = cells(load_size("ci"))   # suites/load runs the session's size's: cells(load_size(name))
# Both sizes' rows, whatever the size chosen: the table (and the README rendered from it) stays
# the same, and each size's cells find their own row by its workload.
ROWS = rows([cell for name in SIZES for cell in cells(SIZES[name])])
