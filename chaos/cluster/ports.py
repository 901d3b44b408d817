"""Free TCP ports on 127.0.0.1, picked by binding to port 0 (fixed bases collide here).

The port is released before the server binds it, so another program may take it
meanwhile: starters detect "address in use" in the server's log and retry (see PortInUse).
"""
from __future__ import annotations

import socket

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
