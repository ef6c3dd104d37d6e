#!/usr/bin/env bash
# One GPU: the producer leaves the next frame to a newest-wins caller that
# claims it (the caller's frame is newer than the slot in the mailbox). The
# wheel of 8b0d113 (.gpu/wheels) against it (.gpu/wheels-exp), newest
# wins, 3 rounds; then the newest-wins GPU tests with it, under 1.4.309.
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
b() { timeout 150 python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --repeats 3 --modes newest "$@" 2>&1 | grep -E "^\| |rror"; }
for round in 1 2 3; do
    for w in new exp; do
        echo "== $w (round $round)" | tee -a $R/prefer.txt
        PYTHONPATH=/tmp/ab/site-$w b | tee -a $R/prefer.txt
    done
done
PYTHONPATH=/tmp/ab/site-exp timeout 200 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py \
    -k "newest or race or block or place or skipped or spinning" 2>&1 | tail -3 | tee $R/test-exp.txt
