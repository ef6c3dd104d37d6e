#!/usr/bin/env bash
# 2x GPU (nvidia-h100-x2): the two-GPU and cuda.core tests of
# test_gpu.py with the final wheel, under 1.4.309 and then 1.3.239.
source .gl/env.sh >/dev/null; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/wheels/vkcuda-*.whl
export XLA_PYTHON_CLIENT_PREALLOCATE=false; echo "layer ${VK_LAYER_PATH:-unset}"
PYTHONPATH=/tmp/s timeout 200 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py -k "another_gpu or own_tensors or cuda_core or two" 2>&1 | tail -5
unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh > /dev/null; echo "layer ${VK_LAYER_PATH:-unset}"
PYTHONPATH=/tmp/s timeout 200 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py -k "another_gpu or own_tensors or cuda_core or two" 2>&1 | tail -5
