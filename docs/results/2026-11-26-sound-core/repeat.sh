#!/usr/bin/env bash
# One GPU, the final build, layer 1.3.239 only: the sequence final.sh ran when its e2e run
# printed nothing for 200 s (the Python selection, then the CUDA e2e tests), with a watch that
# lists every process and the kernel wait of each vkcuda thread if the e2e run outlives 150 s.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
export VKCUDA_BIN=.gpu/new/vkcuda VKCUDA_CACHE_DIR=/tmp/vkcuda-ptx XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
rm -rf /tmp/s; python3 -m pip install -q --no-index --no-deps --target /tmp/s .gpu/new/wheels/vkcuda-*.whl
unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh >/dev/null; source .xkit/env.sh >/dev/null
watch() {  # $1: seconds; lists the processes and vkcuda threads' kernel waits then
    sleep "$1"
    { echo "== after $1 s"; ps -eo pid,ppid,stat,etime,cmd | grep -v "\]$" | tail -40
      for p in $(pgrep -f "vkcuda|e2e"); do for t in /proc/$p/task/*; do
          echo "$p $(cat $t/comm 2>/dev/null) $(cat $t/wchan 2>/dev/null) $(cut -d' ' -f3 $t/stat 2>/dev/null)"; done; done
    } >> $R/watch.txt 2>&1
}
for round in 1 2; do
    { echo "== round $round, layer 1.3.239: VK_LAYER_PATH=${VK_LAYER_PATH:-unset}"
      PYTHONPATH=/tmp/s timeout 150 python3 -m pytest -p no:cacheprovider -q python/tests/test_gpu.py \
          python/tests/test_window.py -k "gpu or torch or no_display" 2>&1 | tail -1
      watch 150 & w=$!
      timeout 200 .gpu/new/e2e cuda_ 2>&1; echo "rc=$?"
      kill $w 2>/dev/null
    } >> $R/repeat-old.txt
    grep -E "round|passed|rc=" $R/repeat-old.txt | tail -3
done
