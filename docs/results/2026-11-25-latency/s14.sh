# Save-to-screen latency and fps by --latency, H100, CPU-present path under Xvfb.
source .gl/env.sh; source .xkit/env.sh
export VKCUDA_CACHE_DIR=/tmp/ptx
echo "nproc $(nproc); cpu.max $(cat /sys/fs/cgroup/cpu.max 2>/dev/null)"
Xvfb :7 -screen 0 1024x768x24 -nolisten tcp >/dev/null 2>&1 & X=$!; sleep 1; export DISPLAY=:7
k=/tmp/hot/k.cu; mkdir -p /tmp/hot
sol() { printf '#include "vkcuda.h"\nextern "C" __global__ void render(vk_frame f)\n{\n    VK_PIXEL(f, x, y);\n    vk_put8(f.target, x, y, make_uchar4(%s, 255));\n}\n' "$1" > $k; }
for opts in "--size 1021x577" "--size 1021x577 --latency throughput" "--size 1920x1080 --latency throughput" "--size 1920x1080"; do
  echo "=== viewer --kernel k.cu $opts"
  sol "200, 0, 0"
  .gpu/vkcuda --kernel $k $opts > /tmp/hot.log 2>&1 & V=$!
  for i in $(seq 200); do grep -q "for sm_90" /tmp/hot.log && break; sleep 0.1; done; sleep 3
  for c in "0, 200, 0" "0, 0, 200" "200, 200, 0" "0, 200, 200" "200, 0, 200" "90, 90, 90" "10, 90, 10" "90, 10, 90" "20, 20, 20" "60, 0, 0"; do sol "$c"; sleep 1.5; done
  kill -INT $V; wait $V; echo "viewer rc=$?"
  grep -E "on screen|renders from|fps|paced|compiled in" /tmp/hot.log | cut -c1-260
done
kill $X
