#!/usr/bin/env python3
"""Where one frame's time goes when CUDA and Vulkan take turns on one image
(split-1, cheap load): a stacked bar per queue, from `vkcuda bench` JSON.

kernel          CUDA events around the kernel (render_us)
CUDA -> Vulkan  rendered -> consumed (latency_us) minus the Vulkan work
Vulkan work     timestamp queries around the consume step (vulkan_us)
Vulkan -> CUDA  the rest of the frame (us_per_frame - kernel - latency)

usage: scripts/handover-picture.py BENCH.json OUT.svg
"""
import json
import sys

report = json.load(open(sys.argv[1]))
rows = [r for r in report["rows"] if r["variant"] == "split-1" and r["load"] == "cheap" and r["fps"]]
parts = [("kernel", "#1b9e77"), ("CUDA → Vulkan", "#d95f02"), ("Vulkan work", "#7570b3"), ("Vulkan → CUDA", "#e7298a")]
width, label, bar = 900, 150, 26
scale = (width - label - 120) / max(r["us_per_frame"] for r in rows)
out = []
y = 60
for r in rows:
    kernel, vk, lat, frame = r["render_us"], r["vulkan_us"], r["latency_us"], r["us_per_frame"]
    segs = [kernel, max(lat - vk, 0), vk, max(frame - kernel - lat, 0)]
    out.append(f'<text x="{label - 8}" y="{y + 18}" font-size="13" text-anchor="end">{r["queue"]} queue</text>')
    x = label
    for (name, color), us in zip(parts, segs):
        w = us * scale
        out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}" fill="{color}"><title>{name}: {us:.1f} µs</title></rect>')
        if w > 34:
            out.append(f'<text x="{x + w / 2:.1f}" y="{y + 17}" font-size="11" fill="#fff" text-anchor="middle">{us:.0f}</text>')
        x += w
    out.append(f'<text x="{x + 6:.1f}" y="{y + 18}" font-size="12">{frame:.0f} µs/frame</text>')
    y += bar + 14
lx = label
for name, color in parts:
    out.append(f'<rect x="{lx}" y="{y + 4}" width="12" height="12" fill="{color}"/><text x="{lx + 16}" y="{y + 14}" font-size="12">{name}</text>')
    lx += 150
y += 30
title = f'One split-1 frame at 1920x1080 (cheap load), µs: {report["device"]}, {report["driver"]}, {report["date"]}'
svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" viewBox="0 0 {width} {y}" font-family="sans-serif">\n'
       f'<rect width="100%" height="100%" fill="#fff"/>\n<text x="10" y="28" font-size="15">{title}</text>\n' + "\n".join(out) + "\n</svg>\n")
open(sys.argv[2], "w").write(svg)
