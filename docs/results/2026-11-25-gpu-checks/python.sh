#!/usr/bin/env bash
# nvidia-h100-x2: the Python changes of stop 38 not yet run on a GPU (the
# kept context guard, the cuda.core fixture on GPU 0): test_gpu.py under
# 1.4.309, the two-GPU and cuda.core tests under 1.3.239; then the guard's
# cost on the GPU path: show() of a 64x64 RGBA8 torch tensor, median thread
# CPU per call, the wheel before the guard (55b7643) and the current one in
# turn, 5 runs each (guard-ab-gpu.py).
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/python.tgz -C $OUT r' EXIT
source .gl/env.sh; echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for w in after:wheels before:wheels-before; do
    rm -rf /tmp/ab/site-${w%%:*}; mkdir -p /tmp/ab
    python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-${w%%:*} .gpu/${w#*:}/vkcuda-*.whl
done
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
PYTHONPATH=/tmp/ab/site-after timeout 170 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py 2>&1 | tail -6 | tee $R/test-gpu-1.4.309.txt
unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh; echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer-old.txt
PYTHONPATH=/tmp/ab/site-after timeout 90 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py -k "another_gpu or own_tensors or cuda_core" 2>&1 | tail -6 | tee $R/two-gpus-1.3.239.txt
unset VK_LAYER_PATH; source .gl/env.sh
timeout 150 python3 docs/results/2026-11-25-gpu-checks/guard-ab-gpu.py 2>&1 | tee $R/guard-ab-gpu.txt
