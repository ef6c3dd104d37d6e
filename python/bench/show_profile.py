"""Where the host time of one show() goes: the parts a call is made of,
timed one by one with the calling thread's CPU clock, for a tiny frame (the
GPU never the bottleneck) and a 1080p one, newest-wins and every frame.

    python3 python/bench/show_profile.py [--frames 5000]

Parts: "current stream" (the wrapper's lookup of torch's current stream),
"__dlpack__" (the capsule torch makes), "native show" (the module's call:
parsing, the pack's launch, the hand-over), "show" (all of it, as users
call it). Medians over --frames calls after a warm-up.
"""

import argparse
import statistics
import time

import torch

import vkcuda
from vkcuda import _current_stream


def median_us(fn, frames, clock=time.thread_time_ns):
    """The median of `frames` calls of `fn` on `clock` (default: this thread's CPU time), in µs."""
    times = []
    for _ in range(frames):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times) / 1000


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=5000)
    a = p.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, vkcuda {vkcuda.__version__}")
    print("| frame | mode | current stream | __dlpack__ | native show | show | show wall |")
    print("|---|---|---|---|---|---|---|")
    for (h, w), dtype in [((64, 64), torch.uint8), ((1080, 1920), torch.uint8), ((1080, 1920), torch.float32)]:
        x = torch.zeros((h, w, 4), dtype=dtype, device="cuda")
        for every in (False, True):
            with vkcuda.Viewer(every_frame=every) as v:
                s = _current_stream(x)
                for _ in range(300):
                    v.show(x)
                v.flush()
                parts = [
                    median_us(lambda: _current_stream(x), a.frames),
                    median_us(lambda: x.__dlpack__(stream=s or 1), a.frames),
                    median_us(lambda: v._native.show(x, stream=s), a.frames),
                    median_us(lambda: v.show(x), a.frames),
                    median_us(lambda: v.show(x), a.frames, time.perf_counter_ns),
                ]
                v.flush()
            mode = "every frame" if every else "newest wins"
            name = f"{w}x{h} {str(dtype).removeprefix('torch.')}"
            print(f"| {name} | {mode} | " + " | ".join(f"{t:.1f} µs" for t in parts) + " |")


if __name__ == "__main__":
    main()
