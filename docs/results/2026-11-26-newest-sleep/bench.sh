#!/usr/bin/env bash
# One GPU: show_bench.py with the wheel of the commit before (.gpu/wheels-base)
# and the new one (.gpu/wheels) in turn, $ROUNDS rounds, beside the CLI line;
# $MODES and $DTYPES pick the lines (default: newest wins, both formats).
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
for round in $(seq ${ROUNDS:-2}); do
    for w in base new; do
        echo "== $w (round $round)" | tee -a $R/bench.txt
        PYTHONPATH=/tmp/ab/site-$w timeout 200 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda \
            --repeats ${REPEATS:-3} --modes ${MODES:-newest} --dtypes ${DTYPES:-uint8,float32} --threads 2>&1 | tee -a $R/bench.txt
    done
done
