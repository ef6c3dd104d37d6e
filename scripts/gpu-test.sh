#!/usr/bin/env bash
# On an NVIDIA machine: builds nothing. Runs the end-to-end tests (CUDA ones
# included, and vkcuda bench at small sizes), one verified, validated
# headless run per scene × sync × buffers with the CUDA producer, the size
# matrix (scripts/size-matrix.sh), the format matrix (scripts/format-matrix.sh) and the
# fault matrix (scripts/fault-matrix.sh), the stall matrix (scripts/stall-matrix.sh), the hunt for
# timing-dependent hazards (3,000 validated frames of every configuration that
# can race: the host-signalling staging producer and 1 image, on every queue),
# and `vkcuda --validate bench` over every variant at 1080p and 4K, printing
# one summary line per run. Every run must report 0 validation messages.
#   VKCUDA_BIN  the vkcuda binary      (default target/release/vkcuda)
#   VKCUDA_E2E  the e2e test binary    (default: newest target/release/deps/e2e-*)
#   VKCUDA_MINIMAL  examples/minimal, the integrator example on the core alone
#                   (cargo build --release -p vkcuda --features cudarc/nvrtc --example minimal)
#   FRAMES      frames per run         (default 600)
#   VKCUDA_TIMELINE  tests/timeline.rs built (cargo test --release --no-run): layer 1.3.239's stale records
# The viewer's CUDA tests (e2e cuda_window_*, through the CPU-present path under
# Xvfb) need Xvfb, xdotool and xwd: carry .xkit (scripts/gpu-xkit.sh) and
# `source .xkit/env.sh` after .gl/env.sh; without them they say "skipped".
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VKCUDA_BIN:-target/release/vkcuda}
E2E=${VKCUDA_E2E:-$(ls -t target/release/deps/e2e-* 2>/dev/null | grep -v '\.d$' | head -n1)}
FRAMES=${FRAMES:-600}
export VKCUDA_BIN=$BIN VKCUDA_CACHE_DIR=${VKCUDA_CACHE_DIR:-/tmp/vkcuda-ptx}
fail=0
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ -n "$E2E" ] && [ -x "$E2E" ]; then
    "$E2E" cuda_ || fail=1   # the CUDA tests; the CPU-producer ones are CI's (lavapipe)
    "$E2E" bench_ || fail=1  # vkcuda bench: every variant runs here
    "$E2E" kernel || fail=1  # --kernel, check-kernel (NVRTC from the CUDA toolkit)
    "$E2E" golden || fail=1
else
    echo "gpu-test: no e2e test binary (cargo test --release --no-run builds it)"; fail=1
fi
[ -n "${VKCUDA_TIMELINE:-}" ] && { "$VKCUDA_TIMELINE" --include-ignored --nocapture 2>&1 | grep -E "skipped|validation|test result"; }
out=$(mktemp -d)
for scene in gradient julia; do
    for sync in split shared; do
        for buffers in 2 3; do
            log="$out/$scene-$sync-$buffers.log"
            "$BIN" --headless --producer cuda --validate --verify --frames "$FRAMES" --scene "$scene" \
                --sync "$sync" --buffers "$buffers" --out "$out/frames" >"$log" 2>&1
            rc=$?
            [ $rc -ne 0 ] && fail=1
            files=$(ls "$out/frames" | wc -l)
            rm -rf "$out/frames"
            printf '%-8s %-6s %s buffers: rc=%s %s | %s | %s | files=%s\n' "$scene" "$sync" "$buffers" "$rc" \
                "$(grep -o '[0-9.]* fps' "$log")" "$(grep -o '[0-9]* mismatches' "$log")" \
                "$(grep -o 'validation: .*' "$log")" "$files"
            [ $rc -ne 0 ] && tail -n 5 "$log"
        done
    done
