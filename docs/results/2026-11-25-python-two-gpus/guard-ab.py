"""show() of a small NumPy array, headless, no output: median thread-CPU per call, each wheel in turn."""
import statistics, subprocess, sys, time
if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv[1])
    import numpy as np, vkcuda
    x = np.zeros((4, 4, 4), np.uint8)
    with vkcuda.Viewer(every_frame=False) as v:
        for _ in range(500): v.show(x)
        t = []
        for _ in range(5000):
            c = time.thread_time_ns(); v.show(x); t.append(time.thread_time_ns() - c)
        v.flush()
    print(statistics.median(t) / 1000)
    sys.exit()
res = {"before": [], "after": []}
for r in range(5):
    for w in ("before", "after"):
        out = subprocess.run([sys.executable, __file__, f"/tmp/ab/site-{w}"], capture_output=True, text=True,
                             env={"PYTHONPATH": "/work/main/target/python-tools", "PATH": "/usr/bin:/bin"})
        res[w].append(float(out.stdout.strip().splitlines()[-1]))
for w, v in res.items():
    print(w, "median CPU per show (µs), 5 runs:", [round(x, 2) for x in v], "median", round(statistics.median(v), 2))
