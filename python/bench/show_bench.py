"""Times vkcuda.Viewer.show with PyTorch tensors beside the CLI's own interop.

For each frame (1080p RGBA8 and RGBA32F by default) and each mode (newest
wins, every frame), a viewer with no output shows the same CUDA tensor
`--frames` times after `--warmup` shows, on the current stream. Per call it
takes the wall time and the calling thread's CPU time (DLPack, the pack
kernel's launch, the hand-over); per run the rate of shows and of frames
consumed. The CLI line runs `vkcuda --headless --producer cuda` for the same
frame, queue (graphics), layout (buffer), buffers (3) and hand-over.

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


def run_python(height, width, dtype, every, frames, warmup):
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
        started = time.perf_counter()
        for _ in range(frames):
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            v.show(x)
            cpu.append(time.thread_time_ns() - c0)
            wall.append(time.perf_counter_ns() - w0)
        v.flush()  # every frame shown is consumed before the clock stops
        elapsed = time.perf_counter() - started
        after = v.stats()
    consumed = after["consumed"] - before["consumed"]
    return {
        "shows_per_s": frames / elapsed,
        "consumed_per_s": consumed / elapsed,
        "replaced": after["replaced"] - before["replaced"],
        "median_wall_us": statistics.median(wall) / 1000,
        "median_cpu_us": statistics.median(cpu) / 1000,
        "p90_wall_us": sorted(wall)[int(len(wall) * 0.9)] / 1000,
    }


def run_cli(binary, height, width, fmt, frames):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "summary.json")
        args = [binary, "--headless", "--producer", "cuda", "--layout", "buffer", "--format", fmt,
                "--queue", "graphics", "--buffers", "3", "--frames", str(frames), "--size", f"{width}x{height}",
                "--dump-every", "0", "--json", out]
        subprocess.run(args, check=True, capture_output=True, text=True)
        with open(out) as f:
            return json.load(f)["fps"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vkcuda", default="target/release/vkcuda", help="the CLI binary")
    p.add_argument("--size", default="1920x1080")
    p.add_argument("--frames", type=int, default=3000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3, help="runs of each line; the median is reported")
    p.add_argument("--json", help="write the results here too")
    a = p.parse_args()
    width, height = map(int, a.size.split("x"))
    rows = []
    for dtype, fmt in [("uint8", "rgba8"), ("float32", "rgba32f")]:
        cli = statistics.median(run_cli(a.vkcuda, height, width, fmt, a.frames) for _ in range(a.repeats))
        for every in (False, True):
            runs = [run_python(height, width, dtype, every, a.frames, a.warmup) for _ in range(a.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            med.update(frame=f"{a.size} {fmt}", mode="every frame" if every else "newest wins", cli_fps=cli)
            med["consumed_vs_cli"] = med["consumed_per_s"] / cli
            rows.append(med)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, vkcuda {vkcuda.__version__}")
    print("| frame | mode | show() calls/s | frames consumed/s | CLI fps | consumed / CLI | replaced "
          "| median wall per call | median CPU per call | p90 wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['frame']} | {r['mode']} | {r['shows_per_s']:.0f} | {r['consumed_per_s']:.0f} | {r['cli_fps']:.0f} "
              f"| {r['consumed_vs_cli']:.0%} | {r['replaced']:.0f} | {r['median_wall_us']:.1f} µs "
              f"| {r['median_cpu_us']:.1f} µs | {r['p90_wall_us']:.1f} µs |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
