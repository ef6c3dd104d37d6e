#!/usr/bin/env bash
# On the H100: where the hand-over's time goes, and what cuts it (issue 15).
# One `vkcuda bench` per setting at 1080p, cheap load (the kernel is ~9 µs,
# so what is left is the hand-over), 1 and 2 images, on the compute, transfer
# and graphics queues. Tables go to stdout; JSON to $OUT_DIR.
#   VKCUDA_BIN  the vkcuda binary (default target/release/vkcuda)
#   OUT_DIR     where the JSON goes (default docs/results/handover)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VKCUDA_BIN:-target/release/vkcuda}
OUT_DIR=${OUT_DIR:-docs/results/handover}
mkdir -p "$OUT_DIR"
export VKCUDA_CACHE_DIR=${VKCUDA_CACHE_DIR:-/tmp/vkcuda-ptx}
common=(bench --sizes 1920x1080 --loads cheap --variants split-1,split-2,split-3 --queues compute,transfer,graphics --repeats 3 --seconds 0.3)
run() {  # name, then env/flags before `bench`
    local name=$1; shift
    echo "== $name"
    env "$@" "${common[@]}" --json "$OUT_DIR/$name.json" | grep -E "^(compute|transfer|graphics) " || echo "(failed)"
}
run baseline "$BIN"
run max-connections-1 CUDA_DEVICE_MAX_CONNECTIONS=1 "$BIN"
run high-priority-stream "$BIN" --high-priority-stream
run sched-blocking "$BIN" --cuda-sched blocking
run sched-yield "$BIN" --cuda-sched yield
run host-waits "$BIN" --host-waits
run host-waits-blocking "$BIN" --host-waits --cuda-sched blocking
