"""show() of a 64x64 RGBA8 torch tensor on the GPU, headless, no output, newest
wins: median thread-CPU per call over 5,000 shows after 500, each wheel (in
/tmp/ab/site-before and site-after) in a process of its own, 10 runs each, the
order of the two alternating from run to run."""
import os, statistics, subprocess, sys, time
if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv[1])
    import torch, vkcuda
    x = torch.zeros((64, 64, 4), dtype=torch.uint8, device="cuda")
    with vkcuda.Viewer(every_frame=False) as v:
        for _ in range(500): v.show(x)
        t = []
        for _ in range(5000):
            c = time.thread_time_ns(); v.show(x); t.append(time.thread_time_ns() - c)
        v.flush()
    print(statistics.median(t) / 1000)
    sys.exit()
res = {"before": [], "after": []}
for r in range(10):
    for w in (("before", "after") if r % 2 == 0 else ("after", "before")):
        out = subprocess.run([sys.executable, __file__, f"/tmp/ab/site-{w}"], capture_output=True, text=True,
                             env=dict(os.environ))
        if out.returncode != 0:
            print(w, "failed:", out.stderr[-2000:]); sys.exit(1)
        res[w].append(float(out.stdout.strip().splitlines()[-1]))
for w, v in res.items():
    print(w, "median CPU per show (µs), 10 runs:", [round(x, 2) for x in v], "median", round(statistics.median(v), 2))
