#!/usr/bin/env bash
# One GPU, experiment (branch exp/capture, not merged): a contiguous RGBA
# tensor captured into a slot (VKX_CAPTURE) or packed into the shared buffer
# (VKX_DIRECT) by cuMemcpyDtoDAsync ("memcpy") or by cuMemcpyBatchAsync with
# CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE ("batch": a copy engine) instead
# of the pack kernel ("kernel"). Frames stay right: these are real copies.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
source .gl/env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
rm -rf /tmp/ab/site-exp; mkdir -p /tmp/ab
python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-exp .gpu/wheels-exp/vkcuda-*.whl
export PYTHONUNBUFFERED=1
b() { PYTHONPATH=/tmp/ab/site-exp timeout 100 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 "$@" 2>&1 | grep -E "^\| 1920|rror"; }
for round in 1 2; do
    for c in kernel batch; do
        echo "== VKX_CAPTURE=$c (round $round)" | tee -a $R/capture.txt
        VKX_CAPTURE=$c b --modes newest --dtypes float32 | tee -a $R/capture.txt
    done
    echo "== VKX_CAPTURE=batch VKX_DIRECT=batch (round $round)" | tee -a $R/capture.txt
    VKX_CAPTURE=batch VKX_DIRECT=batch b | tee -a $R/capture.txt
done
