#!/usr/bin/env bash
# One GPU, the final build (.gpu/wheels): test_gpu.py under layer $1 (new:
# 1.4.309, old: 1.3.239), then the racy tests 5 more times: the kernel
# faults, the stream race, the skipped-pack bursts, newest wins mixing two
# streams, a show inside a frame block; then the kernel-fault tests 10 more
# times. Output: tests-h100/.
set -uo pipefail
cd "$(dirname "$0")/../../.."
layer=$1; R=$OUT/r; mkdir -p $R
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
echo "layer $layer: VK_LAYER_PATH=${VK_LAYER_PATH:-unset: Debian 12 layer 1.3.239}" | tee $R/layer-$layer.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/wheels/vkcuda-*.whl
PYTHONPATH=/tmp/s timeout 280 python3 -m pytest -p no:cacheprovider -q -rfs -s python/tests/test_gpu.py > $R/test-gpu-$layer.log 2>&1
grep -E "^\.*F?(fault|stream race|newest wins)|passed|failed" $R/test-gpu-$layer.log | cut -c1-500 | tee $R/test-gpu-$layer.txt
for i in 1 2 3 4 5; do
    PYTHONPATH=/tmp/s timeout 100 python3 -m pytest -p no:cacheprovider -q -s python/tests/test_gpu.py \
        -k "fault or skipped or the_frame_is_the_tensor or mixes or without_spinning" 2>&1 \
        | grep -E "^\.*F?(fault|stream race|newest wins)|passed|failed" | cut -c1-500 | tee -a $R/repeat-$layer.txt
done
for i in $(seq 10); do
    PYTHONPATH=/tmp/s timeout 100 python3 -m pytest -p no:cacheprovider -q -s python/tests/test_gpu.py -k fault 2>&1 \
        | grep -E "^\.*F?fault|passed|failed" | cut -c1-500 | tee -a $R/faults-$layer.txt
done
