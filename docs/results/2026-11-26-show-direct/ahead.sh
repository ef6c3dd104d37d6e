set -uo pipefail
source .gl/env.sh >/dev/null
rm -rf /tmp/s-exp; python3 -m pip install -q --no-index --no-deps --target /tmp/s-exp .gpu/wheels-exp/vkcuda-*.whl
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
for r in 1 2; do for F in f32 ""; do for cfg in "VKX_RUNAHEAD=2" "VKX_RUNAHEAD=1" "VKX_RUNAHEAD=3" "VKX_DROP=1"; do
  echo -n "newest $F $cfg: "; env $cfg PYTHONPATH=/tmp/s-exp python3 - newest $F <<'PY'
import sys, time, statistics, torch, vkcuda
x = torch.randint(0, 256, (1080, 1920, 4), dtype=torch.uint8, device="cuda") if len(sys.argv) < 3 else torch.rand((1080, 1920, 4), dtype=torch.float32, device="cuda")
with vkcuda.Viewer(every_frame=False) as v:
    for i in range(300): v.show(x)
    torch.cuda.synchronize(); v.flush()
    t = time.perf_counter(); n = 0; cpu = []
    while time.perf_counter() - t < 1.0:
        c0 = time.thread_time_ns(); v.show(x); cpu.append(time.thread_time_ns() - c0); n += 1
    t1 = time.perf_counter(); v.flush(); t2 = time.perf_counter()
    s = v.stats()
    print("shows %.0f/s consumed %.0f/s cpu/call median %.1f mean %.1f us" % (n / (t1 - t), (s["consumed"] - 300) / (t2 - t), statistics.median(cpu) / 1e3, sum(cpu) / n / 1e3))
PY
done; done
for f in rgba32f rgba8; do .gpu/vkcuda --headless --producer cuda --layout buffer --format $f --size 1920x1080 --queue graphics --buffers 3 --frames 5000 --dump-every 0 2>&1 | grep fps; done; done
