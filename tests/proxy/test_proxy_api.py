"""Conformance of the HTTP API with Toxiproxy 2.12 (status codes, bodies, headers), over raw HTTP."""
from __future__ import annotations

import json
import re
import socket

import pytest

from proxy_helpers import connect, free_port, recv_until_eof


def test_version_is_exact(api):
    status, headers, body = api.call("GET", "/version")
    assert status == 200
    assert body == b'{"version": "2.12.0"}\n'
    assert headers["content-type"] == "application/json;charset=utf-8"
    assert re.fullmatch(r"[0-9a-v]{20}", headers["x-toxiproxy-request-id"])


def test_create_reports_the_bound_listen_and_defaults(api, echo_upstream):
    status, _, body = api.call("POST", "/proxies", json.dumps(
        {"name": "a", "upstream": "%s:%d" % echo_upstream, "listen": "127.0.0.1:0", "unknown_field": 1}))
    assert status == 201
    proxy = json.loads(body)
    assert proxy["name"] == "a" and proxy["enabled"] is True and proxy["toxics"] == []
    host, port = proxy["listen"].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    assert api.json("GET", "/proxies") == {"a": proxy}
    assert api.json("GET", "/proxies/a") == proxy
    with connect(int(port)) as sock:
        sock.sendall(b"hi")
        assert sock.recv(10) == b"hi"


def test_errors_have_toxiproxys_status_text_and_headers(api, echo_upstream):
    upstream = "%s:%d" % echo_upstream
    api.json("POST", "/proxies", {"name": "a", "upstream": upstream})
    cases = [
        ("POST", "/proxies", {"name": "a", "upstream": upstream}, 409, "proxy already exists"),
        ("POST", "/proxies", {"upstream": upstream}, 400, "missing required field: name"),
        ("POST", "/proxies", {"name": "b"}, 400, "missing required field: upstream"),
        ("POST", "/proxies", "", 400, "bad request body: EOF"),
        ("POST", "/proxies", '{"name": "b"', 400, "bad request body: unexpected EOF"),
        ("POST", "/proxies", "x", 400, "bad request body: invalid character 'x' looking for beginning of value"),
        ("POST", "/proxies", {"name": 5, "upstream": upstream}, 400,
         "bad request body: json: cannot unmarshal number into Go struct field Proxy.name of type string"),
        ("GET", "/proxies/nope", None, 404, "proxy not found"),
        ("DELETE", "/proxies/nope", None, 404, "proxy not found"),
        ("POST", "/proxies/nope", {}, 404, "proxy not found"),
        ("GET", "/proxies/nope/toxics", None, 404, "proxy not found"),
        ("GET", "/proxies/a/toxics/nope", None, 404, "toxic not found"),
        ("DELETE", "/proxies/a/toxics/nope", None, 404, "toxic not found"),
    ]
    for method, path, body, want_status, want_error in cases:
        raw = body if isinstance(body, str) or body is None else json.dumps(body)
        status, headers, reply = api.call(method, path, raw)
        assert (status, reply) == (want_status, json.dumps(
            {"error": want_error, "status": want_status}, separators=(",", ":")).encode() + b"\n"), (method, path, body)
        assert headers["content-type"] == "text/plain; charset=utf-8"
        assert headers["x-content-type-options"] == "nosniff"


def test_router_answers_like_gorilla_mux(api):
    status, headers, body = api.call("GET", "/proxies/")
    assert (status, body) == (404, b"404 page not found\n") and "x-toxiproxy-request-id" not in headers
    status, headers, body = api.call("PUT", "/proxies")
    assert (status, body) == (405, b"") and "content-type" not in headers
    status, _, body = api.call("GET", "/proxies", headers={"User-Agent": "Mozilla/5.0"})
    assert (status, body) == (403, b"User agent not allowed\n")


def test_listen_in_use_is_500_and_the_server_keeps_serving(api, echo_upstream):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status, body = api.json_call("POST", "/proxies", {"name": "a", "upstream": "%s:%d" % echo_upstream,
                                                          "listen": f"127.0.0.1:{port}"})
        assert status == 500
        assert body == {"error": f"listen tcp 127.0.0.1:{port}: bind: address already in use", "status": 500}
    assert api.json_call("GET", "/proxies/a")[0] == 404   # not stored
    status, body = api.json_call("POST", "/proxies", {"name": "a", "upstream": "x:1", "listen": "127.0.0.1:notaport"})
    assert (status, body["error"]) == (500, "listen tcp: lookup tcp/notaport: unknown port")
    assert api.call("GET", "/version")[0] == 200


