#!/usr/bin/env bash
# base = ec359dc; new = shader copy of buffer frames on compute-capable queues + exact-indexed buffer draw.
set -u
source .gl/env.sh
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/r/device.txt
date -u | tee -a $OUT/r/device.txt
for round in 1 2; do
  for b in base new; do
    .gpu/vkcuda-$b bench --variants split-2,draw-2 --queues graphics,compute --sizes 1920x1080 --formats rgba8,rgba32f \
      --layouts array,buffer --loads cheap --repeats 3 --json $OUT/r/bench-$b-$round.json > $OUT/r/bench-$b-$round.txt 2>&1
    echo "bench $b $round rc=$?"
  done
done
for layer in new old; do
  [ $layer = old ] && export VKCUDA_OLD_LAYER=1 && source .gl/env.sh
  for q in compute graphics; do
    VKCUDA_BIN=.gpu/vkcuda-new PRODUCER=cuda ARGS="--queue $q" bash scripts/format-matrix.sh > $OUT/r/format-matrix-$q-$layer.txt 2>&1
    echo "format $q $layer: $(tail -1 $OUT/r/format-matrix-$q-$layer.txt)"
  done
  VKCUDA_BIN=.gpu/vkcuda-new PRODUCER=cuda ARGS="--layout buffer --queue compute" bash scripts/size-matrix.sh > $OUT/r/size-matrix-buffer-compute-$layer.txt 2>&1
  echo "size $layer: $(tail -1 $OUT/r/size-matrix-buffer-compute-$layer.txt)"
  VKCUDA_BIN=.gpu/vkcuda-new PRODUCER=cuda bash scripts/draw-matrix.sh > $OUT/r/draw-matrix-$layer.txt 2>&1
  echo "draw $layer: $(tail -1 $OUT/r/draw-matrix-$layer.txt)"
done
.gpu/vkcuda-new --headless --producer cuda --layout buffer --queue compute --frames 3 --dump-every 0 2>&1 | grep -i "copies each" | tee $OUT/r/which-copy.txt
.gpu/vkcuda-new --headless --producer cuda --layout buffer --frames 3 --dump-every 0 2>&1 | grep -i "copies each" | tee -a $OUT/r/which-copy.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
