#!/usr/bin/env bash
# Issue 52, item 3, on the GPU machine (one call; carry .gl, .xkit and .gpu/child):
#   1. timing, no layer: the CUDA producer in this process (vkcuda-prev: the commit
#      before the child; vkcuda: this commit) beside it in a child process, julia and a
#      user kernel at 1920x1080, copy and draw consumers, 3000 frames, interleaved, 3 repeats;
#   2. correctness under layers 1.4.309 and 1.3.239, the producer in a child: julia at
#      odd sizes, array and buffer, copied and drawn, every frame verified, validated;
#      every shipped kernel against its golden; an injected fault (cuda-fault) and a
#      killed child end the run with exit 1 and the cause;
#   3. last: the recovery loop: a served run (--serve, --kernel) whose kernel file is
#      saved 100 times with a fault (illegal address, misaligned address, __trap in
#      turn) and then fixed; each fault must end in the page's message and each fix
#      in "the fix runs"; the session's resident memory, descriptors and the GPU's used
#      memory sampled; every frame it dumped compared with the good kernel's pattern;
#      then the viewer (CPU-present window) through 3 faults and fixes, a kernel that
#      never ends, and in later processes the compute draw and a CUDA child, verified.
#   validated (not by default): the served recovery loop under each layer, 10 faults each;
#   after (not by default): 10 faults, then the browser view's and the Python module's tests.
#   bash docs/results/2026-11-27-child/gpu.sh [timing] [correctness] [validated] [after] [recovery]
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/child; mkdir -p "$R"
D=.gpu/child
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$R/device.txt"
source .gl/env.sh >/dev/null
source .xkit/env.sh >/dev/null
unset VK_LAYER_PATH
parts=${*:-timing correctness recovery}
want() { [[ " $parts " == *" $1 "* ]]; }
# A 50 ms pause without sleep(1) (fractions may not parse there): a read that times out.
exec 9<> <(:)
nap() { read -rt 0.05 -u 9 _ || true; }
summary() { grep -E "frames, .* fps|median per frame|mismatches|compare:|validation:|error" | tr '\n' ' '; echo; }

# A kernel whose pixels depend on x and y only: every frame of it is checkable.
good() { cat <<CU
#include "vkcuda.h"
// save $1
extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    vk_put8(f.target, x, y, make_uchar4((x * 7) & 255, (y * 13) & 255, (x + y) & 255, 255));
}
CU
}
bad() { # KIND SAVE
    local body
    case $1 in
        address) body='if (x == 0 && y == 0) *(volatile int *)(size_t)(16 + f.width) = 1;' ;;
        misaligned) body='__shared__ int s[4]; if (x == 0 && y == 0) { *(volatile int *)((char *)s + 1) = 1; }' ;;
        trap) body='if (x == 1 && y == 1) __trap();' ;;
    esac
    cat <<CU
#include "vkcuda.h"
// save $2 ($1)
extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    $body
    vk_put8(f.target, x, y, make_uchar4((x * 7) & 255, (y * 13) & 255, (x + y) & 255, 255));
}
CU
}
good 0 >/tmp/good.cu

want timing && echo "== 1. timing (no layer): in this process (prev, this) and in a child" | tee -a "$R/timing.txt"
want timing && for rep in 1 2 3; do
    for what in "julia:--scene julia" "kernel:--kernel /tmp/good.cu"; do
        IFS=: read -r name source <<<"$what"
        for consume in "copy" "draw --target-size 1920x1080"; do
            for run in prev-same:vkcuda-prev: this-same:vkcuda:same this-child:vkcuda:child; do
                IFS=: read -r label bin process <<<"$run"
                flag=(); [ -n "$process" ] && flag=(--producer-process "$process")
                printf '%s %s %s rep%s: ' "$label" "$name" "${consume%% *}" "$rep" | tee -a "$R/timing.txt"
                # shellcheck disable=SC2086
                timeout 120 "$D/$bin" --headless --producer cuda $source --size 1920x1080 --consume $consume \
                    --frames 3000 --dump-every 0 "${flag[@]}" 2>&1 | summary | tee -a "$R/timing.txt"
            done
        done
    done
done

