"""The compose backend: chaos/cluster/docker-compose.yml run through the docker SDK, one project per worker.

The SDK has no compose support, so this module reads the compose file itself (the small
subset it uses: image, command, environment, network_mode, ``${VAR}`` and
``${VAR:-default}``) and creates one container per service, labelled as compose would
(``com.docker.compose.project`` / ``.service``) so ``docker compose -p <project> down``
also cleans up. Servers run in the containers; the Cluster logic is the same as native.
The compose file is package data (found with importlib.resources, so an installed wheel has
it); the docker SDK and PyYAML are the `compose` extra, imported only here.
"""
from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from chaos.cluster.endpoint import Endpoint
from chaos.cluster.errors import ClusterError, EngineUnreachable, ServerStartError
from chaos.cluster.ports import HOST, free_port
from chaos.cluster.rundirs import ClusterDir, new_cluster_dir
from chaos.cluster.topology import Cluster, RedisNode
from chaos.proxy.client import ToxiproxyClient

COMPOSE_FILE = Path(os.environ.get("CHAOS_COMPOSE_FILE")
                    or str(resources.files("chaos.cluster").joinpath("docker-compose.yml")))
COMPOSE_EXTRA = "pip install 'redis-streams-chaos[compose]'"
PORT_VARIABLES = {"redis-primary": "REDIS_PRIMARY_PORT", "redis-replica": "REDIS_REPLICA_PORT",
                  "postgres": "POSTGRES_PORT", "toxiproxy": "TOXIPROXY_PORT"}
NODE_SERVICES = {"a": "redis-primary", "b": "redis-replica"}
READY_TIMEOUT_S = 120.0          # includes pulling an image the first time
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class ContainerSpec:
    """One service of the compose file, ready for ``client.containers.run(**spec.run_kwargs())``."""

    service: str
    project: str
    image: str
    command: list[str]
    environment: dict[str, str] = field(default_factory=dict)
    network_mode: str = "host"

    @property
    def name(self) -> str:
        return f"{self.project}-{self.service}"

    def run_kwargs(self) -> dict[str, Any]:
        return {"image": self.image, "command": self.command, "environment": self.environment,
                "network_mode": self.network_mode, "name": self.name, "detach": True,
                "labels": {"com.docker.compose.project": self.project, "com.docker.compose.service": self.service,
                           "chaos.owner-pid": str(os.getpid())}}


def substitute(value: Any, variables: dict[str, str]) -> Any:
    """Compose-style ``${VAR}`` / ``${VAR:-default}`` substitution through nested lists and dicts."""
    if isinstance(value, str):
        def one(match: re.Match) -> str:
            name, default = match.group(1), match.group(2)
            if name in variables:
                return variables[name]
            if default is not None:
                return default
            raise ClusterError(f"{COMPOSE_FILE.name}: variable ${{{name}}} is not set; "
                               f"the compose backend sets {', '.join(sorted(PORT_VARIABLES.values()))}")
        return _VAR.sub(one, value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    return value


def render(project: str, ports: dict[str, int], path: Path = COMPOSE_FILE,
           overrides: dict[str, str] | None = None) -> list[ContainerSpec]:
    """The containers of one project: the compose file with its ports and image overrides filled in."""
    variables = {"CHAOS_PROJECT": project, **{PORT_VARIABLES[s]: str(p) for s, p in ports.items()}}
    variables.update({k: v for k, v in os.environ.items() if k.startswith("CHAOS_") and k.endswith("_IMAGE")})
    variables.update(overrides or {})
    if not path.is_file():
        raise ClusterError(f"compose file {path} not found: unset CHAOS_COMPOSE_FILE to use the packaged one, "
                           f"or point it at a compose file")
    try:
        import yaml
    except ModuleNotFoundError:
        raise ClusterError(f"the compose backend reads its compose file with PyYAML, which is not installed: "
                           f"run `{COMPOSE_EXTRA}`, or use the native backend") from None
    doc = yaml.safe_load(path.read_text())
    specs = []
    for service, body in doc["services"].items():
        body = substitute(body, variables)
        specs.append(ContainerSpec(service=service, project=project, image=body["image"],
                                   command=[str(c) for c in body.get("command", [])],
                                   environment={k: str(v) for k, v in (body.get("environment") or {}).items()},
                                   network_mode=body.get("network_mode", "host")))
    return specs


def docker_client():
    """A docker SDK client whose engine answers, or EngineUnreachable saying what to do."""
    try:
        import docker
    except ModuleNotFoundError:
        raise EngineUnreachable(f"the compose backend needs the docker SDK, which is not installed: "
                                f"run `{COMPOSE_EXTRA}`, or use the native backend (--backend native)") from None
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=10)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 - docker raises several unrelated types here
        raise EngineUnreachable(f"the compose backend needs a Docker engine, but none answers at {where} ({exc}); "
                                f"start Docker (or set DOCKER_HOST), or use the native backend (--backend native; pytest: --chaos-backend native)") from None


