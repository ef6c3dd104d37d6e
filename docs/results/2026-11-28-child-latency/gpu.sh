#!/usr/bin/env bash
# Issue 52, item 3: the producer in a child process beside it in the run's process, in
# one call each (no validation layer for timings):
#   headless: julia and a user kernel at 1920x1080, copied and drawn, 3000 frames
#     (the rows of docs/results/2026-11-27-child), 3 repeats, interleaved;
#   served: `--serve` watched by link_bench on loopback (julia 1080p, one client at
#     60 frames/s and one as fast as it decodes), 3 repeats, interleaved;
#   viewer: `--kernel` in a window (CPU-present path under Xvfb; paced to the screen,
#     the default with --kernel): fps and save-to-screen over 10 saves, 2 repeats; the
#     builds in VIEWERS (BUILD:PROCESS, BUILD a file in .gpu/lat or "new" for
#     .gpu/child/vkcuda), interleaved;
#   correct: layers 1.4.309 and 1.3.239: e2e hot reload in the viewer (the producer in a
#     child and in the viewer's process), then the served recovery loop, 10 faults and
#     fixes under --validate (docs/results/2026-11-27-child/gpu.sh validated), then the
#     viewer's fault written over its last frame (faults last).
# Carry .gl, .xkit, .gpu/lat (vkcuda-base, link_bench, e2e) and .gpu/child/vkcuda.
#   bash docs/results/2026-11-28-child-latency/gpu.sh [headless] [served] [viewer] [correct]
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/lat; mkdir -p "$R"
D=$PWD/.gpu/lat
NEW=$PWD/.gpu/child/vkcuda
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R/device.txt"
source .gl/env.sh >/dev/null
source .xkit/env.sh >/dev/null
unset VK_LAYER_PATH
parts=${*:-headless served viewer}
bin() { [ "$1" = new ] && echo "$NEW" || echo "$D/$1"; }
want() { [[ " $parts " == *" $1 "* ]]; }
summary() { grep -E "frames, .* fps|median per frame|CPU time per frame|error" | tr '\n' ' '; echo; }
kernel() { # R, G, B of a pattern in x and y (checkable), or a colour
    printf '#include "vkcuda.h"\nextern "C" __global__ void render(vk_frame f)\n{\n    VK_PIXEL(f, x, y);\n    vk_put8(f.target, x, y, make_uchar4(%s, 255));\n}\n' "$1"
}
kernel "(x * 7) & 255, (y * 13) & 255, (x + y) & 255" >/tmp/good.cu

want headless && for rep in 1 2 3; do
    for what in "julia:--scene julia" "kernel:--kernel /tmp/good.cu"; do
        IFS=: read -r name source <<<"$what"
        for consume in "copy" "draw --target-size 1920x1080"; do
            for p in same child; do
                printf '%s %s %s rep%s: ' "$p" "$name" "${consume%% *}" "$rep" | tee -a "$R/headless.txt"
                # shellcheck disable=SC2086
                timeout 120 "$NEW" --headless --producer cuda $source --size 1920x1080 --consume $consume \
                    --frames 3000 --dump-every 0 --producer-process $p 2>&1 | summary | tee -a "$R/headless.txt"
            done
        done
    done
done

if want served; then
    for p in same child; do
        printf '#!/bin/sh\nexec %s "$@" --producer-process %s\n' "$NEW" $p >"/tmp/vkcuda-$p"
        chmod +x "/tmp/vkcuda-$p"
    done
    for rep in 1 2 3; do for rate in 60 0; do for p in same child; do
        timeout 70 "$D/link_bench" "new:/tmp/vkcuda-$p" loopback 1920x1080 1 5 --rate $rate 2>>"$R/errors.txt" |
            sed "s/^{/{\"process\":\"$p\",\"round\":$rep,/" | tee -a "$R/served.jsonl"
    done; done; done
fi

if want viewer; then
    Xvfb :7 -screen 0 1024x768x24 -nolisten tcp >/dev/null 2>&1 &
    X=$!
    export DISPLAY=:7
    for i in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
    k=/tmp/hot/k.cu; mkdir -p /tmp/hot
    for rep in 1 2; do for v in ${VIEWERS:-new:same new:child}; do
        IFS=: read -r b p <<<"$v"
        echo "=== viewer $b --kernel k.cu --size 1920x1080 --producer-process $p rep$rep" | tee -a "$R/viewer.txt"
        kernel "200, 0, 0" >$k
        timeout 90 "$(bin "$b")" --kernel $k --size 1920x1080 --producer-process $p >/tmp/hot.log 2>&1 &
        V=$!
        for i in $(seq 300); do grep -q "renders from\|for sm_" /tmp/hot.log && break; sleep 0.1; done
        sleep 3
        for c in "0, 200, 0" "0, 0, 200" "200, 200, 0" "0, 200, 200" "200, 0, 200" "90, 90, 90" "10, 90, 10" "90, 10, 90" "20, 20, 20" "60, 0, 0"; do
            kernel "$c" >$k; sleep 1.5
        done
        kill -INT $V; wait $V; echo "viewer rc=$?" | tee -a "$R/viewer.txt"
        grep -E "on screen|renders from|fps|paced|ahead|error" /tmp/hot.log | cut -c1-300 | tee -a "$R/viewer.txt"
    done; done
    kill $X
fi

e2e_layers() { # FILTER WHAT: the e2e tests FILTER under layers 1.4.309 and 1.3.239
    for l in new old; do (
        [ $l = old ] && export VKCUDA_OLD_LAYER=1
        source .gl/env.sh >/dev/null; unset VK_LAYER_PATH
        echo "== layer $l: e2e $2" | tee -a "$R/correct.txt"
        VKCUDA_BIN=$NEW timeout 300 "$D/e2e" "$1" 2>&1 | grep -E "^test |^e2e:" | tee -a "$R/correct.txt")
    done
}
if want correct; then
    e2e_layers cuda_window_kernel_hot_reload "hot reload in the viewer"
    # That script runs .gpu/child/vkcuda: this build (its results in $OUT/child).
    timeout 300 bash docs/results/2026-11-27-child/gpu.sh validated 2>&1 | tail -12
    e2e_layers cuda_window_fault_is_written "the viewer's fault over its last frame"
fi
