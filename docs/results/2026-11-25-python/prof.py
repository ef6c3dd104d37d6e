import time, statistics, torch, vkcuda
from vkcuda import _current_stream
x = torch.randint(0, 256, (1080, 1920, 4), dtype=torch.uint8, device="cuda")
def t(f, n=3000):
    for _ in range(200): f()
    ts = []
    for _ in range(n):
        a = time.perf_counter_ns(); f(); ts.append(time.perf_counter_ns() - a)
    return statistics.median(ts) / 1000
s = _current_stream(x)
print("current_stream", t(lambda: _current_stream(x)))
print("dlpack_device", t(lambda: x.__dlpack_device__()))
print("dlpack(stream=s)", t(lambda: x.__dlpack__(stream=s if s else 1, max_version=(1, 0))))
print("dlpack()", t(lambda: x.__dlpack__(max_version=(1, 0))))
with vkcuda.Viewer() as v:
    print("show", t(lambda: v.show(x)))
    print("show(stream=s)", t(lambda: v.show(x, stream=s)))
    print("native show", t(lambda: v._native.show(x, channels_first=False, block=None, stream=s)))
    print("stats", v.stats()["replaced"])
