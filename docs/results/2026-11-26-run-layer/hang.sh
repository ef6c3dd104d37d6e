#!/usr/bin/env bash
# One GPU, layer 1.3.239 (LAYER=new: 1.4.309): the Python GPU tests, then the command of the CUDA e2e run's
# first test run on its own (not under the e2e harness), with its stderr in a file: how far
# it gets (the device line is printed after the device, the offscreen target and the
# readback are made, before the session starts) when it waits; a watch after 40 s records
# its threads. Then the same command once more, after the wait was killed (RUNS=1: once).
# K= picks the Python tests (pytest -k).
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/new/wheels/vkcuda-*.whl
unset VK_LAYER_PATH
if [ "${LAYER:-old}" = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
echo "layer ${LAYER:-old}: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" > $R/hang.txt
PYTHONPATH=/tmp/s timeout 150 python3 -m pytest -p no:cacheprovider -q python/tests/test_gpu.py -k "${K:-gpu or torch}" 2>&1 | tail -1 >> $R/hang.txt
cmd=(.gpu/new/vkcuda --headless --producer cuda --sync split --buffers 2 --scene julia --size 160x90 --frames 24
     --validate --verify --out /tmp/hang-out --cost 48 --consume draw --target-size 200x150)
for run in $(seq 1 ${RUNS:-2}); do
    rm -rf /tmp/hang-out
    { echo "== run $run: ${cmd[*]}"; date +%T.%N; } >> $R/hang.txt
    "${cmd[@]}" > $R/hang-stdout-$run.txt 2> $R/hang-stderr-$run.txt & p=$!
    for i in $(seq 1 400); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
    if kill -0 $p 2>/dev/null; then
        { echo "still running after 40 s"; for t in /proc/$p/task/*; do
            echo "$(cat $t/comm) wchan=$(cat $t/wchan) syscall=$(cat $t/syscall 2>&1)"; done; } >> $R/hang.txt
        kill -9 $p
    fi
    wait $p; echo "rc=$? at $(date +%T.%N)" >> $R/hang.txt
done
cat $R/hang.txt; echo "-- stderr 1:"; cat $R/hang-stderr-1.txt; echo "-- stderr 2:"; cat $R/hang-stderr-2.txt | tail -5