def test_disabled_at_creation_does_not_listen(api, echo_upstream):
    port = free_port()
    proxy = api.json("POST", "/proxies", {"name": "a", "upstream": "%s:%d" % echo_upstream,
                                          "listen": f"127.0.0.1:{port}", "enabled": False})
    assert proxy["enabled"] is False and proxy["listen"] == f"127.0.0.1:{port}"
    with pytest.raises(ConnectionRefusedError):
        connect(port)


def test_update_repoints_upstream_and_drops_open_connections(api, echo_upstream, redis_upstream, new_proxy):
    name, port = new_proxy(echo_upstream)
    with connect(port) as old:
        old.sendall(b"PING\r\n")
        assert old.recv(100) == b"PING\r\n"          # the echo server
        proxy = api.json("POST", f"/proxies/{name}", {"upstream": "%s:%d" % redis_upstream})
        assert proxy["upstream"] == "%s:%d" % redis_upstream and proxy["listen"] == f"127.0.0.1:{port}"
        assert recv_until_eof(old) == b""            # closed by the repoint
    with connect(port) as new:
        new.sendall(b"PING\r\n")
        assert new.recv(100) == b"+PONG\r\n"         # now redis, same address


def test_patch_disable_closes_connections_and_refuses_new_ones(api, echo_through):
    name, port = echo_through
    with connect(port) as sock:
        sock.sendall(b"x")
        assert sock.recv(1) == b"x"
        proxy = api.json("PATCH", f"/proxies/{name}", {"enabled": False})
        assert proxy["enabled"] is False
        assert recv_until_eof(sock) == b""
    with pytest.raises(ConnectionRefusedError):
        connect(port)
    assert api.json("POST", f"/proxies/{name}", {"enabled": True})["enabled"] is True
    with connect(port) as sock:
        sock.sendall(b"y")
        assert sock.recv(1) == b"y"


def test_update_to_a_listen_in_use_is_500_and_leaves_it_disabled(api, echo_through):
    name, _ = echo_through
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        listen = "127.0.0.1:%d" % busy.getsockname()[1]
        status, body = api.json_call("POST", f"/proxies/{name}", {"listen": listen})
    assert status == 500 and "address already in use" in body["error"]
    proxy = api.json("GET", f"/proxies/{name}")
    assert proxy["listen"] == listen and proxy["enabled"] is False


def test_delete_closes_the_listener(api, echo_through):
    name, port = echo_through
    status, headers, body = api.call("DELETE", f"/proxies/{name}")
    assert (status, body) == (204, b"")
    with pytest.raises(ConnectionRefusedError):
        connect(port)
    assert api.json_call("GET", f"/proxies/{name}")[0] == 404


def test_populate_creates_validates_first_and_replaces_changed(api, echo_upstream):
    upstream = "%s:%d" % echo_upstream
    status, body = api.json_call("POST", "/populate", [
        {"name": "a", "upstream": upstream, "listen": "127.0.0.1:0"},
        {"name": "b", "upstream": upstream, "listen": "127.0.0.1:0", "enabled": False},
    ])
    assert status == 201 and [p["name"] for p in body["proxies"]] == ["a", "b"]
    assert body["proxies"][1]["enabled"] is False
    assert api.json_call("POST", "/populate", []) == (201, {"proxies": None})
    status, body = api.json_call("POST", "/populate", [{"name": "c", "upstream": upstream}, {"name": "d"}])
    assert (status, body) == (400, {"error": "missing required field: upstream at proxy 2", "status": 400,
                                    "proxies": None})
    assert api.json_call("GET", "/proxies/c")[0] == 404
    status, headers, raw = api.call("POST", "/populate", "{}")
    assert status == 400 and headers["content-type"] == "application/json"
    assert json.loads(raw)["error"].startswith(
        "bad request body: json: cannot unmarshal object into Go value of type []struct")


def test_reset_enables_every_proxy_and_removes_every_toxic(api, echo_through):
    name, port = echo_through
    api.add_toxic(name, type="latency", attributes={"latency": 1000})
    api.json("POST", f"/proxies/{name}", {"enabled": False})
    status, _, body = api.call("POST", "/reset")
    assert (status, body) == (204, b"")
    proxy = api.json("GET", f"/proxies/{name}")
    assert proxy["enabled"] is True and proxy["toxics"] == []
    with connect(port) as sock:
        sock.sendall(b"z")
        assert sock.recv(1) == b"z"


