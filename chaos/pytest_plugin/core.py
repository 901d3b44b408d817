"""The pytest plugin: chaos options, the topology fixtures, and (later) report hooks.

Registered by the ``pytest11`` entry point and by the root conftest. One ``Cluster`` per
pytest-xdist worker lives for the session; the function-scoped ``cluster`` fixture resets
it before each test, so tests never see each other's data, toxics or failovers.
Fixture names are a public contract (docs/INTERFACES.md section 3).

Sections: options and configuration; topology fixtures; client fixtures. Hooks added by
other parts of the framework go in their own section below these.
"""
from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator

import psycopg
import pytest
import redis

from chaos import extensions
from chaos.errors import BadArguments
from chaos.cluster import BACKENDS, Cluster, ClusterError, WorkerLinks, check_backend, start_cluster
from chaos.cluster.health import rig_problems
from chaos.proxy.client import ToxiproxyClient

# The black-box fixture (`blackbox`) and marker (`@pytest.mark.blackbox(command=, config=)`).
pytest_plugins = ["chaos.blackbox.pytest_api",
                  "chaos.scorecard.pytest_api",   # @pytest.mark.scorecard, blackbox.scorecard(fault)
                  "chaos.pytest_server",      # --chaos-server redis|valkey
                  "chaos.pytest_allure",      # environment.properties, categories, --alluredir checks
                  "chaos.pytest_shard",       # --chaos-shard K/N and recorded durations (nightly CI)
                  "chaos.pytest_rundirs",     # a passing test's run dirs removed, a failing one's named
                  "chaos.pytest_load",        # --chaos-load-size ci|full (suites/load)
                  "chaos.pytest_topology",    # --chaos-topology replica|sentinel
                  "chaos.pytest_cells"]       # the cell runner (chaos_cell), the per-cell summary

__all__ = ["ChaosOptions", "cluster_name", "ready_topology"]


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


_OPTIONS = pytest.StashKey[ChaosOptions]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "chaos: fault injection on Redis Streams + PostgreSQL")
    group.addoption("--chaos-backend", default=None, metavar="NAME",
                    help=f"topology backend: {' | '.join(BACKENDS)} (default: $CHAOS_BACKEND or native)")
    group.addoption("--chaos-runs", type=int, default=None, metavar="N",
                    help="runs per (preset, fault) cell (default: each suite's own)")
    group.addoption("--chaos-seed", type=int, default=None, metavar="S",
                    help="seed of every random choice (default: drawn once per session and reported)")
    group.addoption("--chaos-time-scale", type=float, default=1.0, metavar="X",
                    help="multiply every duration the framework controls (stay at 0.1 or above)")
    group.addoption("--chaos-keep-runs", action="store_true", default=False,
                    help="keep the run dirs of passing runs too (failed runs are always kept)")


def pytest_configure(config: pytest.Config) -> None:
    try:
        backend = check_backend(config.getoption("chaos_backend"))
        extensions.load_plugins()   # $CHAOS_PLUGINS: a team's faults, guards, presets (chaos/extensions.py)
    except (ClusterError, BadArguments) as exc:
        raise pytest.UsageError(str(exc)) from None
    runs = config.getoption("chaos_runs")
    if runs is not None and runs < 1:
        raise pytest.UsageError(f"--chaos-runs={runs}: give a run count of 1 or more")
    scale = config.getoption("chaos_time_scale")
    if not scale > 0:
        raise pytest.UsageError(f"--chaos-time-scale={scale}: give a positive factor (0.1 or above keeps races real)")
    seed = config.getoption("chaos_seed")
    worker_input = getattr(config, "workerinput", None)
    if seed is None:
        seed = worker_input["chaos_seed"] if worker_input and "chaos_seed" in worker_input \
            else random.SystemRandom().randrange(2**31)
    config.stash[_OPTIONS] = ChaosOptions(runs=runs, seed=seed, time_scale=scale, backend=backend,
                                          keep_runs=config.getoption("chaos_keep_runs"))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist: every worker gets the controller's seed, so a session replays with one number."""
    node.workerinput["chaos_seed"] = node.config.stash[_OPTIONS].seed


def pytest_report_header(config: pytest.Config) -> str:
    opts = config.stash[_OPTIONS]
    return (f"chaos: backend={opts.backend} seed={opts.seed} time_scale={opts.time_scale} "
            f"runs={opts.runs or 'suite default'} (replay with --chaos-seed={opts.seed})")


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
    """This worker's topology for the whole session (not reset: use ``cluster`` in tests)."""
    topology = start_cluster(chaos_options.backend, cluster_name(pytestconfig))
    try:
        yield topology
    finally:
        topology.close()


@pytest.fixture
def cluster(chaos_cluster: Cluster) -> Cluster:
    """The topology after ``reset()``: empty Redis and database, no toxics, original primary
    (see ``ready_topology``)."""
    return ready_topology(chaos_cluster)


def ready_topology(chaos_cluster: Cluster) -> Cluster:
    """Reset ``chaos_cluster`` for the next test.

    A reset that fails (a fault that could not be healed) rebuilds the topology in place, and
    so does a dead proxy server or PostgreSQL (a rig failure of the last test: health.py),
    without trying a reset first. A dead Redis node is the reset's to restart.
    """
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
def toxiproxy(cluster: Cluster) -> ToxiproxyClient:
    return cluster.api


@pytest.fixture
def redis_proxy(cluster: Cluster) -> str:
    return cluster.links["redis"]


@pytest.fixture
def replica_proxy(cluster: Cluster) -> str:
    return cluster.links["replica"]


@pytest.fixture
def postgres_proxy(cluster: Cluster) -> str:
    return cluster.links["postgres"]


@pytest.fixture
def replication_proxy(cluster: Cluster) -> str:
    return cluster.links["replication"]


@pytest.fixture
def worker_links(cluster: Cluster) -> Callable[[str], WorkerLinks]:
    return cluster.worker_links


# ---------------------------------------------------------------------------------------------
# client fixtures (through the shared proxies, so faults on those links reach them)
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def redis_primary(cluster: Cluster) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(cluster.redis_url("redis"), decode_responses=True, protocol=2)
    yield client
    client.close()


@pytest.fixture
def redis_replica(cluster: Cluster) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(cluster.redis_url("replica"), decode_responses=True, protocol=2)
    yield client
    client.close()


@pytest.fixture
def postgres(cluster: Cluster) -> Iterator[psycopg.Connection]:
    conn = psycopg.connect(cluster.pg_dsn("postgres"), autocommit=True)
    yield conn
    conn.close()