done
echo "kernels: every shipped kernel (shaders/examples) against its golden dump (assets/goldens), validated"
for golden in assets/goldens/*/; do
    k=$(basename "$golden")
    format=rgba8
    ls "$golden" | grep -q '\.exr$' && format=rgba16f
    log="$out/kernel-$k.log"
    "$BIN" --headless --kernel "shaders/examples/$k.cu" --format $format --size 97x61 --frames 4 --validate \
        --compare-to "$golden" --out "$out/kernel-$k" >"$log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && fail=1
    printf 'kernel %-9s rc=%s | %s | %s\n' "$k" "$rc" "$(grep -o 'compare: .*' "$log")" "$(grep -o 'validation: .*' "$log")"
    [ $rc -ne 0 ] && tail -n 3 "$log"
done
echo "sizes: every size, copy and draw (odd targets), both schemes, every frame verified and decoded (scripts/size-matrix.sh)"
VKCUDA_BIN=$BIN bash scripts/size-matrix.sh | grep -v '^ok ' || fail=1
echo "draws: every format x layout, magnified and minified, julia, verified (scripts/draw-matrix.sh)"
VKCUDA_BIN=$BIN bash scripts/draw-matrix.sh | grep -v '^ok ' || fail=1
echo "faults: each fault at 6 frames (30 frames per configuration), 8 configurations, with signals (scripts/fault-matrix.sh)"
VKCUDA_BIN=$BIN PRODUCER=cuda FRAMES=6 SPREAD=1 JOBS=14 bash scripts/fault-matrix.sh || fail=1
echo "stalls: a stalled producer and a kernel that never ends, ended by SIGINT (6 each) and by timeout (2 each), 8 configurations (scripts/stall-matrix.sh)"
VKCUDA_BIN=$BIN PRODUCER=cuda JOBS=14 bash scripts/stall-matrix.sh || fail=1
echo "formats: every format x layout x sync x images x consumer, CUDA producer (scripts/format-matrix.sh)"
VKCUDA_BIN=$BIN PRODUCER=cuda JOBS=14 bash scripts/format-matrix.sh || fail=1
echo "hunt: 3000 validated frames (every 100th verified) per producer × sync × buffers × queue, 640x360"
for producer in staging cuda; do
    for sync in split shared; do
        for buffers in 1 2; do
            for queue in transfer compute graphics; do
                log="$out/hunt.log"
                "$BIN" --headless --producer "$producer" --sync "$sync" --buffers "$buffers" --queue "$queue" \
                    --size 640x360 --scene julia --frames 3000 --dump-every 100 --verify --validate \
                    --out "$out/hunt" >"$log" 2>&1
                rc=$?
                [ $rc -ne 0 ] && fail=1
                rm -rf "$out/hunt"
                printf 'hunt %-7s %-6s %s buffers %-8s: rc=%s | %s | %s\n' "$producer" "$sync" "$buffers" "$queue" \
                    "$rc" "$(grep -o '[0-9]* mismatches' "$log")" "$(grep -o 'validation: .*' "$log")"
                [ $rc -ne 0 ] && grep -m3 'validation error' "$log" | cut -c1-400
            done
        done
    done
done
echo "vkcuda --validate bench: every variant, 1080p and 4K (short repeats: this is for validation, not speed)"
for set in "split-1,split-2,split-3,split-6,shared-2,staging cheap,balanced" "cpu cheap"; do
    read -r variants loads <<<"$set"
    "$BIN" --validate bench --variants "$variants" --loads "$loads" --sizes 1920x1080,3840x2160 \
        --queues compute,transfer --repeats 1 --seconds 0.2 --warmup 0.1 >"$out/vbench.log" 2>&1 || fail=1
    printf 'validated bench (%s; %s): %s\n' "$variants" "$loads" "$(grep -o '^validation: .*' "$out/vbench.log")"
    grep -m3 'validation error' "$out/vbench.log" | cut -c1-400
done
echo "throughput (1920x1080, --dump-every 0): defaults (2 buffers, transfer queue), then 6 buffers on a compute queue:"
"$BIN" --headless --producer cuda --frames 5000 --dump-every 0 2>/dev/null | head -n 2
"$BIN" --headless --producer cuda --frames 5000 --dump-every 0 --buffers 6 --queue compute 2>/dev/null | head -n 2
echo "examples/minimal.rs (an integrator on the core alone; every frame checked against its CPU twin, --validate):"
for layout in array buffer; do
    "${VKCUDA_MINIMAL:-target/release/examples/minimal}" --validate --layout "$layout" 2>&1 |
        grep -v '^vkcuda: compiled' || fail=1
done
rm -rf "$out"
exit $fail
