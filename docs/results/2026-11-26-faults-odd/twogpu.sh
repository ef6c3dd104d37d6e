#!/usr/bin/env bash
# 2x GPU (nvidia-h100-x2): the two-GPU and cuda.core tests of test_gpu.py
# with the final wheel (.gpu/wheels), under 1.4.309 and then 1.3.239.
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/wheels/vkcuda-*.whl
for layer in new old; do
    ( if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      echo "layer $layer: VK_LAYER_PATH=${VK_LAYER_PATH:-unset: Debian 12 layer 1.3.239}"
      PYTHONPATH=/tmp/s timeout 200 python3 -m pytest -p no:cacheprovider -v -rfs python/tests/test_gpu.py \
          -k "another_gpu or own_tensors or cuda_core or two" 2>&1 | grep -E "PASSED|FAILED|SKIPPED|passed|failed|rror" ) \
        | tee -a $R/twogpu.txt
done
