"""show() of a 64x64 RGBA8 torch tensor on the GPU, headless, no output, newest
wins: median thread-CPU per call over 5,000 shows after 500, each wheel in a
process of its own, in turn, 5 runs each. 'before' has no context guard
(55b7643), 'after' the kept one (two cuCtxGetCurrent per call)."""
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
# RUNS runs each (default 5); with ALTERNATE=1 the order of the two flips from run to run.
runs, alternate = int(os.environ.get("RUNS", "5")), os.environ.get("ALTERNATE") == "1"
res = {"before": [], "after": []}
for r in range(runs):
    for w in (("after", "before") if alternate and r % 2 else ("before", "after")):
        out = subprocess.run([sys.executable, __file__, f"/tmp/ab/site-{w}"], capture_output=True, text=True,
                             env=dict(os.environ))
        if out.returncode != 0:
            print(w, "failed:", out.stderr[-2000:]); sys.exit(1)
        res[w].append(float(out.stdout.strip().splitlines()[-1]))
for w, v in res.items():
    print(w, f"median CPU per show (µs), {runs} runs:", [round(x, 2) for x in v], "median", round(statistics.median(v), 2))
