#!/usr/bin/env bash
# One GPU, the build of 79d43ce: test_gpu.py with its wheel (.gpu/wheels)
# under layer 1.4.309 and then 1.3.239, the new test 4 more times under each;
# then show_bench.py with the wheel of the commit before this session's
# changes (.gpu/wheels-base, ad5aa3b) and the new one in turn, twice, all
# four lines, beside the CLI line.
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
      for i in 1 2 3 4; do
          PYTHONPATH=/tmp/ab/site-new timeout 60 python3 -m pytest -p no:cacheprovider -q -s python/tests/test_gpu.py \
              -k "skipped or the_frame_is_the_tensor" 2>&1 | grep -E "newest wins:|stream race:|passed|failed" | tee -a $R/repeat-$layer.txt
      done )
done
source .gl/env.sh >/dev/null
for w in new:wheels base:wheels-base; do
    rm -rf /tmp/ab/site-${w%%:*}; mkdir -p /tmp/ab
    python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-${w%%:*} .gpu/${w#*:}/vkcuda-*.whl
done
for round in 1 2; do
    for w in base new; do
        echo "== $w (round $round)" | tee -a $R/bench.txt
        PYTHONPATH=/tmp/ab/site-$w timeout 150 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 \
            2>&1 | grep -E "^device|^\| " | tee -a $R/bench.txt
    done
done
