#!/usr/bin/env bash
# One GPU: show_bench.py with the wheel of the commit before (2a1e747,
# .gpu/wheels-base) and the final one (.gpu/wheels) in turn, three rounds of
# all four lines, alternating which goes first. The fix adds a look at the
# CUDA context to the fed producer's waits (once per 50 ms at most).
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
source .gl/env.sh >/dev/null
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
for w in new:wheels base:wheels-base; do
    rm -rf /tmp/ab/site-${w%%:*}; mkdir -p /tmp/ab
    python3 -m pip install -q --no-index --no-deps --target /tmp/ab/site-${w%%:*} .gpu/${w#*:}/vkcuda-*.whl
done
export PYTHONUNBUFFERED=1
b() { timeout 150 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 "$@" 2>&1 | grep -E "^device|^\| |rror"; }
# ROUNDS overrides the order of the wheels (a later call: ROUNDS="new base new base").
for order in ${ROUNDS:-"base new" "new base" "base new"}; do
    for w in $order; do
        echo "== $w" | tee -a $R/bench.txt
        PYTHONPATH=/tmp/ab/site-$w b | tee -a $R/bench.txt
    done
done
