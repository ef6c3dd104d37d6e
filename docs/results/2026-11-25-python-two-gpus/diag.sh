#!/usr/bin/env bash
# nvidia-h100-x2, layer 1.4.309: one failing fault-matrix configuration in
# full (cuda-fault@24, split-2), in the buffer layout on each queue (graphics
# and compute: the shader copy; transfer: vkCmdCopyBuffer) and the array
# layout; a stalled producer stopped by SIGINT in the buffer layout; and which
# Python test failed.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/diag.tgz -C $OUT r' EXIT
source .gl/env.sh
export RUST_LOG=vkcuda=debug,vkcuda_run=debug
one() {  # name, arguments
    local name=$1; shift
    ( s=$(date +%s.%N); timeout 40 .gpu/vkcuda --headless --producer cuda --size 61x33 --frames 80 --dump-every 1 \
        --verify --validate --sync split --buffers 2 --out /tmp/d-$name "$@" > $R/$name.log 2>&1
      echo "rc=$? after $(echo "$(date +%s.%N) - $s" | bc) s" >> $R/$name.log ) &
}
one fault-buffer-graphics --layout buffer --queue graphics --inject cuda-fault@24
one fault-buffer-compute --layout buffer --queue compute --inject cuda-fault@24
one fault-buffer-transfer --layout buffer --queue transfer --inject cuda-fault@24
one fault-array-graphics --layout array --queue graphics --inject cuda-fault@24
( timeout 40 .gpu/vkcuda --headless --producer cuda --size 61x33 --frames 40 --dump-every 1 --validate --sync split \
    --buffers 2 --layout buffer --inject producer-stall@3 --out /tmp/d-stall > $R/stall-buffer-sigint.log 2>&1 &
  pid=$!; for _ in $(seq 300); do grep -q 'is held up for over' $R/stall-buffer-sigint.log && break; sleep 0.1; done
  kill -INT $pid; s=$(date +%s.%N); wait $pid; echo "rc=$? $(echo "$(date +%s.%N) - $s" | bc) s after SIGINT" >> $R/stall-buffer-sigint.log ) &
wait
for f in $R/*.log; do echo "== $f"; tail -3 $f; done
site=/tmp/vkcuda-site; rm -rf $site
python3 -m pip install -q --no-index --no-deps --target $site .gpu/wheels/vkcuda-*.whl
PYTHONPATH=$site XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 150 python3 -m pytest -p no:cacheprovider -q -rf python/tests/test_gpu.py python/tests/test_headless.py 2>&1 | grep -E "^FAILED|^E  |passed|failed" | head -30 | tee $R/pytest-failed.txt
