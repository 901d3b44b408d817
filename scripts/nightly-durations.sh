#!/usr/bin/env bash
# The nightly's one durations hand-out: every shard splits by the same file, or none does.
#
#   bash scripts/nightly-durations.sh STATE_DIR OUT_DIR
#
# STATE_DIR is the previous night's merged state/ (empty or absent on the first night or when
# it could not be found). OUT_DIR/durations.json gets its durations.json, else `{}` (every
# shard then splits by count, still all alike). Its sha256 goes to $GITHUB_OUTPUT as
# `sha256=...` when that is set, so each shard checks it split by this very file.
set -euo pipefail
state=${1:?give the previous state dir and the output dir: STATE_DIR OUT_DIR}
out=${2:?give the output dir: STATE_DIR OUT_DIR}
mkdir -p "$out"
if [ -s "$state/durations.json" ] && python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not (isinstance(d, dict) and all(isinstance(v, (int, float)) for v in d.values())))' "$state/durations.json" 2>/dev/null; then
  cp "$state/durations.json" "$out/durations.json"
  echo "durations: $(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$out/durations.json") tests from the previous night"
else
  echo '{}' > "$out/durations.json"
  echo "durations: none usable in $state; every shard splits by count"
fi
sum=$(sha256sum "$out/durations.json" | cut -d' ' -f1)
echo "durations: sha256 $sum"
if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "sha256=$sum" >> "$GITHUB_OUTPUT"; fi
