#!/usr/bin/env bash
# One GPU, experiment (branch exp/cancel): a slot pack whose frame is dropped
# (replaced) before it runs skips its blocks (each block reads a flag; first
# in host memory: cancel-hostflag.txt; then in device memory). The wheel before (.gpu/wheels, f0cf745) against it
# (.gpu/wheels-exp) with the caller's packs bounded at VKX_AHEAD = 2, 3, 4;
# then the GPU tests that replace frames, with the experiment's wheel.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
source .gl/env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for w in new:wheels exp:wheels-exp; do
    rm -rf /tmp/ab/site-${w%%:*}; mkdir -p /tmp/ab
    python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-${w%%:*} .gpu/${w#*:}/vkcuda-*.whl
done
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
b() { timeout 100 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 "$@" 2>&1 | grep -E "\| 1920"; }
for round in 1 2; do
    echo "== before (round $round)" | tee -a $R/cancel.txt
    PYTHONPATH=/tmp/ab/site-new b --modes newest,every --dtypes float32 | tee -a $R/cancel.txt
    for a in ${AHEADS:-2 3}; do
        echo "== skip, VKX_AHEAD=$a (round $round)" | tee -a $R/cancel.txt
        VKX_AHEAD=$a PYTHONPATH=/tmp/ab/site-exp b --modes newest --dtypes float32 | tee -a $R/cancel.txt
    done
    echo "== skip, every frame and RGBA8 (round $round)" | tee -a $R/cancel.txt
    PYTHONPATH=/tmp/ab/site-exp b --modes every --dtypes float32 | tee -a $R/cancel.txt
    PYTHONPATH=/tmp/ab/site-exp b --modes newest --dtypes uint8 | tee -a $R/cancel.txt
done
PYTHONPATH=/tmp/ab/site-exp timeout 200 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py \
    -k "newest or race or block or place or torch" 2>&1 | tail -5 | tee $R/test-exp.txt
