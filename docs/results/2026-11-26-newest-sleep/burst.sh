#!/usr/bin/env bash
# One GPU, the final wheel (.gpu/wheels): the skipped-pack test (bursts of 8
# shows, a flush after each, PNGs written) 4 times under each layer, then
# newest wins at RGBA32F once more, the wheel before (ad5aa3b) and after in turn, 3 rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
for layer in new old; do
    ( if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh; else source .gl/env.sh; fi
      echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset: Debian 12 layer 1.3.239}" | tee -a $R/burst.txt
      rm -rf /tmp/ab/site-new; mkdir -p /tmp/ab
      python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-new .gpu/wheels/vkcuda-*.whl
      for i in 1 2 3 4; do
          PYTHONPATH=/tmp/ab/site-new timeout 90 python3 -m pytest -p no:cacheprovider -q -s python/tests/test_gpu.py \
              -k "skipped" 2>&1 | grep -E "newest wins:|passed|failed|Error|assert" | tee -a $R/burst.txt
      done )
done
source .gl/env.sh >/dev/null
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
rm -rf /tmp/ab/site-base; python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-base .gpu/wheels-base/vkcuda-*.whl
for round in 1 2 3; do
    for w in base new; do
        echo "== $w (round $round)" | tee -a $R/bench.txt
        PYTHONPATH=/tmp/ab/site-$w timeout 100 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 \
            --modes newest --dtypes float32 2>&1 | grep -E "^\| 1920" | tee -a $R/bench.txt
    done
done
