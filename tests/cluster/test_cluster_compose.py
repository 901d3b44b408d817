"""The compose backend without a Docker engine: rendering, command lines, and the clear error."""
from __future__ import annotations

import pytest

from chaos.cluster import EngineUnreachable, start_cluster
from chaos.cluster.compose import ClusterError, render, substitute

PORTS = {"redis-primary": 16390, "redis-replica": 16391, "postgres": 15440, "toxiproxy": 18474}


def specs():
    return {spec.service: spec for spec in render("chaos-abc-gw0", PORTS)}


def test_every_service_is_an_official_image_on_the_host_network():
    rendered = specs()
    assert set(rendered) == {"redis-primary", "redis-replica", "postgres", "toxiproxy"}
    assert rendered["redis-primary"].image.startswith("redis:")
    assert rendered["postgres"].image.startswith("postgres:")
    assert rendered["toxiproxy"].image.startswith("ghcr.io/shopify/toxiproxy:")
    assert all(spec.network_mode == "host" for spec in rendered.values())


def test_command_lines_bind_loopback_on_the_picked_ports():
    rendered = specs()
    primary = rendered["redis-primary"].command
    assert primary[:5] == ["redis-server", "--port", "16390", "--bind", "127.0.0.1"]
    assert primary[primary.index("--repl-diskless-sync-delay") + 1] == "0"
    assert rendered["redis-replica"].command[2] == "16391"
    assert "listen_addresses=127.0.0.1" in rendered["postgres"].command
    assert "port=15440" in rendered["postgres"].command
    assert rendered["postgres"].environment == {"POSTGRES_HOST_AUTH_METHOD": "trust", "POSTGRES_DB": "chaos"}
    assert rendered["toxiproxy"].command == ["-host", "127.0.0.1", "-port", "18474"]


def test_one_compose_project_per_worker_in_names_and_labels():
    run = specs()["redis-primary"].run_kwargs()
    assert run["name"] == "chaos-abc-gw0-redis-primary"
    assert run["labels"]["com.docker.compose.project"] == "chaos-abc-gw0"
    assert run["labels"]["com.docker.compose.service"] == "redis-primary"
    other = {s.service: s for s in render("chaos-abc-gw1", PORTS)}["redis-primary"].run_kwargs()
    assert other["name"] != run["name"]


def test_image_overrides_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("CHAOS_REDIS_IMAGE", "valkey/valkey:8")
    assert specs()["redis-replica"].image == "valkey/valkey:8"


def test_substitution_defaults_and_missing_variables():
    assert substitute(["${A:-x}", {"k": "${B}"}], {"B": "2"}) == ["x", {"k": "2"}]
    with pytest.raises(ClusterError, match=r"\$\{NOPE\} is not set"):
        substitute("${NOPE}", {})


def test_no_engine_says_so_and_suggests_native(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(EngineUnreachable, match=r"(?s)no.*answers at unix:///nonexistent/docker.sock.*--chaos-backend native"):
        start_cluster("compose", "compose-never")
