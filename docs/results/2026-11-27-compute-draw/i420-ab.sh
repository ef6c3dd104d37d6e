#!/usr/bin/env bash
# The watchers' I420 draw with its 16-pixel loop unrolled (vkcuda-unrolled, 20b3732) and
# not (vkcuda, b28305f), in one call: a served CUDA run (julia 1920x1080) watched by one
# link_bench client on loopback (JPEG: I420 full range at the canvas size), 60 frames/s
# asked, 5 s; the consumer's Vulkan GPU time per frame (the copy and the watchers' draw),
# median, from vkcuda's --json. Then, under both layers, crates/run/tests/watch.rs (I420
# in every format against the CPU reference) and e2e serve.
#   bash docs/results/2026-11-27-compute-draw/i420-ab.sh   (carry .gl and .gpu/draw)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/i420; mkdir -p "$R"
D=.gpu/draw
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R/device.txt"
source .gl/env.sh >/dev/null
unset VK_LAYER_PATH
for rep in 1 2 3; do
    for canvas in 1920x1080 1280x720; do
        for run in unrolled:vkcuda-unrolled loop:vkcuda; do
            IFS=: read -r name bin <<<"$run"
            rm -f /tmp/link-bench-*.json
            row=$(timeout 60 "$D/link_bench" "new:$D/$bin" loopback "$canvas" 1 5 2>/dev/null)
            gpu=$(python3 -c 'import glob,json; print(json.load(open(glob.glob("/tmp/link-bench-*.json")[0]))["median_us"]["vulkan"])' 2>&1)
            fps=$(echo "$row" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["fps_per_client"], json.loads(r["last_status"])["client"]["codec"])' 2>&1)
            echo "$name $canvas rep$rep: vulkan_us $gpu, client fps/codec $fps" | tee -a "$R/timing.txt"
        done
    done
done
for layer in new old; do
    if [ $layer = old ]; then export VKCUDA_OLD_LAYER=1; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH; fi
    echo "== layer $layer" | tee -a "$R/correctness.txt"
    timeout 300 "$D/watch" 2>&1 | grep -E "^test |test result" | tee -a "$R/correctness.txt"
    VKCUDA_BIN=$D/vkcuda timeout 300 "$D/e2e" serve 2>&1 | grep -E "^test |^e2e:" | tee -a "$R/correctness.txt"
done
