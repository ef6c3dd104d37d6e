#!/usr/bin/env bash
# On the H100: where a PNG dump's time goes. Every frame dumped and verified
# (`--dump-every 1 --verify`), 3,000 frames at 1080p and 1,000 at 4K, each
# with `--json` into OUT_DIR; then RUNS validated dump runs at 1080p (600
# frames each: the readback buffers are lent to the workers and given back,
# so the pool's reuse races the GPU's copies unless the pattern is right).
#   VKCUDA_BIN  the vkcuda binary (default target/release/vkcuda)
#   OUT_DIR     where the JSON summaries go (default: a temporary folder)
#   RUNS        validated runs (default 6: a 1-in-6 hazard cannot hide)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VKCUDA_BIN:-target/release/vkcuda}
OUT_DIR=${OUT_DIR:-$(mktemp -d)}
RUNS=${RUNS:-6}
export VKCUDA_CACHE_DIR=${VKCUDA_CACHE_DIR:-/tmp/vkcuda-ptx}
mkdir -p "$OUT_DIR"
fail=0
for run in 1920x1080:3000 3840x2160:1000; do
    size=${run%%:*} frames=${run##*:}
    frames_dir=$(mktemp -d)
    "$BIN" --headless --frames "$frames" --dump-every 1 --verify --size "$size" --out "$frames_dir" \
        --json "$OUT_DIR/dump-$size.json" 2>&1 | grep -v '^vkcuda: Vulkan device' || fail=1
    echo "files: $(ls "$frames_dir" | wc -l)"
    rm -rf "$frames_dir"
done
for i in $(seq "$RUNS"); do
    frames_dir=$(mktemp -d)
    log=$("$BIN" --headless --frames 600 --dump-every 1 --verify --validate --out "$frames_dir" 2>&1)
    rc=$?
    [ $rc -ne 0 ] && fail=1
    fps=$(grep -o '[0-9.]* fps' <<<"$log" | head -1)
    ver=$(grep -o 'verify: .*mismatches' <<<"$log")
    val=$(grep -o 'validation: [0-9]* errors, [0-9]* warnings' <<<"$log" | tail -1)
    echo "validated dump run $i: exit $rc, $fps, $ver, $val, files $(ls "$frames_dir" | wc -l)"
    rm -rf "$frames_dir"
done
exit $fail
