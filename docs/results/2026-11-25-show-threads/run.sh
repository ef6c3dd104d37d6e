#!/usr/bin/env bash
# On the GPU machine (nvidia-h100-x2): where show()'s time goes, thread by
# thread, and what three changes would buy (an experiment wheel read
# VKX_NOCOPY: the producer skips its copy, frames wrong; VKX_BUFFERS: shared
# buffers; VKX_RUNAHEAD: packs the caller may queue), then the two-GPU tests.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/show-threads.tgz -C $OUT r' EXIT
source .gl/env.sh
site=/tmp/vkcuda-site; rm -rf $site
python3 -m pip install -q --no-index --no-deps --target $site .gpu/wheels/vkcuda-*.whl
export PYTHONPATH=$site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=index,name,driver_version,uuid --format=csv,noheader | tee $R/device.txt
nproc >> $R/device.txt
B="python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --threads --repeats 3"
$B --json $R/base.json 2>&1 | tee $R/base.txt
VKX_NOCOPY=1 $B --json $R/nocopy.json 2>&1 | tee $R/nocopy.txt
VKX_BUFFERS=5 $B --json $R/buffers5.json 2>&1 | tee $R/buffers5.txt
VKX_RUNAHEAD=4 $B --json $R/runahead4.json 2>&1 | tee $R/runahead4.txt
bash scripts/gpu-python.sh -k "another_gpu or own_tensors" 2>&1 | tee $R/two-gpus-1.4.309.txt
unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh; echo "VK_LAYER_PATH=$VK_LAYER_PATH" >> $R/device.txt
bash scripts/gpu-python.sh -k "another_gpu or own_tensors" 2>&1 | tee $R/two-gpus-1.3.239.txt
