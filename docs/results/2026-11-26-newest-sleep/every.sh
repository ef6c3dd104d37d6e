#!/usr/bin/env bash
# One GPU: is every frame at RGBA32F slower with the final wheel? In
# bench2.sh (and final.sh) its second round's line fell to 85 % while the
# wheel before held 93-95 %. Here: every frame at RGBA32F alone, the final
# wheel of 8b0d113 first then the one before, 3 rounds; then the whole bench once
# with the final wheel second.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
source .gl/env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for w in new:wheels base:wheels-base; do
    rm -rf /tmp/ab/site-${w%%:*}; mkdir -p /tmp/ab
    python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-${w%%:*} .gpu/${w#*:}/vkcuda-*.whl
done
export PYTHONUNBUFFERED=1
b() { timeout 150 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 "$@" 2>&1 | grep -E "^\| |rror"; }
for round in 1 2 3; do
    for w in new base; do
        echo "== $w (round $round, RGBA32F every frame)" | tee -a $R/every.txt
        PYTHONPATH=/tmp/ab/site-$w b --modes every --dtypes float32 | tee -a $R/every.txt
    done
done
for w in base new; do
    echo "== $w (whole bench)" | tee -a $R/every.txt
    PYTHONPATH=/tmp/ab/site-$w b | tee -a $R/every.txt
done