want correctness && for layer in new old; do
    if [ $layer = old ]; then export VKCUDA_OLD_LAYER=1; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH; fi
    echo "== 2. correctness, layer $layer, the producer in a child" | tee -a "$R/correctness.txt"
    for layout in array buffer; do
        for consume in "copy" "draw --target-size 401x233"; do
            printf 'julia %s %s: ' "$layout" "$consume" | tee -a "$R/correctness.txt"
            # shellcheck disable=SC2086
            timeout 120 "$D/vkcuda" --headless --producer cuda --producer-process child --scene julia --size 333x211 \
                --layout $layout --consume $consume --frames 60 --verify --validate --out /tmp/c-$layout 2>&1 |
                summary | tee -a "$R/correctness.txt"
            rm -rf /tmp/c-$layout
        done
    done
    for golden in assets/goldens/*/; do
        k=$(basename "$golden"); format=rgba8
        ls "$golden" | grep -q '\.exr$' && format=rgba16f
        printf 'kernel %s: ' "$k" | tee -a "$R/correctness.txt"
        timeout 120 "$D/vkcuda" --headless --producer-process child --kernel "shaders/examples/$k.cu" --format $format \
            --size 97x61 --frames 4 --validate --compare-to "$golden" --out /tmp/k-$k 2>&1 | summary | tee -a "$R/correctness.txt"
        rm -rf /tmp/k-$k
    done
    for inject in cuda-fault@20 child-kill@20 producer-panic@20; do
        printf 'inject %s: ' "$inject" | tee -a "$R/correctness.txt"
        timeout 120 "$D/vkcuda" --headless --producer cuda --producer-process child --size 320x180 --frames 200 \
            --dump-every 0 --validate --inject "$inject" >/tmp/inj.log 2>&1
        echo "rc=$? $(grep -E 'error' /tmp/inj.log | tr '\n' ' ' | cut -c1-400)" | tee -a "$R/correctness.txt"
    done
done
unset VKCUDA_OLD_LAYER; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH

# validated: the served recovery loop under each layer (10 faults each), then SIGINT: the summary's counts.
want validated && for layer in new old; do
    if [ $layer = old ]; then export VKCUDA_OLD_LAYER=1; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH; fi
    echo "== recovery under layer $layer (--validate): 10 faults and fixes" | tee -a "$R/validated.txt"
    good 0 >/tmp/live.cu
    "$D/vkcuda" --headless --serve 0 --kernel /tmp/live.cu --size 321x179 --validate >/tmp/v.log 2>&1 & pid=$!
    vc() { grep -c "$1" /tmp/v.log; }
    t=0; while [ "$(vc 'watch it at')" -lt 1 ] && [ $t -lt 1200 ]; do nap; t=$((t + 1)); done
    kinds=(address misaligned trap)
    for i in $(seq 1 10); do
        bad "${kinds[$((i % 3))]}" "$i" >/tmp/live.cu.new && mv /tmp/live.cu.new /tmp/live.cu
        t=0; while [ "$(vc 'the page shows the last frame')" -lt $i ] && [ $t -lt 600 ]; do nap; t=$((t + 1)); done
        good "$i" >/tmp/live.cu.new && mv /tmp/live.cu.new /tmp/live.cu
        t=0; while [ "$(vc 'the fix runs')" -lt $i ] && [ $t -lt 600 ]; do nap; t=$((t + 1)); done
    done
    sleep 1; kill -INT $pid; wait $pid; rc=$?
    echo "faults said $(vc 'the page shows the last frame'), fixes run $(vc 'the fix runs'), rc=$rc" | tee -a "$R/validated.txt"
    grep -m2 "failed at frame" /tmp/v.log | cut -c1-300 | tee -a "$R/validated.txt"
    grep -E "validation|VUID" /tmp/v.log | sort | uniq -c | head -8 | tee -a "$R/validated.txt"
done
unset VKCUDA_OLD_LAYER; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH

# after: 10 faults of a served run, then in later processes the browser view with clients (e2e
# serve_*, the CUDA producer in process and in a child) and the Python module (test_serve.py,
# test_headless.py: torch, CuPy, JAX frames), under both layers. Carry .gpu/child/e2e and
# .gpu/child/wheels.
want after && {
    echo "== after: 10 faults of a served run" | tee -a "$R/after.txt"
    good 0 >/tmp/live.cu
    "$D/vkcuda" --headless --serve 0 --kernel /tmp/live.cu --size 320x180 >/tmp/a.log 2>&1 & pid=$!
    ac() { grep -c "$1" /tmp/a.log; }
    t=0; while [ "$(ac 'watch it at')" -lt 1 ] && [ $t -lt 1200 ]; do nap; t=$((t + 1)); done
    for i in $(seq 1 10); do
        bad address "$i" >/tmp/live.cu.new && mv /tmp/live.cu.new /tmp/live.cu
        t=0; while [ "$(ac 'the page shows the last frame')" -lt $i ] && [ $t -lt 600 ]; do nap; t=$((t + 1)); done
        good "$i" >/tmp/live.cu.new && mv /tmp/live.cu.new /tmp/live.cu
        t=0; while [ "$(ac 'the fix runs')" -lt $i ] && [ $t -lt 600 ]; do nap; t=$((t + 1)); done
    done
    kill -INT $pid; wait $pid; rc=$?
    echo "faults said $(ac 'the page shows the last frame'), fixes run $(ac 'the fix runs'), rc=$rc" | tee -a "$R/after.txt"
    dmesg 2>/dev/null | grep -ci "xid.*31" | sed 's/^/Xid 31 lines in the kernel log: /' | tee -a "$R/after.txt"
    site=/tmp/vkcuda-site; rm -rf $site
    python3 -m pip install -q --no-index --no-deps --target $site "$D"/wheels/vkcuda-*.whl 2>&1 | tail -2
    export XLA_PYTHON_CLIENT_PREALLOCATE=false
    for layer in new old; do
        if [ $layer = old ]; then export VKCUDA_OLD_LAYER=1; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH; fi
        echo "== after, layer $layer: e2e serve, Python" | tee -a "$R/after.txt"
        VKCUDA_BIN=$D/vkcuda timeout 300 "$D/e2e" serve 2>&1 | grep -E "^test |^e2e:|raw: " | tee -a "$R/after.txt"
        PYTHONPATH=$site timeout 300 python3 -m pytest -p no:cacheprovider -q -rs python/tests/test_serve.py \
            python/tests/test_headless.py 2>&1 | tail -6 | tee -a "$R/after.txt"
    done
    unset VKCUDA_OLD_LAYER; source .gl/env.sh >/dev/null; unset VK_LAYER_PATH
}

want recovery || exit 0
echo "== 3. recovery: a served run's kernel saved with a fault and fixed, 100 times" | tee -a "$R/recovery.txt"
dmesg 2>/dev/null | grep -ci xid | sed 's/^/Xid lines in the kernel log before: /' | tee -a "$R/recovery.txt"
cp /tmp/good.cu /tmp/live.cu
rm -rf /tmp/served
"$D/vkcuda" --headless --serve 0 --kernel /tmp/live.cu --size 640x360 --out /tmp/served --dump-every 97 \
    >/tmp/served.log 2>&1 & pid=$!
count() { grep -c "$1" /tmp/served.log; }
until_count() { # PATTERN N SECONDS
    local t=0; while [ "$(count "$1")" -lt "$2" ]; do nap; t=$((t + 1)); [ $t -ge $(($3 * 20)) ] && return 1; done
    return 0 # (a while loop's status is its body's last command's)
}
until_count "watch it at" 1 60 || echo "no server" | tee -a "$R/recovery.txt"
sample() {
    printf '%s rss_kb=%s fds=%s gpu_used_mib=%s\n' "$1" "$(awk '/VmRSS/ {print $2}' /proc/$pid/status)" \
        "$(ls /proc/$pid/fd | wc -l)" "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)" | tee -a "$R/recovery.txt"
}
sleep 1; sample "start"
t0=$(date +%s)
kinds=(address misaligned trap)
for i in $(seq 1 100); do
    kind=${kinds[$((i % 3))]}
    bad "$kind" "$i" >/tmp/live.cu.new && mv /tmp/live.cu.new /tmp/live.cu
    until_count "the page shows the last frame" "$i" 30 || { echo "fault $i ($kind): no message" | tee -a "$R/recovery.txt"; break; }
    good "$i" >/tmp/live.cu.new && mv /tmp/live.cu.new /tmp/live.cu
    until_count "the fix runs" "$i" 30 || { echo "fix $i: did not run" | tee -a "$R/recovery.txt"; break; }
    [ $((i % 10)) -eq 0 ] && sample "after $i faults"
    [ $(($(date +%s) - t0)) -gt 280 ] && { echo "stopped at $i: time" | tee -a "$R/recovery.txt"; break; }
done
echo "faults said: $(count 'the page shows the last frame'), fixes run: $(count 'the fix runs'), in $(($(date +%s) - t0)) s" | tee -a "$R/recovery.txt"
grep -m3 -E "CUDA_ERROR" /tmp/served.log | cut -c1-400 | tee -a "$R/recovery.txt"
grep -oE "CUDA_ERROR_[A-Z_]+" /tmp/served.log | sort | uniq -c | tee -a "$R/recovery.txt"
sleep 1; kill -INT $pid; wait $pid; echo "served run: rc=$?" | tee -a "$R/recovery.txt"
tail -4 /tmp/served.log | tee -a "$R/recovery.txt"
cp /tmp/served.log "$R/served.log"
python3 - <<'PY' | tee -a "$R/recovery.txt"
import glob, zlib, struct
import numpy as np
def png(path):
    try:
        from PIL import Image
        return np.asarray(Image.open(path).convert("RGBA")).astype(np.int32)
    except ImportError:
        return png_here(path)
def png_here(path):
    data = open(path, "rb").read(); pos = 8; idat = b""; w = h = 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8]); body = data[pos + 8:pos + 8 + n]; pos += 12 + n
        if kind == b"IHDR": w, h = struct.unpack(">II", body[:8])
        if kind == b"IDAT": idat += body
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * 4); out = np.zeros((h, w * 4), np.int32)
    for y in range(h):
        f, row = raw[y, 0], raw[y, 1:].astype(np.int32); prev = out[y - 1] if y else np.zeros(w * 4, np.int32)
        cur = np.zeros(w * 4, np.int32)
        for x in range(w * 4):
            a = cur[x - 4] if x >= 4 else 0; b = prev[x]; c = prev[x - 4] if x >= 4 else 0
            p = {0: 0, 1: a, 2: b, 3: (a + b) // 2}.get(f)
            if f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c); p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[x] = (row[x] + p) & 255
        out[y] = cur
    return out.reshape(h, w, 4)
files = sorted(glob.glob("/tmp/served/frame_*.png")); bad = 0
y, x = np.mgrid[0:360, 0:640]
want = np.stack([(x * 7) & 255, (y * 13) & 255, (x + y) & 255, np.full_like(x, 255)], -1)
for f in files:
    if not np.array_equal(png(f), want): bad += 1
print(f"dumped frames checked against the good kernel's pattern: {len(files)}, differing: {bad}")
PY

echo "== the viewer (CPU-present window under Xvfb): 3 faults and fixes" | tee -a "$R/recovery.txt"
Xvfb :77 -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 & xpid=$!
for _ in $(seq 50); do [ -S /tmp/.X11-unix/X77 ] && break; nap; nap; done
good 0 >/tmp/live.cu
DISPLAY=:77 "$D/vkcuda" --kernel /tmp/live.cu --size 320x180 >/tmp/viewer.log 2>&1 & vpid=$!
vcount() { grep -c "$1" /tmp/viewer.log; }
for i in 1 2 3; do
    sleep 2; bad address "v$i" >/tmp/live.cu.new && mv /tmp/live.cu.new /tmp/live.cu
    t=0; while [ "$(vcount 'the window keeps the last frame')" -lt $i ] && [ $t -lt 600 ]; do nap; t=$((t + 1)); done
    good "v$i" >/tmp/live.cu.new && mv /tmp/live.cu.new /tmp/live.cu
    t=0; while [ "$(vcount 'the fix runs')" -lt $i ] && [ $t -lt 600 ]; do nap; t=$((t + 1)); done
done
echo "viewer: faults said $(vcount 'the window keeps the last frame'), fixes run $(vcount 'the fix runs')" | tee -a "$R/recovery.txt"
sleep 1; kill -INT $vpid; wait $vpid; echo "viewer: rc=$?" | tee -a "$R/recovery.txt"
tail -3 /tmp/viewer.log | tee -a "$R/recovery.txt"; cp /tmp/viewer.log "$R/viewer.log"

step() { # NAME SECONDS COMMAND...
    local name=$1 secs=$2; shift 2
    local t0=$(date +%s%N)
    timeout -s KILL "$secs" "$@" >/tmp/step.log 2>&1
    local rc=$?
    printf '%-34s rc=%-3s %6s ms | %s\n' "$name" "$rc" "$((($(date +%s%N) - t0) / 1000000))" \
        "$(grep -E "fps|mismatches|validation:|error|held up|killed" /tmp/step.log | head -4 | tr '\n' ' ' | cut -c1-600)" |
        tee -a "$R/recovery.txt"
}
echo "== later processes" | tee -a "$R/recovery.txt"
step endless-kernel-child 60 "$D/vkcuda" --headless --producer-process child --kernel tests/kernels/endless.cu --frames 10 --dump-every 0
step after-draw-cuda-child 90 "$D/vkcuda" --headless --producer cuda --producer-process child --consume draw --target-size 200x150 --frames 60 --verify --validate --out /tmp/a1
step after-draw-cuda 90 "$D/vkcuda" --headless --producer cuda --layout buffer --consume draw --target-size 201x149 --frames 60 --verify --validate --out /tmp/a2
step after-window-cpu-present-cuda 60 env DISPLAY=:77 "$D/vkcuda" --producer cuda --frames 120
kill $xpid 2>/dev/null
dmesg 2>/dev/null | grep -i xid | tail -4 | tee -a "$R/recovery.txt"
