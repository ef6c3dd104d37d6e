#!/usr/bin/env bash
# On the H100: each peer hand-over pattern (--handover cpu-gated, host-wait,
# binary), RUNS times, 600 frames at 1080p, every 10th frame verified
# against the CPU reference, under the validation layer; one line per run.
#   VKCUDA_BIN  the vkcuda binary (default target/release/vkcuda)
#   RUNS        runs per pattern (default 6: a 1-in-6 hazard cannot hide)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VKCUDA_BIN:-target/release/vkcuda}
RUNS=${RUNS:-6}
export VKCUDA_CACHE_DIR=${VKCUDA_CACHE_DIR:-/tmp/vkcuda-ptx}
for h in cpu-gated host-wait binary; do
    for i in $(seq "$RUNS"); do
        out=$(mktemp -d)
        log=$("$BIN" --headless --handover "$h" --frames 600 --dump-every 10 --verify --validate --out "$out" 2>&1)
        rc=$?
        fps=$(grep -o '[0-9.]* fps' <<<"$log" | head -1)
        ver=$(grep -o 'verify: .*mismatches' <<<"$log")
        val=$(grep -o 'validation: [0-9]* errors, [0-9]* warnings' <<<"$log" | tail -1)
        vuids=$(grep -o 'VUID-[A-Za-z0-9_-]*' <<<"$log" | sort | uniq -c | tr '\n' ' ')
        echo "$h run $i: exit $rc, $fps, $ver, $val ${vuids:+[$vuids]}"
        rm -rf "$out"
    done
done
