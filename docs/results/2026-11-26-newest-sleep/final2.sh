#!/usr/bin/env bash
# One GPU, the final build (.gpu/wheels: 8b0d113, then cb098cc): test_gpu.py under layer 1.4.309 and
# then 1.3.239, and the racy tests (the stream race, the skipped-pack bursts,
# newest wins mixing two streams, a show inside a frame block) 3 more times
# under each. The bench is bench2.sh.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
for layer in new old; do
    ( if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh; else source .gl/env.sh; fi
      echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset: Debian 12 layer 1.3.239}" | tee $R/layer-$layer.txt
      nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
      rm -rf /tmp/ab/site-new; mkdir -p /tmp/ab
      python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-new .gpu/wheels/vkcuda-*.whl
      PYTHONPATH=/tmp/ab/site-new timeout 200 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py \
          2>&1 | tail -4 | tee $R/test-gpu-$layer.txt
      for i in 1 2 3; do
          PYTHONPATH=/tmp/ab/site-new timeout 90 python3 -m pytest -p no:cacheprovider -q -s python/tests/test_gpu.py \
              -k "skipped or the_frame_is_the_tensor or mixes or without_spinning" 2>&1 \
              | grep -E "newest wins:|stream race:|passed|failed" | tee -a $R/repeat-$layer.txt
      done )
done