def test_toxic_crud_defaults_order_and_errors(api, echo_through):
    name, _ = echo_through
    base = f"/proxies/{name}/toxics"
    status, toxic = api.json_call("POST", base, {"type": "latency"})
    assert status == 200
    assert toxic == {"attributes": {"latency": 0, "jitter": 0}, "name": "latency_downstream",
                     "type": "latency", "stream": "downstream", "toxicity": 1}
    up = api.json("POST", base, {"type": "bandwidth", "stream": "UPSTREAM", "toxicity": 0.5,
                                 "attributes": {"rate": 100, "bogus": 1}})
    assert up["name"] == "bandwidth_UPSTREAM" and up["stream"] == "UPSTREAM" and up["toxicity"] == 0.5
    assert up["attributes"] == {"rate": 100}
    assert [t["name"] for t in api.json("GET", base)] == ["bandwidth_UPSTREAM", "latency_downstream"]
    errors = [
        ({"type": "latency", "stream": "sideways"}, 400, "stream was invalid, can be either upstream or downstream"),
        ({"type": "nope"}, 400, "invalid toxic type"),
        ({}, 400, "invalid toxic type"),
        ({"type": "latency"}, 409, "toxic already exists"),
        ({"type": "latency", "name": "l2", "attributes": {"latency": "100"}}, 400,
         "bad request body: json: cannot unmarshal string into Go struct field "
         "LatencyToxic.attributes.latency of type int64"),
        ({"type": "latency", "name": "l2", "attributes": {"latency": 1.5}}, 400,
         "bad request body: json: cannot unmarshal number 1.5 into Go struct field "
         "LatencyToxic.attributes.latency of type int64"),
    ]
    for body, want_status, want_error in errors:
        assert api.json_call("POST", base, body) == (want_status, {"error": want_error, "status": want_status}), body
    updated = api.json("PATCH", f"{base}/latency_downstream", {"attributes": {"jitter": 5}, "name": "ignored"})
    assert updated["attributes"] == {"latency": 0, "jitter": 5} and updated["name"] == "latency_downstream"
    updated = api.json("POST", f"{base}/latency_downstream", {"toxicity": 0.25})
    assert updated["toxicity"] == 0.25 and updated["attributes"] == {"latency": 0, "jitter": 5}
    assert api.json("GET", f"{base}/latency_downstream") == updated
    assert [t["name"] for t in api.json("GET", f"/proxies/{name}")["toxics"]] == \
        ["bandwidth_UPSTREAM", "latency_downstream"]
    assert api.call("DELETE", f"{base}/latency_downstream")[:1] == (204,)
    assert api.json_call("GET", f"{base}/latency_downstream")[0] == 404
    for toxic_type in ("latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data", "noop"):
        assert api.json_call("POST", base, {"type": toxic_type, "name": f"t-{toxic_type}"})[0] == 200


def test_negative_attributes_are_accepted_as_go_does(api, echo_through):
    name, port = echo_through
    toxic = api.add_toxic(name, type="bandwidth", attributes={"rate": -5})
    assert toxic["attributes"] == {"rate": -5}
    with connect(port) as sock:                      # rate <= 0 means unlimited
        sock.sendall(b"a" * 100_000)
        got = b""
        while len(got) < 100_000:
            got += sock.recv(65536)
    assert len(got) == 100_000


def test_odd_names_and_huge_bodies_get_a_clear_4xx(api, echo_upstream, echo_through):
    upstream = "%s:%d" % echo_upstream
    _, echo_port = echo_through
    live = connect(echo_port)
    status, body = api.json_call("POST", "/proxies", {"name": "a/b c", "upstream": upstream})
    assert status == 400 and body["error"].startswith("invalid proxy name 'a/b c'")
    api.json("POST", "/proxies", {"name": "ok.name-1:x_y", "upstream": upstream})
    status, body = api.json_call("POST", "/proxies/ok.name-1:x_y/toxics", {"type": "noop", "name": "bad name"})
    assert status == 400 and body["error"].startswith("invalid toxic name")
    status, _, raw = api.call("POST", "/proxies", b"[" + b"1," * 600_000 + b"1]")
    assert status == 413 and b"at most 1048576 bytes" in raw
    assert api.call("GET", "/version")[0] == 200
    assert sorted(api.json("GET", "/proxies")) == ["echo", "ok.name-1:x_y"]
    with live:                                  # the other proxies kept serving throughout
        live.sendall(b"still here")
        assert live.recv(100) == b"still here"
