"""The embedded Toxiproxy-compatible fault proxy: HTTP API (server.py, api.py), TCP relay
(relay.py) and one module per toxic (toxics/). Run it with `python -m chaos proxy serve`."""
