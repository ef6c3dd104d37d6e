#!/usr/bin/env bash
# One GPU, experiment (branch exp/slotcost, not merged): what newest wins'
# slot packs cost at 1080p RGBA32F. VKX_SLOT=full: as built; empty: the pack
# kernel launched over one pixel; none: no pack launched (events and count
# only); drop: a show whose buffer is Vulkan's is dropped (no slot at all).
# Frames are wrong in all but full: upper bounds, not modes.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
source .gl/env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
rm -rf /tmp/ab/site-exp; mkdir -p /tmp/ab
python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-exp .gpu/wheels-exp/vkcuda-*.whl
export PYTHONUNBUFFERED=1
for round in 1 2; do
    for k in full empty none drop; do
        echo "== VKX_SLOT=$k (round $round)" | tee -a $R/slotcost.txt
        VKX_SLOT=$k PYTHONPATH=/tmp/ab/site-exp timeout 100 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda \
            --repeats 3 --modes newest --dtypes float32 2>&1 | grep -E "rgba32f" | tee -a $R/slotcost.txt
    done
done