class ComposeCluster(Cluster):
    backend = "compose"

    def __init__(self, *args, client, containers: dict[str, Any], specs: dict[str, ContainerSpec],
                 cdir: ClusterDir, **kw):
        super().__init__(*args, **kw)
        self._client = client
        self._containers = containers
        self._specs = specs
        self._cdir = cdir

    @classmethod
    def start(cls, name: str, **_options) -> "ComposeCluster":
        client = docker_client()      # fail before anything is made
        project = f"chaos-{name}".lower()
        ports = {service: free_port() for service in PORT_VARIABLES}
        specs = {spec.service: spec for spec in render(project, ports)}
        cdir = new_cluster_dir(name)
        containers: dict[str, Any] = {}
        try:
            for spec in specs.values():
                _remove_stale(client, spec.name)
                containers[spec.service] = client.containers.run(**spec.run_kwargs())
            api = ToxiproxyClient(f"http://{HOST}:{ports['toxiproxy']}")
            _wait(lambda: api.version(), "toxiproxy", containers["toxiproxy"])
            nodes = tuple(RedisNode(i, Endpoint(HOST, ports[s]), f"{HOST}:{ports[s]}") for i, s in NODE_SERVICES.items())
            cluster = cls(name, cdir.path, api, nodes, Endpoint(HOST, ports["postgres"]), f"{HOST}:{ports['postgres']}",
                          client=client, containers=containers, specs=specs, cdir=cdir)
            for node in nodes:
                _wait(lambda n=node: cluster._node_alive(n), NODE_SERVICES[node.id], containers[NODE_SERVICES[node.id]])
            _wait(lambda: cluster._database.prepare() or True, "postgres", containers["postgres"])
            cluster._create_links()
        except BaseException:
            for container in containers.values():
                container.remove(force=True)
            cdir.remove()
            raise
        return cluster

    def _kill_node(self, node: RedisNode) -> None:
        self._containers[NODE_SERVICES[node.id]].kill()

    def _shutdown_node(self, node: RedisNode) -> None:
        self._containers[NODE_SERVICES[node.id]].stop(timeout=10)

    def restart_primary(self, *, appendonly: bool = False, appendfsync: str = "everysec", kill: bool = True) -> None:
        if appendonly:   # the container restarts with its compose command line, which has the AOF off
            raise ClusterError("restart_primary(appendonly=True) is not supported on the compose backend yet; "
                               "use the native backend")
        super().restart_primary(appendonly=False, appendfsync=appendfsync, kill=kill)

    def _start_node(self, node: RedisNode) -> None:
        container = self._containers[NODE_SERVICES[node.id]]
        container.start()
        _wait(lambda: self._node_alive(node), NODE_SERVICES[node.id], container)

    def _close_servers(self) -> None:
        for container in self._containers.values():
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass


def _remove_stale(client, name: str) -> None:
    import docker
    try:
        client.containers.get(name).remove(force=True)
    except docker.errors.NotFound:
        pass


def _wait(check, what: str, container, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        container.reload()
        if container.status == "exited":
            break
        time.sleep(0.05)
    logs = container.logs(tail=20).decode(errors="replace")
    raise ServerStartError(f"{what} container {container.name} not ready (status {container.status}); log tail:\n{logs}")


def main(argv: list[str] | None = None) -> int:
    """`python -m chaos.cluster.compose`: print the compose file the backend uses (to run it by hand)."""
    import argparse
    argparse.ArgumentParser(description=main.__doc__).parse_args(argv)
    print(COMPOSE_FILE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
