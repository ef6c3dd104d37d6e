# Paced viewer (--kernel: --latency low by default) at odd sizes, validated, both layers; stop by --frames and by SIGINT.
source .xkit/env.sh; export VKCUDA_CACHE_DIR=/tmp/ptx
Xvfb :8 -screen 0 1024x768x24 -nolisten tcp >/dev/null 2>&1 & X=$!; sleep 1; export DISPLAY=:8
for layer in 1.4.309 1.3.239; do
  if [ $layer = 1.3.239 ]; then export VKCUDA_OLD_LAYER=1; fi; source .gl/env.sh
  for size in 1x1 3x5 1021x577; do
    .gpu/vkcuda --kernel shaders/examples/plasma.cu --size $size --frames 300 --validate > /tmp/v.log 2>&1; rc=$?
    echo "$layer $size --frames 300: rc=$rc | $(grep -E 'frames,|validation:|ahead' /tmp/v.log | tr '\n' ' ' | cut -c1-250)"
  done
  .gpu/vkcuda --kernel shaders/examples/sdf.cu --size 7x3 --validate > /tmp/v.log 2>&1 & V=$!
  for i in $(seq 100); do grep -q "latency low" /tmp/v.log && break; sleep 0.1; done; sleep 2; kill -INT $V; wait $V; rc=$?
  echo "$layer 7x3 SIGINT: rc=$rc | $(grep -E 'frames,|validation:|ahead|error' /tmp/v.log | tr '\n' ' ' | cut -c1-250)"
done
kill $X
