"""The session's chaos options and the topology fixtures.

One ``Cluster`` per pytest-xdist worker lives for the session (``chaos_cluster``); the
function-scoped ``chaos_reset_cluster`` resets it before each test, so tests never see each
other's data, toxics or failovers. Every fixture the plugin offers is named ``chaos_*`` (or
``blackbox``), and the framework's own fixtures depend only on those names, so a team's
fixture called ``cluster`` or ``postgres`` cannot replace a part of the framework. The old
short names are aliases in chaos/pytest_plugin/aliases.py, which this repository's conftest
loads. Fixture names are a public contract (docs/INTERFACES.md section 3).

Importing this module costs pytest's own import only: the cluster, the database and Redis
clients are imported when a fixture first runs.
"""
from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

import pytest

from chaos.pytest_plugin import settings

if TYPE_CHECKING:
    import psycopg
    import redis

    from chaos.cluster import Cluster, WorkerLinks
    from chaos.proxy.client import ToxiproxyClient

__all__ = ["ChaosOptions", "cluster_name", "ready_topology", "options_of"]

MARKERS = (
    "slow(seconds=N): takes more than a few seconds (N: about how many; xdist starts the longest first)",
)


# ---------------------------------------------------------------------------------------------
# options and configuration
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChaosOptions:
    """The chaos knobs of one pytest session (the same on every xdist worker)."""

    runs: int | None        # None: each suite's own default run count per cell
    seed: int               # always set: drawn once by the controller when not given, and reported
    time_scale: float       # multiplies every duration the framework controls
    backend: str            # native | compose | external
    keep_runs: bool         # keep run dirs of passing runs too
    topology: str = "replica"       # --chaos-topology, else $CHAOS_TOPOLOGY (sentinel:quorum=2, ...)
    server: str | None = None       # --chaos-server, else $CHAOS_SERVER; None: none named
    load_size: str = "ci"           # --chaos-load-size, else $CHAOS_LOAD_SIZE (chaos/expectations/load.py)


_OPTIONS = pytest.StashKey[ChaosOptions]()


def pytest_addoption(parser: pytest.Parser) -> None:
    from chaos.cluster import BACKENDS
    settings.add(parser, "--chaos-backend", metavar="NAME",
                 help=f"topology backend: {' | '.join(BACKENDS)} (default: $CHAOS_BACKEND or native)")
    settings.add(parser, "--chaos-runs", type=int, metavar="N",
                 help="runs per (preset, fault) cell (default: each suite's own)")
    settings.add(parser, "--chaos-seed", type=int, metavar="S",
                 help="seed of every random choice (default: drawn once per session and reported)")
    settings.add(parser, "--chaos-time-scale", type=float, default=1.0, metavar="X",
                 help="multiply every duration the framework controls (stay at 0.1 or above)")
    settings.add(parser, "--chaos-keep-runs", flag_only=True,
                 help="keep the run dirs of passing runs too (failed runs are always kept)")


def pytest_configure(config: pytest.Config) -> None:
    from chaos import extensions
    from chaos.cluster import ClusterError, configured
    from chaos.errors import BadArguments
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    try:   # the plugin's edge: options, else the environment (chaos.cluster.configured)
        where = configured(settings.value(config, "chaos_backend"), settings.value(config, "chaos_topology"),
                           settings.value(config, "chaos_server"))
        extensions.load_plugins()   # $CHAOS_PLUGINS: a team's faults, guards, presets (chaos/extensions.py)
    except (ClusterError, BadArguments) as exc:
        raise pytest.UsageError(str(exc)) from None
    runs = settings.value(config, "chaos_runs")
    if runs is not None and runs < 1:
        raise pytest.UsageError(f"--chaos-runs={runs}: give a run count of 1 or more")
    scale = settings.value(config, "chaos_time_scale")
    if not scale > 0:
        raise pytest.UsageError(f"--chaos-time-scale={scale}: give a positive factor (0.1 or above keeps races real)")
    seed = settings.value(config, "chaos_seed")
    worker_input = getattr(config, "workerinput", None)
    if seed is None:
        seed = worker_input["chaos_seed"] if worker_input and "chaos_seed" in worker_input \
            else random.SystemRandom().randrange(2**31)
    config.stash[_OPTIONS] = ChaosOptions(runs=runs, seed=seed, time_scale=scale, backend=where.backend,
                                          keep_runs=settings.value(config, "chaos_keep_runs"),
                                          topology=where.topology, server=where.server,
                                          load_size=settings.value(config, "chaos_load_size")
                                          or os.environ.get("CHAOS_LOAD_SIZE") or "ci")


def options_of(config: pytest.Config) -> ChaosOptions | None:
    """The session's ChaosOptions (None before pytest_configure ran)."""
    return config.stash.get(_OPTIONS, None)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: every worker gets the controller's seed, so a session replays with one number."""
    node.workerinput["chaos_seed"] = node.config.stash[_OPTIONS].seed


