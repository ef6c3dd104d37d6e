"""Probe (before the fix): a kernel faults on the caller's stream; what do show, close and exit do?
Run: python3 probe.py every|newest show|frame OUTDIR under timeout 60."""
import sys, time, cupy, vkcuda
mode, where = sys.argv[1], sys.argv[2]
bad = cupy.RawKernel(r'extern "C" __global__ void bad(unsigned char* p) { p[1ull << 44] = 1; }', 'bad')
x = cupy.zeros((33, 17, 4), dtype=cupy.uint8)
s = cupy.cuda.Stream(non_blocking=True)
t0 = time.monotonic()
v = vkcuda.Viewer(out=sys.argv[3], every_frame=(mode == "every"), validate=True)
for i in range(3):
    with s:
        x.fill(i)
    v.show(x, stream=s)
v.flush()
print("before:", v.stats(), flush=True)
try:
    with s:
        bad((1,), (1,), (x,))
    for i in range(200):
        if where == "frame":
            with v.frame(33, 17) as f:
                pass
        else:
            v.show(x, stream=s)
    print("200 shows after the fault, no error", flush=True)
except Exception as e:
    print(f"show: {type(e).__name__}: {e!s:.300} [{time.monotonic()-t0:.1f} s]", flush=True)
try:
    v.close()
    print(f"close: ok [{time.monotonic()-t0:.1f} s]", flush=True)
except Exception as e:
    print(f"close: {type(e).__name__}: {e!s:.300} [{time.monotonic()-t0:.1f} s]", flush=True)
try:
    print("after:", v.stats(), flush=True)
except Exception as e:
    print(f"stats: {type(e).__name__}: {e!s:.300}", flush=True)
