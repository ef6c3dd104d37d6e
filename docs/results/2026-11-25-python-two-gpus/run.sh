#!/usr/bin/env bash
# On nvidia-h100-x2, the final build: the Python suite (two-GPU tests
# included) under each layer, the show bench with the thread profile, then the
# fault and stall matrices of the CUDA producer in the buffer layout (whose
# headless copy is the compute shader) under each layer.
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R
trap 'tar czf $OUT/two-gpus.tgz -C $OUT r' EXIT
layer() {  # 1.4.309, or 1.3.239 with "old"
    unset VK_LAYER_PATH VKCUDA_OLD_LAYER
    [ "$1" = old ] && export VKCUDA_OLD_LAYER=1
    source .gl/env.sh
    echo "$1: VK_LAYER_PATH=${VK_LAYER_PATH:-unset: the 1.3.239 layer of Debian 12 in /usr/share}" >> $R/device.txt
}
nvidia-smi --query-gpu=index,name,driver_version,uuid --format=csv,noheader > $R/device.txt
export PYTHONUNBUFFERED=1 JOBS=32 VKCUDA_BIN=.gpu/vkcuda PRODUCER=cuda
for l in new old; do
    layer $l; n=$([ $l = new ] && echo 1.4.309 || echo 1.3.239)
    bash scripts/gpu-python.sh 2>&1 | tail -8 > $R/gpu-python-$n.txt
    ( PYTHONPATH=/tmp/vkcuda-site bash -c 'python3 -m pytest -p no:cacheprovider -q -rA python/tests/test_gpu.py -k "another_gpu or own_tensors" -s' 2>&1 | grep -E "passed|failed|RuntimeError|tensor is on" | tail -6 ) > $R/two-gpus-$n.txt
done
layer new
PYTHONPATH=/tmp/vkcuda-site python3 python/bench/show_bench.py --vkcuda .gpu/vkcuda --threads --repeats 3 --json $R/show-bench.json > $R/show-bench.txt 2>&1
for l in new old; do
    layer $l; n=$([ $l = new ] && echo 1.4.309 || echo 1.3.239)
    .gpu/vkcuda --headless --producer cuda --layout buffer --size 61x33 --frames 8 --verify --validate --out /tmp/wc-$n > $R/which-copy-$n.txt 2>&1
    FRAMES=6 SPREAD=1 ARGS="--layout buffer" bash scripts/fault-matrix.sh 2>&1 | tail -4 > $R/faults-buffer-$n.txt
    ARGS="--layout buffer" bash scripts/stall-matrix.sh 2>&1 | tail -4 > $R/stalls-buffer-$n.txt
done
grep -h "passed\|failed" $R/*.txt
