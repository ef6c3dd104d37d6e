#!/usr/bin/env bash
# The matrices at their new CUDA defaults (JOBS at most 16; the fault matrix's
# RUN_LIMIT 15 x JOBS) in the buffer layout: the fault matrix (FRAMES=3
# SPREAD=1, every fault) under 1.3.239, where stop 38's run did not finish,
# then the stall matrix under 1.4.309, each bounded in time; `swap`: each
# under the other layer.
#   bash matrices16.sh [swap]
set -uo pipefail
cd "$(dirname "$0")/../../.."
R=$OUT/r; mkdir -p $R/kept
trap 'tar czf $OUT/matrices16${1:-}.tgz -C $OUT r' EXIT
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
export EU_STACK="env LD_LIBRARY_PATH=$PWD/.gpu/tools $PWD/.gpu/tools/eu-stack"
export VKCUDA_BIN=.gpu/vkcuda PRODUCER=cuda ARGS="--layout buffer" KEEP=$R/kept
old() { unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh; }
new() { unset VK_LAYER_PATH; source .gl/env.sh; }
if [ "${1:-}" = swap ]; then first=new second=old fl=1.4.309 sl=1.3.239; else first=old second=new fl=1.3.239 sl=1.4.309; fi
$first; echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer-faults.txt
start=$SECONDS
timeout 300 env FRAMES=3 SPREAD=1 bash scripts/fault-matrix.sh 2>&1 | tail -300 >$R/faults-16-$fl.txt
echo "rc=$? in $((SECONDS - start)) s" >>$R/faults-16-$fl.txt; tail -2 $R/faults-16-$fl.txt
$second; echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer-stalls.txt
start=$SECONDS
timeout 200 bash scripts/stall-matrix.sh 2>&1 | tail -300 >$R/stalls-16-$sl.txt
echo "rc=$? in $((SECONDS - start)) s" >>$R/stalls-16-$sl.txt; tail -2 $R/stalls-16-$sl.txt
