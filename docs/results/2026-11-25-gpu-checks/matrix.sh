#!/usr/bin/env bash
# The fault matrix's cuda-fault runs in the buffer layout, 32 at once on one
# GPU (where 30 of 240 runs hung after their error line in stop 38), under
# LAYER (current: 1.4.309, old: 1.3.239). A run alive after RUN_LIMIT s
# (default 120) is reported with its threads' kernel waits and user-space
# stacks (eu-stack, carried in .gpu/tools) and killed. Every 5 s, the
# vkcuda processes in the kernel's uninterruptible sleep (state D) are listed
# with their age and kernel wait (ps-LAYER.txt).
#   [JOBS=32 FRAMES=6 RUN_LIMIT=120] bash matrix.sh LAYER SECONDS [FAULTS]
set -uo pipefail
cd "$(dirname "$0")/../../.."
layer=$1 limit=$2 faults=${3:-cuda-fault}
R=$OUT/r; mkdir -p $R/kept-$layer
trap 'tar czf $OUT/matrix-$layer.tgz -C $OUT r' EXIT
if [ "$layer" = old ]; then unset VK_LAYER_PATH; VKCUDA_OLD_LAYER=1 source .gl/env.sh; else source .gl/env.sh; fi
echo "VK_LAYER_PATH=${VK_LAYER_PATH:-unset}" | tee $R/layer-$layer.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
( while sleep 5; do
    echo "t=$SECONDS $(ps -eo stat=,comm= | awk '$2=="vkcuda"' | wc -l) vkcuda, in D: $(ps -eo pid=,stat=,etimes=,wchan:28=,comm= | awk '$5=="vkcuda" && $2 ~ /^D/ {printf "%s(%ss,%s) ", $1, $3, $4}')"
done >$R/ps-$layer.txt ) &
sampler=$!
export EU_STACK="env LD_LIBRARY_PATH=$PWD/.gpu/tools $PWD/.gpu/tools/eu-stack"
timeout $limit env VKCUDA_BIN=.gpu/vkcuda PRODUCER=cuda ARGS="--layout buffer" FRAMES=${FRAMES:-6} SPREAD=1 JOBS=${JOBS:-32} \
    FAULTS="$faults" KEEP=$R/kept-$layer bash scripts/fault-matrix.sh 2>&1 | tail -400 >$R/faults-$layer.txt
echo "rc=$?" >>$R/faults-$layer.txt
kill $sampler
(dmesg 2>&1 | grep -iE "xid|NVRM" | tail -80) >$R/dmesg-$layer.txt
tail -3 $R/faults-$layer.txt
