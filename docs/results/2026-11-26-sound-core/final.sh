#!/usr/bin/env bash
# One GPU, the final build (after DeviceChoice): under 1.4.309 and 1.3.239, the CUDA e2e tests
# (windows through Xvfb) and test_gpu.py with the headless message, signal and DLPack tests.
# One log per layer.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export VKCUDA_BIN=.gpu/new/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/new/wheels/vkcuda-*.whl
for layer in new old; do
    ( unset VK_LAYER_PATH
      if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      source .xkit/env.sh >/dev/null
      { nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
        echo "== layer $layer: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}"
        timeout 200 .gpu/new/e2e cuda_ 2>&1; echo "rc=$?"
        PYTHONPATH=/tmp/s timeout 200 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py \
            python/tests/test_headless.py python/tests/test_window.py \
            -k "gpu or torch or message or signal or ctrl_c or dlpack or no_display" 2>&1; echo "rc=$?"
      } > $R/final-$layer.txt
      grep -E "e2e:|passed|failed|rc=" $R/final-$layer.txt | tail -4 )
done
