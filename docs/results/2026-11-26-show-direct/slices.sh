set -uo pipefail
source .gl/env.sh >/dev/null
rm -rf /tmp/s-exp; python3 -m pip install -q --no-index --no-deps --target /tmp/s-exp .gpu/wheels-exp/vkcuda-*.whl
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
for F in "" f32; do for sl in 20 100 300 1000; do
  echo -n "newest $F slice $sl: "; VKX_SLICE_US=$sl PYTHONPATH=/tmp/s-exp python3 - newest $F <<'PY'
import sys, time, statistics, torch, vkcuda
x = torch.randint(0, 256, (1080, 1920, 4), dtype=torch.uint8, device="cuda") if len(sys.argv) < 3 else torch.rand((1080, 1920, 4), dtype=torch.float32, device="cuda")
with vkcuda.Viewer(every_frame=False) as v:
    for i in range(300): v.show(x)
    torch.cuda.synchronize(); v.flush()
    t = time.perf_counter(); n = 0; cpu = []
    while time.perf_counter() - t < 0.6:
        c0 = time.thread_time_ns(); v.show(x); cpu.append(time.thread_time_ns() - c0); n += 1
    t1 = time.perf_counter(); v.flush(); t2 = time.perf_counter()
    s = v.stats()
    print("shows %.0f/s consumed %.0f/s cpu/call median %.1f mean %.1f us" % (n / (t1 - t), (s["consumed"] - 300) / (t2 - t), statistics.median(cpu) / 1e3, sum(cpu) / n / 1e3))
PY
done; done
for f in rgba8 rgba32f; do .gpu/vkcuda --headless --producer cuda --layout buffer --format $f --size 1920x1080 --queue graphics --buffers 3 --frames 4000 --dump-every 0 2>&1 | grep fps; done
