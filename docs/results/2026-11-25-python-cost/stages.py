import time, statistics, torch, vkcuda
from vkcuda import _native, _current_stream
names = {0: "stream arg + lock", 4: "DLPack parse", 1: "free slot", 2: "pack_into (2 waits, launch, record)",
         3: "run-ahead sync + record", 5: "put + wake", 6: "whole native show", 7: "hasattr x2 + __dlpack_device__", 8: "__dlpack__ call", 9: "capsule parse + Layout", 10: "show_device", 11: "capsule drop", 12: "detach(pack)", 13: "-"}
def t(f, n=3000):
    ts = []
    for _ in range(n):
        c0 = time.thread_time_ns(); f(); ts.append(time.thread_time_ns() - c0)
    return statistics.median(ts) / 1000
x = torch.zeros((64, 64, 4), dtype=torch.uint8, device="cuda")
print("x.__dlpack__(max_version=(1,0))", t(lambda: x.__dlpack__(max_version=(1, 0))))
print("x.__dlpack__(stream=None, max_version=(1,0))", t(lambda: x.__dlpack__(stream=None, max_version=(1, 0))))
print("x.__dlpack__()", t(lambda: x.__dlpack__()))
print("x.__dlpack_device__()", t(lambda: x.__dlpack_device__()))
print("torch.cuda.current_stream()", t(lambda: torch.cuda.current_stream()))
for (h, w), dt in [((64, 64), torch.uint8)]:
    x = torch.zeros((h, w, 4), dtype=dt, device="cuda")
    for every in (False, True):
        with vkcuda.Viewer(every_frame=every) as v:
            s = _current_stream(x)
            for _ in range(300): v.show(x)
            v.flush(); _native.profile()
            cpu = []
            for _ in range(3000):
                c0 = time.thread_time_ns(); v.show(x); cpu.append(time.thread_time_ns() - c0)
            v.flush()
            prof = _native.profile()
        print(f"{w}x{h} {'every' if every else 'newest'}: show CPU median {statistics.median(cpu)/1000:.1f} us")
        for i, wall, c in prof:
            print(f"   {names[i]:40s} wall {wall:7.1f} us  cpu {c:7.1f} us")