def pytest_report_header(config: pytest.Config) -> str | None:
    """One line, only in a session that was given a chaos setting (a project that does not use
    the framework sees no change); the seed is also printed with the cell summary."""
    if not settings.explicitly_set(config):
        return None
    opts = config.stash[_OPTIONS]
    return (f"chaos: backend={opts.backend} server={opts.server or 'default'} "
            f"topology={opts.topology} seed={opts.seed} "
            f"time_scale={opts.time_scale} runs={opts.runs or 'suite default'} "
            f"(replay with --chaos-seed={opts.seed})")


def cluster_name(config: pytest.Config) -> str:
    """``<run>-<worker>``: unique per pytest run and xdist worker, and the cluster's dir name."""
    worker_input = getattr(config, "workerinput", None)
    run = (worker_input or {}).get("testrunuid") or _RUN_UID
    worker = os.environ.get("PYTEST_XDIST_WORKER", "master")
    return f"{run[:8]}-{worker}"


_RUN_UID = uuid.uuid4().hex


# ---------------------------------------------------------------------------------------------
# topology fixtures
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chaos_options(pytestconfig: pytest.Config) -> ChaosOptions:
    return pytestconfig.stash[_OPTIONS]


@pytest.fixture(scope="session")
def chaos_cluster(pytestconfig: pytest.Config, chaos_options: ChaosOptions) -> Iterator[Cluster]:
    """This worker's topology for the whole session (not reset: use ``chaos_reset_cluster``)."""
    from chaos.cluster import start_cluster
    topology = start_cluster(chaos_options.backend, cluster_name(pytestconfig), topology=chaos_options.topology,
                             server=chaos_options.server)
    try:
        yield topology
    finally:
        topology.close()


@pytest.fixture
def chaos_reset_cluster(chaos_cluster: Cluster) -> Cluster:
    """The topology after ``reset()``: empty Redis and database, no toxics, original primary
    (see ``ready_topology``)."""
    return ready_topology(chaos_cluster)


def ready_topology(chaos_cluster: Cluster) -> Cluster:
    """Reset ``chaos_cluster`` for the next test.

    A reset that fails (a fault that could not be healed) rebuilds the topology in place, and
    so does a dead proxy server or PostgreSQL (a rig failure of the last test: health.py),
    without trying a reset first. A dead Redis node is the reset's to restart.
    """
    from chaos.cluster.health import rig_problems
    # our processes: a poll and a /proc read each; servers that are not ours: a probe each
    broken = rig_problems(chaos_cluster, spared={"redis", "sentinel"})
    if broken:
        chaos_cluster.rebuild(reason="; ".join(b.split("; log tail:")[0] for b in broken))
        return chaos_cluster
    try:
        chaos_cluster.reset()
    except Exception as exc:  # noqa: BLE001 - any failure: rebuild, and say why
        chaos_cluster.rebuild(reason=f"{type(exc).__name__}: {exc}")
    return chaos_cluster


@pytest.fixture
def chaos_toxiproxy(chaos_reset_cluster: Cluster) -> ToxiproxyClient:
    return chaos_reset_cluster.api


@pytest.fixture
def chaos_redis_proxy(chaos_reset_cluster: Cluster) -> str:
    return chaos_reset_cluster.links["redis"]


@pytest.fixture
def chaos_replica_proxy(chaos_reset_cluster: Cluster) -> str:
    return chaos_reset_cluster.links["replica"]


@pytest.fixture
def chaos_postgres_proxy(chaos_reset_cluster: Cluster) -> str:
    return chaos_reset_cluster.links["postgres"]


@pytest.fixture
def chaos_replication_proxy(chaos_reset_cluster: Cluster) -> str:
    return chaos_reset_cluster.links["replication"]


@pytest.fixture
def chaos_worker_links(chaos_reset_cluster: Cluster) -> Callable[[str], WorkerLinks]:
    return chaos_reset_cluster.worker_links


# ---------------------------------------------------------------------------------------------
# client fixtures (through the shared proxies, so faults on those links reach them)
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def chaos_redis_primary(chaos_reset_cluster: Cluster) -> Iterator[redis.Redis]:
    import redis
    client = redis.Redis.from_url(chaos_reset_cluster.redis_url("redis"), decode_responses=True, protocol=2)
    yield client
    client.close()


@pytest.fixture
def chaos_redis_replica(chaos_reset_cluster: Cluster) -> Iterator[redis.Redis]:
    import redis
    client = redis.Redis.from_url(chaos_reset_cluster.redis_url("replica"), decode_responses=True, protocol=2)
    yield client
    client.close()


@pytest.fixture
def chaos_postgres(chaos_reset_cluster: Cluster) -> Iterator[psycopg.Connection]:
    import psycopg
    conn = psycopg.connect(chaos_reset_cluster.pg_dsn("postgres"), autocommit=True)
    yield conn
    conn.close()
