#!/usr/bin/env bash
# One GPU, layer 1.3.239 only: the Python GPU tests, then the CUDA e2e tests driving the
# commit before this session (.gpu/base/vkcuda; BIN= picks another), to learn whether the
# e2e run's wait after the Python tests (python.sh's after-python-old.txt) predates this
# change. A watch after 60 s records the waiting vkcuda process's threads (kernel wait,
# syscall) and, where gdb or eu-stack is installed, their user-space stacks.
# E2E_ENV="NAME=VALUE ..." sets variables for the e2e run alone (e.g. __GL_SHADER_DISK_CACHE=0:
# NVIDIA's shader disk cache off).
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export VKCUDA_BIN=${BIN:-.gpu/base/vkcuda} VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/new/wheels/vkcuda-*.whl
unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; source .xkit/env.sh >/dev/null
{ echo "== layer 1.3.239: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}; e2e drives $VKCUDA_BIN"
  PYTHONPATH=/tmp/s timeout 150 python3 -m pytest -p no:cacheprovider -q python/tests/test_gpu.py \
      -k "gpu or torch" 2>&1 | tail -1; } > $R/order.txt
watch() {
    sleep 60
    { echo "== after 60 s"
      for p in $(pgrep -f "vkcuda --headless"); do
          echo "-- $p: $(tr '\0' ' ' < /proc/$p/cmdline)"
          for t in /proc/$p/task/*; do echo "$(cat $t/comm) wchan=$(cat $t/wchan) syscall=$(cat $t/syscall 2>&1)"; done
          if command -v gdb >/dev/null; then timeout 60 gdb -p $p -batch -ex "thread apply all bt 30" 2>&1 | grep -E "^#|^Thread" | head -150
          elif command -v eu-stack >/dev/null; then timeout 60 eu-stack -p $p 2>&1 | head -150
          else echo "(no gdb, no eu-stack)"; fi
      done } >> $R/order-watch.txt 2>&1
}
watch & w=$!
{ echo "== e2e with ${E2E_ENV:-nothing more}"; timeout 150 env ${E2E_ENV:-} .gpu/new/e2e cuda_ 2>&1; echo "rc=$?"; } >> $R/order.txt
kill $w 2>/dev/null
grep -E "passed|^test result|e2e: |rc=" $R/order.txt | tail -3
