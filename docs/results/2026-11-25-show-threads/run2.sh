#!/usr/bin/env bash
# Second run (nvidia-h100-x2): the fed run's consumer frames in flight
# (VKX_INFLIGHT; the CLI's default at 3 buffers is 3, the fed run's was 2) and
# buffers, beside the base; then the two-GPU tests under both layers.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/show-threads-2.tgz -C $OUT r' EXIT
source .gl/env.sh
site=/tmp/vkcuda-site; rm -rf $site
python3 -m pip install -q --no-index --no-deps --target $site .gpu/wheels/vkcuda-*.whl
export PYTHONPATH=$site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
B="python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --threads --repeats 3"
bash scripts/gpu-python.sh -k "another_gpu or own_tensors" 2>&1 | tee $R/two-gpus-1.4.309.txt
$B --json $R/base.json 2>&1 | tee $R/base.txt
VKX_INFLIGHT=3 $B --json $R/inflight3.json 2>&1 | tee $R/inflight3.txt
VKX_INFLIGHT=4 VKX_BUFFERS=4 $B --json $R/b4i4.json 2>&1 | tee $R/b4i4.txt
unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh; echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer-old.txt
bash scripts/gpu-python.sh -k "another_gpu or own_tensors" 2>&1 | tee $R/two-gpus-1.3.239.txt
