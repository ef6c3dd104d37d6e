#!/usr/bin/env bash
# One GPU: the frame a direct make replaces is marked dropped before the
# direct pack is enqueued (its own pack, ahead on the caller's stream, may
# then skip instead of holding the frame up). The wheel before (.gpu/wheels,
# 79d43ce) against it (.gpu/wheels-exp, branch exp/early: with the knob
# VKX_AHEAD, the caller's packs that may wait on the GPU, kept at 2), 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
source .gl/env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for w in new:wheels exp:wheels-exp; do
    rm -rf /tmp/ab/site-${w%%:*}; mkdir -p /tmp/ab
    python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-${w%%:*} .gpu/${w#*:}/vkcuda-*.whl
done
export PYTHONUNBUFFERED=1
b() { timeout 100 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 --modes newest "$@" 2>&1 | grep -E "^\| 1920|rror"; }
for round in 1 2; do
    echo "== before (round $round)" | tee -a $R/early.txt
    PYTHONPATH=/tmp/ab/site-new b --dtypes float32 | tee -a $R/early.txt
    for a in 2 1; do
        echo "== early mark, VKX_AHEAD=$a (round $round)" | tee -a $R/early.txt
        VKX_AHEAD=$a PYTHONPATH=/tmp/ab/site-exp b | tee -a $R/early.txt
    done
done
