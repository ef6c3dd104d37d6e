#!/usr/bin/env bash
# nvidia-h100-x2, after the fix (the caller's CUDA context is restored after
# every call): test_gpu.py under 1.4.309; the two-GPU tests and the cuda.core
# test after them under 1.3.239.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/final.tgz -C $OUT r' EXIT
source .gl/env.sh
site=/tmp/vkcuda-site; rm -rf $site
python3 -m pip install -q --no-index --no-deps --target $site .gpu/wheels/vkcuda-*.whl
export PYTHONPATH=$site XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
timeout 120 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py 2>&1 | tail -4 | tee $R/test-gpu-1.4.309.txt
unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh; echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer-old.txt
timeout 60 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py -k "another_gpu or own_tensors or cuda_core" 2>&1 | tail -4 | tee $R/two-gpus-1.3.239.txt
