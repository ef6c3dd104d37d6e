#!/usr/bin/env bash
# Every CUDA e2e test once under layer 1.3.239 (`new`: 1.4.309), the viewer's
# window tests included (Xvfb, xdotool and xwd from .xkit: scripts/gpu-xkit.sh).
#   bash e2e-old.sh [new]
set -uo pipefail
cd "$(dirname "$0")/../../.."
export VKCUDA_BIN=.gpu/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx
unset VK_LAYER_PATH
if [ "${1:-}" = new ]; then source .gl/env.sh; layer=1.4.309; else VKCUDA_OLD_LAYER=1 source .gl/env.sh; layer=1.3.239; fi
source .xkit/env.sh
echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $OUT/layer-$layer.txt
timeout 240 .gpu/e2e cuda_ >$OUT/e2e-cuda-xkit-$layer.txt 2>&1; echo "rc=$?" >>$OUT/e2e-cuda-xkit-$layer.txt
tail -3 $OUT/e2e-cuda-xkit-$layer.txt
