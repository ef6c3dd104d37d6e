#!/usr/bin/env bash
# On an NVIDIA machine (builds nothing; see gpu-test.sh for VKCUDA_BIN/VKCUDA_E2E):
# the reliability checks that need CUDA. A kernel fault (exit 1 naming the CUDA
# error, no hang), NVRTC missing, SIGTERM, a 100,000-frame validated soak with
# memory readings, timelines from near 2^63, and compute-sanitizer's memcheck,
# racecheck and synccheck on the CUDA path.
#   SOAK_FRAMES  frames of the soak (default 100000)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VKCUDA_BIN:-target/release/vkcuda}
E2E=${VKCUDA_E2E:-$(ls -t target/release/deps/e2e-* 2>/dev/null | grep -v '\.d$' | head -n1)}
export VKCUDA_BIN=$BIN VKCUDA_CACHE_DIR=${VKCUDA_CACHE_DIR:-/tmp/vkcuda-ptx}
fail=0
out=$(mktemp -d)
echo "== e2e: fault, NVRTC, SIGTERM, SIGINT"
for t in cuda_kernel_fault cuda_without_nvrtc sigterm sigint; do
    "$E2E" "$t" | grep -E '^(test|  )' || fail=1
done
echo "== soak: ${SOAK_FRAMES:-100000} frames, --validate --verify, a PNG every 1000"
"$BIN" --headless --frames "${SOAK_FRAMES:-100000}" --dump-every 1000 --verify --validate --out "$out/soak" \
    2>"$out/soak.err" || { fail=1; tail -n 5 "$out/soak.err"; }
echo "== timelines from 9223372036854775000 (split and shared)"
for sync in split shared; do
    "$BIN" --headless --frames 3000 --timeline-base 9223372036854775000 --sync "$sync" --buffers 3 \
        --dump-every 100 --verify --validate --out "$out/t63-$sync" 2>/dev/null | grep -E 'frames,|verify|validation' \
        || fail=1
done
echo "== compute-sanitizer"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
    printf -- '-- %s: ' "$tool"
    "$CS" --tool "$tool" --error-exitcode 9 "$BIN" --headless --frames 40 --size 640x360 --dump-every 10 \
        --verify --out "$out/cs-$tool" >"$out/cs.txt" 2>&1 || fail=1
    grep -E 'SUMMARY' "$out/cs.txt" | sed 's/=* *//'
    grep -E 'verify:' "$out/cs.txt"
done
rm -rf "$out"
exit $fail
