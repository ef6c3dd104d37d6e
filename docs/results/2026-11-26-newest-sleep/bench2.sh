#!/usr/bin/env bash
# One GPU: show_bench.py with the wheel of the commit before this session
# (.gpu/wheels-base, ad5aa3b) and the final one (.gpu/wheels) in turn, two
# rounds of all four lines, then two more of RGBA32F newest wins.
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
b() { timeout 150 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 "$@" 2>&1 | grep -E "^device|^\| |rror"; }
for round in 1 2; do
    for w in base new; do
        echo "== $w (round $round)" | tee -a $R/bench.txt
        PYTHONPATH=/tmp/ab/site-$w b | tee -a $R/bench.txt
    done
done
for round in 3 4; do
    for w in base new; do
        echo "== $w (round $round, RGBA32F newest wins)" | tee -a $R/bench.txt
        PYTHONPATH=/tmp/ab/site-$w b --modes newest --dtypes float32 | tee -a $R/bench.txt
    done
done
