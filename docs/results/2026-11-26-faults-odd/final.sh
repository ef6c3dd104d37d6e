#!/usr/bin/env bash
# One GPU, the final build (.gpu/wheels): test_gpu.py once under layer 1.4.309
# and once under 1.3.239 (K= picks tests, as pytest -k). Output: final-h100/.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/wheels/vkcuda-*.whl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for layer in new old; do
    ( if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      echo "== layer $layer: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer-$layer.txt
      PYTHONPATH=/tmp/s timeout 280 python3 -m pytest -p no:cacheprovider -q -rfs -s python/tests/test_gpu.py ${K:+-k "$K"} \
          > $R/test-gpu-$layer.txt 2>&1
      grep -E "passed|failed|Error|assert" $R/test-gpu-$layer.txt | cut -c1-600 | tail -25 )
done
