#!/usr/bin/env bash
# One GPU, the wheel of this change (.gpu/new/wheels): test_gpu.py under layer 1.4.309 and
# then 1.3.239 (torch, CuPy, JAX, cuda.core), with the headless suite's message, signal and
# DLPack tests. Then, under 1.3.239, the order that hung before (issue 44's open finding):
# the CUDA e2e tests right after the Python ones, with a watch that, if the e2e run outlives
# 90 s, records each vkcuda process's open files and each thread's kernel wait and syscall
# (AFTER=0 leaves this part out).
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export VKCUDA_BIN=.gpu/new/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/new/wheels/vkcuda-*.whl
for layer in ${LAYERS:-new old}; do
    ( unset VK_LAYER_PATH
      if [ $layer = old ]; then VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; else source .gl/env.sh >/dev/null; fi
      source .xkit/env.sh >/dev/null
      { nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
        echo "== layer $layer: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}"
        PYTHONPATH=/tmp/s timeout 250 python3 -m pytest -p no:cacheprovider -q -rfs python/tests/test_gpu.py \
            python/tests/test_headless.py -k "${K:-gpu or torch or message or signal or ctrl_c or dlpack}" 2>&1
        echo "rc=$?"; } > $R/python-$layer.txt
      grep -E "passed|failed|rc=" $R/python-$layer.txt | tail -3 )
done
# AFTER=0: stop here.
[ "${AFTER:-1}" = 1 ] || exit 0
watch() {
    sleep 90
    { echo "== after 90 s"; ps -eo pid,ppid,stat,etime,cmd | grep -v "\]$" | tail -30
      for p in $(pgrep -f "\.gpu/new/vkcuda"); do
          echo "-- $p: $(tr '\0' ' ' < /proc/$p/cmdline)"; ls -l /proc/$p/fd 2>&1 | tail -n +2
          for t in /proc/$p/task/*; do
              echo "$(cat $t/comm) wchan=$(cat $t/wchan) syscall=$(cat $t/syscall 2>&1)"; done; done
    } >> $R/watch.txt 2>&1
}
( unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; source .xkit/env.sh >/dev/null
  watch & w=$!
  { echo "== e2e cuda_ after the Python tests, layer 1.3.239"; timeout 200 .gpu/new/e2e cuda_ 2>&1; echo "rc=$?"; } > $R/after-python-old.txt
  kill $w 2>/dev/null
  grep -E "^test result|e2e: |rc=" $R/after-python-old.txt | tail -2 )
