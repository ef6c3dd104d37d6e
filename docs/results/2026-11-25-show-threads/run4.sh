#!/usr/bin/env bash
# Fourth run (nvidia-h100-x2): VKX_PRE: the fed producer enqueues a frame's
# GPU wait for its buffer, the copy and the signal at once, says the frame is
# made, and only then waits on the host for the buffer's release before it
# frees the slot (the CLI's producer waits on the GPU too); beside the base.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/show-threads-4.tgz -C $OUT r' EXIT
source .gl/env.sh
site=/tmp/vkcuda-site; rm -rf $site
python3 -m pip install -q --no-index --no-deps --target $site .gpu/wheels/vkcuda-*.whl
export PYTHONPATH=$site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
B="python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --threads --repeats 3"
VKX_PRE=1 $B --json $R/pre.json 2>&1 | tee $R/pre.txt
$B --json $R/base.json 2>&1 | tee $R/base.txt
VKX_PRE=1 VKX_INFLIGHT=3 $B --json $R/pre-i3.json 2>&1 | tee $R/pre-i3.txt
VKX_PRE=1 bash scripts/gpu-python.sh -k "stream or in_place or frame or torch" 2>&1 | tail -5 | tee $R/pre-tests-1.4.309.txt
