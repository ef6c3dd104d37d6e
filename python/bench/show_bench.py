"""Times vkcuda.Viewer.show with PyTorch tensors beside the CLI's own interop.

For each frame (1080p RGBA8 and RGBA32F by default) and each mode (newest
wins, every frame), a viewer with no output shows the same CUDA tensor
at least `--frames` times and for at least `--seconds` after `--warmup`
shows, on the current stream. Per call it
takes the wall time and the calling thread's CPU time (DLPack, the pack
kernel's launch, the hand-over); per run the rate of shows and of frames
consumed. The CLI line runs `vkcuda --headless --producer cuda` for the same
frame, queue (graphics), layout (buffer), buffers (3) and hand-over.

`--threads` adds, for both sides, each thread's CPU time and how often it
was scheduled (Linux's /proc/<pid>/task/*/schedstat: a thread that sleeps
and wakes is scheduled again), per frame consumed: where the hand-overs
between the caller, the producer and the consumer cost.

    python3 python/bench/show_bench.py --vkcuda target/release/vkcuda [--json out.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import torch

import vkcuda


def thread_clocks(pid="self"):
    """{tid: (name, CPU ns, times scheduled)} for a process's threads (Linux /proc)."""
    clocks = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/schedstat") as f:
                run_ns, _, slices = map(int, f.read().split())
            with open(f"{base}/{tid}/comm") as f:
                name = f.read().strip()
        except (OSError, ValueError):
            continue  # the thread ended between the listing and the read
        clocks[tid] = (name, run_ns, slices)
    return clocks


def per_thread(before, after, frames):
    """{thread name: (CPU µs, times scheduled)} per frame, between two thread_clocks readings."""
    out = {}
    for tid, (name, run_ns, slices) in after.items():
        _, run0, slices0 = before.get(tid, (name, 0, 0))
        cpu, woke = out.get(name, (0.0, 0.0))
        out[name] = (cpu + (run_ns - run0) / 1000 / frames, woke + (slices - slices0) / frames)
    return {k: v for k, v in sorted(out.items()) if v[0] >= 0.5 or v[1] >= 0.05}


def run_python(height, width, dtype, every, frames, warmup, seconds):
    if dtype == "uint8":
        x = torch.randint(0, 256, (height, width, 4), dtype=torch.uint8, device="cuda")
    else:
        x = torch.rand((height, width, 4), dtype=torch.float32, device="cuda")
    with vkcuda.Viewer(every_frame=every) as v:
        for _ in range(warmup):
            v.show(x)
        torch.cuda.synchronize()
        v.flush()
        before = v.stats()
        wall, cpu = [], []
        clocks = thread_clocks()
        started = time.perf_counter()
        # At least `frames` shows and `seconds`: newest wins shows many times the frames
        # consumed, and a short window would mostly time the run's start and its flush.
        while len(wall) < frames or time.perf_counter() - started < seconds:
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            v.show(x)
            cpu.append(time.thread_time_ns() - c0)
            wall.append(time.perf_counter_ns() - w0)
        # Before the flush: it ends the run, and its consumer thread with it.
        threads = thread_clocks()
        v.flush()  # every frame shown is consumed before the clock stops
        elapsed = time.perf_counter() - started
        after = v.stats()
    consumed = after["consumed"] - before["consumed"]
    return {
        "threads": per_thread(clocks, threads, max(consumed, 1)),
        "shows_per_s": len(wall) / elapsed,
        "consumed_per_s": consumed / elapsed,
        "replaced": after["replaced"] - before["replaced"],
        "median_wall_us": statistics.median(wall) / 1000,
        "median_cpu_us": statistics.median(cpu) / 1000,
        "mean_cpu_us": statistics.mean(cpu) / 1000,
        "p90_wall_us": sorted(wall)[int(len(wall) * 0.9)] / 1000,
    }


def run_cli(binary, height, width, fmt, frames):
    """The CLI's fps and its threads' clocks per frame (read while it runs: the last reading before it exits)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "summary.json")
        args = [binary, "--headless", "--producer", "cuda", "--layout", "buffer", "--format", fmt,
                "--queue", "graphics", "--buffers", "3", "--frames", str(frames), "--size", f"{width}x{height}",
                "--dump-every", "0", "--json", out]
        child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first, last = None, {}
        while child.poll() is None:
            try:
                now = thread_clocks(child.pid)
            except OSError:
                break
            first = first or now
            last.update(now)
            time.sleep(0.01)
        log = child.communicate()[0]
        if child.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({child.returncode}):\n{log}")
        with open(out) as f:
            summary = json.load(f)
        return summary["fps"], per_thread(first or {}, last, frames)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vkcuda", default="target/release/vkcuda", help="the CLI binary")
    p.add_argument("--size", default="1920x1080")
    p.add_argument("--frames", type=int, default=3000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--seconds", type=float, default=1.0, help="each Python run shows for at least this long")
    p.add_argument("--repeats", type=int, default=3, help="runs of each line; the median is reported")
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--threads", action="store_true", help="print each thread's CPU and wake-ups per frame")
    p.add_argument("--dtypes", default="uint8,float32", help="the tensors' dtypes (uint8: RGBA8, float32: RGBA32F)")
    p.add_argument("--modes", default="newest,every", help="newest (newest wins), every (every frame), or both")
    a = p.parse_args()
    width, height = map(int, a.size.split("x"))
    rows = []
    formats = {"uint8": "rgba8", "float32": "rgba32f"}
    modes = {"newest": False, "every": True}
    for dtype in a.dtypes.split(","):
        fmt = formats[dtype]
        clis = sorted((run_cli(a.vkcuda, height, width, fmt, a.frames) for _ in range(a.repeats)), key=lambda c: c[0])
        cli, cli_threads = clis[len(clis) // 2]
        for every in (modes[m] for m in a.modes.split(",")):
            runs = [run_python(height, width, dtype, every, a.frames, a.warmup, a.seconds) for _ in range(a.repeats)]
            runs.sort(key=lambda r: r["consumed_per_s"])
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "threads"}
            med.update(frame=f"{a.size} {fmt}", mode="every frame" if every else "newest wins", cli_fps=cli)
            med.update(threads=runs[len(runs) // 2]["threads"], cli_threads=cli_threads)
            med["consumed_vs_cli"] = med["consumed_per_s"] / cli
            rows.append(med)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, vkcuda {vkcuda.__version__}")
    print("| frame | mode | show() calls/s | frames consumed/s | CLI fps | consumed / CLI | replaced "
          "| median wall per call | median CPU per call | mean CPU per call | p90 wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['frame']} | {r['mode']} | {r['shows_per_s']:.0f} | {r['consumed_per_s']:.0f} | {r['cli_fps']:.0f} "
              f"| {r['consumed_vs_cli']:.0%} | {r['replaced']:.0f} | {r['median_wall_us']:.1f} µs "
              f"| {r['median_cpu_us']:.1f} µs | {r['mean_cpu_us']:.1f} µs | {r['p90_wall_us']:.1f} µs |")
    if a.threads:
        print("\nPer frame consumed, each thread's CPU and times scheduled (the median run's):")
        for r in rows:
            for side in ("threads", "cli_threads"):
                who = "show" if side == "threads" else "CLI "
                parts = ", ".join(f"{n}: {c:.1f} µs / {w:.2f}x" for n, (c, w) in r[side].items())
                print(f"- {r['frame']} {r['mode']}, {who}: {parts}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
