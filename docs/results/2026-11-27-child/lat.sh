#!/usr/bin/env bash
# Latency beside frames in flight: the user kernel copied at 1920x1080 with 1, 2 and 3 buffers,
# the producer in the run's process and in a child, 3 repeats (GPU machine, .gl and .gpu/child carried).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source .gl/env.sh >/dev/null; unset VK_LAYER_PATH
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
cat >/tmp/good.cu <<'CU'
#include "vkcuda.h"
extern "C" __global__ void render(vk_frame f)
{
    VK_PIXEL(f, x, y);
    vk_put8(f.target, x, y, make_uchar4((x * 7) & 255, (y * 13) & 255, (x + y) & 255, 255));
}
CU
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for rep in 1 2 3; do for b in 1 2 3; do for p in same child; do
  printf '%s buffers=%s rep%s: ' $p $b $rep
  .gpu/child/vkcuda --headless --producer cuda --kernel /tmp/good.cu --size 1920x1080 --buffers $b --frames 3000 --dump-every 0 --producer-process $p 2>&1 | grep -oE "[0-9.]+ fps|rendered → consumed [0-9.]+ µs|CUDA kernel [0-9.]+ µs|CPU render [0-9.]+ µs" | tr '\n' ' '; echo
done; done; done
