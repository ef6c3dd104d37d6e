#!/usr/bin/env bash
# Issue 52, first step, on the GPU machine (one call; carry .gl, .xkit and .gpu/draw):
#   1. timing, no layer: the compute draw (`--consume draw`, its default compute queue,
#      and on the graphics queue) beside the graphics draw of the commit before
#      (vkcuda-graphics), CUDA producer, 1920x1080 frames into 1920x1080 and 1280x720,
#      array and buffer layouts, runs interleaved, 3 repeats;
#   2. correctness under layers 1.4.309 and 1.3.239: the draw matrix with the CUDA
#      producer (every format × layout, magnified, minified, letterboxed, verified,
#      validated), e2e `cpu_present` (the viewer's CPU-present path under Xvfb,
#      against the CPU reference), and with `.gpu/draw/watch` the watchers' draw
#      (crates/run/tests/watch.rs) and e2e `serve` (the browser view's frames);
#   3. last (a CUDA illegal-address fault leaves the GPU's graphics pipelines hanging
#      until the machine goes back): a user kernel that faults, then in later processes
#      the compute draw (CPU and CUDA producers, validated), the viewer's CPU-present
#      window, a kernel that never ends (the held-up message reads the kernel log), and
#      the graphics draw of the commit before (bounded by `timeout`).
#   bash docs/results/2026-11-27-compute-draw/gpu.sh [timing] [ab] [correctness] [fault]   (default: timing
#   correctness fault; ab needs .gpu/draw/vkcuda-9e85d6b)
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/draw; mkdir -p "$R"
D=.gpu/draw
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R/device.txt"
source .gl/env.sh >/dev/null
source .xkit/env.sh >/dev/null
unset VK_LAYER_PATH
parts=${*:-timing correctness fault}
want() { [[ " $parts " == *" $1 "* ]]; }
summary() { grep -E "frames, .* fps|median per frame|mismatches|validation:|error" | tr '\n' ' '; echo; }

want timing && echo "== 1. timing (no layer)" | tee -a "$R/timing.txt"
want timing && for rep in 1 2 3; do
    for layout in array buffer; do
        for target in 1920x1080 1280x720; do
            for run in graphics:vkcuda-graphics:graphics compute:vkcuda:compute compute-on-graphics:vkcuda:graphics; do
                IFS=: read -r name bin queue <<<"$run"
                printf '%s %s %s rep%s: ' "$name" "$layout" "$target" "$rep" | tee -a "$R/timing.txt"
                timeout 120 "$D/$bin" --headless --producer cuda --scene julia --size 1920x1080 --layout "$layout" \
                    --consume draw --queue "$queue" --target-size "$target" --frames 3000 --dump-every 0 2>&1 |
                    summary | tee -a "$R/timing.txt"
            done
        done
    done
done

# ab: the compute draw of this commit beside the one of 9e85d6b (vkcuda-9e85d6b), no layer.
want ab && echo "== timing: 9e85d6b beside this commit (no layer)" | tee -a "$R/timing.txt"
want ab && for rep in 1 2 3; do
    for layout in array buffer; do
        for target in 1920x1080 1280x720; do
            for run in 9e85d6b:vkcuda-9e85d6b this:vkcuda; do
                IFS=: read -r name bin <<<"$run"
                printf '%s %s %s rep%s: ' "$name" "$layout" "$target" "$rep" | tee -a "$R/timing.txt"
                timeout 120 "$D/$bin" --headless --producer cuda --scene julia --size 1920x1080 --layout "$layout" \
                    --consume draw --target-size "$target" --frames 3000 --dump-every 0 2>&1 | summary | tee -a "$R/timing.txt"
            done
        done
    done
done

