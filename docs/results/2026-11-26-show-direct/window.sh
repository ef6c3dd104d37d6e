set -uo pipefail
R=$OUT/r; mkdir -p $R
source .gl/env.sh >/dev/null
for w in wheels wheels-new; do rm -rf /tmp/s-$w; python3 -m pip install -q --no-index --no-deps --target /tmp/s-$w .gpu/$w/vkcuda-*.whl; done
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
for r in 1 2; do for F in "" f32; do for w in wheels wheels-new; do for mode in every newest; do
  echo -n "$w $mode $F: "; PYTHONPATH=/tmp/s-$w python3 - $mode $F <<'PY'
import sys, time, torch, vkcuda
every = sys.argv[1] == "every"
x = torch.randint(0, 256, (1080, 1920, 4), dtype=torch.uint8, device="cuda") if len(sys.argv) < 3 else torch.rand((1080, 1920, 4), dtype=torch.float32, device="cuda")
with vkcuda.Viewer(every_frame=every) as v:
    for i in range(300): v.show(x)
    torch.cuda.synchronize(); v.flush()
    t = time.perf_counter(); n = 0; c = time.thread_time()
    while time.perf_counter() - t < 0.6:
        v.show(x); n += 1
    c = time.thread_time() - c
    t1 = time.perf_counter(); v.flush(); t2 = time.perf_counter()
    s = v.stats()
    print("shows %.0f/s consumed %.0f/s cpu/call %.1f us" % (n / (t1 - t), (s["consumed"] - 300) / (t2 - t), c / n * 1e6))
PY
done; done; done
for f in rgba8 rgba32f; do .gpu/vkcuda --headless --producer cuda --layout buffer --format $f --size 1920x1080 --queue graphics --buffers 3 --frames 4000 --dump-every 0 2>&1 | grep fps; done
done
