#!/usr/bin/env bash
# One GPU, the wheel of this change (.gpu/new/wheels): test_gpu.py under layer 1.4.309 and
# then 1.3.239 (torch, CuPy, JAX, cuda.core; the torch CPU tensor read through DLPack), and
# the headless suite's message and signal tests. K= picks tests (pytest -k). One log per layer.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/new/wheels/vkcuda-*.whl
for layer in ${LAYERS:-new old}; do
    ( unset VK_LAYER_PATH
      if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      { nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
        echo "== layer $layer: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}"
        PYTHONPATH=/tmp/s timeout 270 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py \
            python/tests/test_headless.py -k "${K:-gpu or torch or message or signal or ctrl_c or dlpack}" 2>&1
        echo "rc=$?"; } > $R/python-$layer.txt
      grep -E "passed|failed|rc=" $R/python-$layer.txt | tail -3 )
done
