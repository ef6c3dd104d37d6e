#!/usr/bin/env bash
# On an NVIDIA machine: the viewer's hot reload under many saves. The viewer
# runs a --kernel file (CUDA producer; under Xvfb the CPU-present path), the
# file is saved SAVES times with a new colour each, and each save waits until
# its version renders ("kernel vN renders" on stderr: a state, not a time).
# The viewer's resident host memory (VmRSS) and its GPU memory (nvidia-smi)
# are read after WARM saves and after the last; the swapped-out versions are
# unloaded once their frames end, so both must stay flat. Prints one line:
#   reload-soak: SAVES saves: host RSS A -> B MiB (+D), GPU C -> E MiB (+F), older versions loaded at most K
# and exits 1 when either grew by more than LIMIT_MIB, or a save did not render.
#   VKCUDA_BIN  the vkcuda binary (default target/release/vkcuda)
#   SAVES (default 1000), WARM (default 100), LIMIT_MIB (default 2)
# Needs Xvfb (source .xkit/env.sh, scripts/gpu-xkit.sh) and nvidia-smi.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${VKCUDA_BIN:-target/release/vkcuda}
SAVES=${SAVES:-1000} WARM=${WARM:-100} LIMIT_MIB=${LIMIT_MIB:-2}
dir=$(mktemp -d)
Xvfb :71 -screen 0 640x480x24 -nolisten tcp -noreset >/dev/null 2>&1 &
xvfb=$!
trap 'kill $viewer $xvfb 2>/dev/null; rm -rf "$dir"' EXIT
kernel() { # a solid colour, and the save's number so every save is new source
    printf '#include "vkcuda.h"\n// save %d\nextern "C" __global__ void render(vk_frame f)\n{\n    VK_PIXEL(f, x, y);\n    vk_put8(f.target, x, y, make_uchar4(%d, %d, 90, 255));\n}\n' \
        "$1" $(($1 % 256)) $((255 - $1 % 256)) >"$dir/k.cu.tmp" && mv "$dir/k.cu.tmp" "$dir/k.cu"
}
kernel 0
for _ in $(seq 100); do DISPLAY=:71 xdotool getdisplaygeometry >/dev/null 2>&1 && break; sleep 0.1; done
DISPLAY=:71 "$BIN" --producer cuda --kernel "$dir/k.cu" --size 256x256 2>"$dir/err" >"$dir/out" &
viewer=$!
rendered() { # waits up to 30 s for version $1 to render
    for _ in $(seq 3000); do
        grep -q "kernel v$1 renders" "$dir/err" && return 0
        kill -0 $viewer 2>/dev/null || return 1
        sleep 0.01
    done
    return 1
}
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' /proc/$viewer/status; }
gpu() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F', ' -v p=$viewer '$1 == p {print $2}'; }
for _ in $(seq 3000); do grep -q "k.cu" "$dir/err" 2>/dev/null && break; kill -0 $viewer || break; sleep 0.01; done
for i in $(seq 1 "$SAVES"); do
    kernel "$i"
    rendered $((i + 1)) || { echo "reload-soak: save $i did not render"; cat "$dir/err" | tail -5; exit 1; }
    [ "$i" = "$WARM" ] && { host0=$(rss); gpu0=$(gpu); }
done
host1=$(rss) gpu1=$(gpu)
most=$(grep -o '[0-9]* older versions loaded' "$dir/err" | awk '$1 > m {m = $1} END {print m + 0}')
kill -INT $viewer
wait $viewer
rc=$?
growth() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%+.1f", b - a}'; }
echo "reload-soak: $SAVES saves (from save $WARM on): host RSS $host0 -> $host1 MiB ($(growth "$host0" "$host1")), GPU $gpu0 -> $gpu1 MiB ($(growth "$gpu0" "$gpu1")), older versions loaded at most $most; viewer exit $rc"
tail -n 3 "$dir/out"
awk -v a="$host0" -v b="$host1" -v c="$gpu0" -v d="$gpu1" -v l="$LIMIT_MIB" -v rc="$rc" \
    'BEGIN {exit !(b - a <= l && d - c <= l && (rc == 0 || rc == 130))}'