want correctness && for layer in new old; do
    if [ $layer = old ]; then export VKCUDA_OLD_LAYER=1; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH; fi
    echo "== 2. correctness, layer $layer" | tee -a "$R/correctness.txt"
    VKCUDA_BIN=$D/vkcuda PRODUCER=cuda JOBS=16 timeout 300 bash scripts/draw-matrix.sh 2>&1 | grep -v '^ok ' | tee -a "$R/correctness.txt"
    VKCUDA_BIN=$D/vkcuda timeout 300 "$D/e2e" cpu_present 2>&1 | grep -E "^test |^e2e:|vs reference" | tee -a "$R/correctness.txt"
    if [ -x "$D/watch" ]; then
        timeout 300 "$D/watch" 2>&1 | grep -E "^test |test result" | tee -a "$R/correctness.txt"
        VKCUDA_BIN=$D/vkcuda timeout 300 "$D/e2e" serve 2>&1 | grep -E "^test |^e2e:" | tee -a "$R/correctness.txt"
    fi
done
unset VKCUDA_OLD_LAYER; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH

want fault || exit 0
echo "== 3. a kernel that faults, then later processes" | tee -a "$R/fault.txt"
cat >/tmp/bad.cu <<'CU'
#include "vkcuda.h"
// Stores through an address no allocation holds: an illegal address.
extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    if (x == 0 && y == 0) *(volatile int *)(size_t)(16 + f.width) = 1;
    vk_put8(f.target, x, y, make_uchar4(x, y, 0, 255));
}
CU
step() { # NAME SECONDS COMMAND...
    local name=$1 secs=$2; shift 2
    local t0=$(date +%s%N)
    timeout -s KILL "$secs" "$@" >/tmp/step.log 2>&1
    local rc=$?
    { echo "== $name"; tail -8 /tmp/step.log; } >>"$R/fault-logs.txt"
    printf '%-40s rc=%-3s %6s ms | %s\n' "$name" "$rc" "$((($(date +%s%N) - t0) / 1000000))" \
        "$(grep -E "fps|mismatches|validation:|error|held up|lost|kernel log" /tmp/step.log | head -5 | tr '\n' ' ' | cut -c1-700)" |
        tee -a "$R/fault.txt"
}
step fault-kernel 60 "$D/vkcuda" --headless --producer cuda --kernel /tmp/bad.cu --frames 10 --dump-every 0
dmesg 2>/dev/null | grep -i xid | tail -3 | tee -a "$R/fault.txt"
step after-compute-draw-cpu 60 "$D/vkcuda" --headless --producer cpu --consume draw --target-size 200x150 --frames 60 --verify --out /tmp/f1
step after-compute-draw-cuda 60 "$D/vkcuda" --headless --producer cuda --consume draw --target-size 200x150 --frames 60 --verify --out /tmp/f2
step after-compute-draw-cpu-validated 90 "$D/vkcuda" --headless --producer cpu --consume draw --target-size 201x149 --frames 30 --verify --validate --out /tmp/f3
step after-compute-draw-cuda-buffer-old-layer 90 env VKCUDA_OLD_LAYER=1 bash -c "source .gl/env.sh >/dev/null; unset VK_LAYER_PATH; exec $D/vkcuda --headless --producer cuda --layout buffer --format rgba16f --consume draw --target-size 333x211 --frames 30 --verify --validate --out /tmp/f4"
Xvfb :77 -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 & xpid=$!
for _ in $(seq 50); do [ -S /tmp/.X11-unix/X77 ] && break; sleep 0.1; done
step after-window-cpu-present 60 env DISPLAY=:77 "$D/vkcuda" --producer cpu --frames 120
step after-window-cpu-present-cuda 60 env DISPLAY=:77 "$D/vkcuda" --producer cuda --frames 120
kill $xpid 2>/dev/null
step after-endless-kernel 60 "$D/vkcuda" --headless --producer cuda --kernel tests/kernels/endless.cu --frames 10 --dump-every 0
[ -x "$D/vkcuda-graphics" ] && step after-graphics-draw-before 40 "$D/vkcuda-graphics" --headless --producer cpu --consume draw --queue graphics --target-size 200x150 --frames 60 --out /tmp/f5
dmesg 2>/dev/null | grep -i xid | tail -3 | tee -a "$R/fault.txt"
