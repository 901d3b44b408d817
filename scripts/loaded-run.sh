#!/usr/bin/env bash
# The test suite beside CPU hogs, as shared CI runners see it (issue: "a suite that holds
# under load"). Starts N busy-looping processes, runs pytest, ends its hogs whatever happens
# (failure, Ctrl-C, kill), and prints the failures and errors at the end.
#
#   bash scripts/loaded-run.sh [--hogs N] [--log FILE] [-- PYTEST ARGS...]
#
# Defaults: 2 hogs, the README's whole-suite command's workers (`-n 4`), the log in
# reports/loaded-run.log. Exit status: pytest's; 254 for a bad option (nothing started).
# $LOADED_RUN_HOG replaces the hog's command (default: python3 busy-looping).
set -uo pipefail
cd "$(dirname "$0")/.."

hogs=2
log=reports/loaded-run.log
while [ $# -gt 0 ]; do
  case "$1" in
    --hogs) hogs=${2-}; shift; shift || true ;;
    --log) log=${2-}; shift; shift || true ;;
    --) shift; break ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
if ! [[ "$hogs" =~ ^[0-9]+$ ]] || [ "$hogs" -gt 64 ]; then
  echo "loaded-run: --hogs '$hogs' is not a whole number from 0 to 64; give e.g. --hogs 2" >&2
  exit 254
fi
if [ -z "$log" ] || ! mkdir -p "$(dirname "$log")" 2>/dev/null || ! : > "$log" 2>/dev/null; then
  echo "loaded-run: cannot write the log '$log'; give --log a file in a directory you can write" >&2
  exit 254
fi
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-n 4)

pids=()
stop_hogs() {
  [ ${#pids[@]} -gt 0 ] || return 0
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  pids=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT
trap 'stop_hogs; exit 143' TERM

for _ in $(seq 1 "$hogs"); do
  if [ -n "${LOADED_RUN_HOG:-}" ]; then
    bash -c "exec $LOADED_RUN_HOG" &      # another hog command (the script's own tests use `sleep`)
  else
    python3 -c 'while True: pass' &
  fi
  pids+=($!)
done
echo "loaded-run: $hogs CPU hog(s) (pids ${pids[*]:-none}) on $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
python3 -m pytest "${args[@]}" -rfE 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
echo "loaded-run: pytest exit $rc after $(( $(date +%s) - start )) s beside $hogs hog(s); load $(cut -d' ' -f1-3 /proc/loadavg)"
failures=$(grep -E '^(FAILED|ERROR) ' "$log" || true)
if [ -n "$failures" ]; then
  echo "loaded-run: $(printf '%s\n' "$failures" | wc -l) failure(s)/error(s):"
  printf '%s\n' "$failures"
else
  echo "loaded-run: no failures or errors"
fi
exit "$rc"
