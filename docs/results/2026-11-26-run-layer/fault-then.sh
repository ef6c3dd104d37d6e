#!/usr/bin/env bash
# One GPU, a fresh machine, layer 1.3.239: does a CUDA_ERROR_ILLEGAL_ADDRESS fault in the CLI
# (a --kernel that writes through a bad pointer) leave the GPU as the Python fault tests do?
# The faulting run, then the CUDA e2e run's first command (as hang.sh runs it), 40 s bound.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null
mkdir -p /tmp/k; printf '%s\n' '#include "vkcuda.h"' \
    'extern "C" __global__ void render(vk_frame f) { *(volatile unsigned*)(16 + f.width) = 1u; }' > /tmp/k/bad.cu
{ echo "== the faulting run"; timeout 60 .gpu/new/vkcuda --headless --producer cuda --kernel /tmp/k/bad.cu --frames 10 \
      --size 64x64 --validate 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"; } > $R/fault-then.txt
cmd=(.gpu/new/vkcuda --headless --producer cuda --sync split --buffers 2 --scene julia --size 160x90 --frames 24
     --validate --verify --out /tmp/hang-out --cost 48 --consume draw --target-size 200x150)
echo "== then: ${cmd[*]}" >> $R/fault-then.txt
timeout 40 "${cmd[@]}" >> $R/fault-then.txt 2>&1; echo "rc=$?" >> $R/fault-then.txt
cat $R/fault-then.txt
