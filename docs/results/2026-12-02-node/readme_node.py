"""The README's Python example on a node with no display: headless and served,
a page's watcher reading the frames back (the page's HTML fetched too)."""
import os, sys, time, urllib.request
import numpy as np, torch, vkcuda

validate = os.environ.get("VALIDATE") == "1"
y, x = torch.meshgrid(torch.arange(270, device="cuda"), torch.arange(480, device="cuda"), indexing="ij")
def rgba(t):
    return torch.stack([(x + 4 * t) % 256, y * 255 // 270, (x // 40 + y // 40) % 2 * 160 + 40, x * 0 + 255], -1).to(torch.uint8)
with vkcuda.Viewer(headless=True, serve=0, validate=validate) as v:
    html = urllib.request.urlopen(v.url, timeout=10).read()
    w = v.watch()
    w.message({"t": "mode", "mode": "raw"})
    w.message({"t": "canvas", "w": 480, "h": 270})
    received = 0
    t0 = time.perf_counter()
    for t in range(600):
        v.show(rgba(t))
        data = w.next(0.0)
        if data:
            received += 1
            w.message({"t": "ack", "frame": vkcuda.frame_header(data)["frame"]})
    elapsed = time.perf_counter() - t0
    final = rgba(599).cpu().numpy()
    deadline, exact = time.monotonic() + 20, None
    while time.monotonic() < deadline and exact is None:
        data = w.next(1.0)
        if not data:
            continue
        h = vkcuda.frame_header(data)
        w.message({"t": "ack", "frame": h["frame"]})
        got = np.frombuffer(data[32:], np.uint8).reshape(h["height"], h["width"], 4)
        if np.abs(got[..., :3].astype(int) - final[..., :3]).max() <= 1:
            exact = h
    stats = v.stats()
print(f"readme example: 600 shows in {elapsed:.2f} s; page {len(html)} bytes; a watcher got {received} frames "
      f"while it ran; the last frame back equal within 1: {exact is not None}; "
      f"validation {stats['validation_errors']} errors, {stats['validation_warnings']} warnings; device {stats.get('device')}")
sys.exit(0 if exact is not None and stats["validation_errors"] + stats["validation_warnings"] == 0 else 1)
