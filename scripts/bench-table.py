#!/usr/bin/env python3
"""Turns `vkcuda bench --json` output into the README's results table.

    scripts/bench-table.py BENCH.json [MORE.json ...]            # print Markdown
    scripts/bench-table.py BENCH.json ... --readme README.md     # rewrite the table in place
    scripts/bench-table.py BENCH.json ... --size 1920x1080       # only these sizes' rows

Several JSON files (e.g. one per --queues run) are merged; they must come
from the same device and driver. The README's table sits between the lines
`<!-- bench-table:begin -->` and `<!-- bench-table:end -->`.
"""

import argparse
import json
import os
import sys

BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"


def load(paths):
    reports = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            reports.append(json.load(f))
    first = reports[0]
    for r in reports[1:]:
        if (r["device"], r["driver"]) != (first["device"], first["driver"]):
            sys.exit(f"bench-table: {paths} come from different devices or drivers")
    rows = [row for r in reports for row in r["rows"]]
    variants = {}
    for r in reports:
        for name, text in r["variants"]:
            variants.setdefault(name, text)
    return first, rows, variants


def num(v, digits=1):
    return "–" if v is None else f"{v:,.{digits}f}"


def find(rows, **want):
    for row in rows:
        if all(row[k] == v for k, v in want.items()) and row["fps"] is not None:
            return row
    return None


def targets(rows):
    """The issue's three targets, checked on 1920x1080, as Markdown lines."""
    out = []
    cheap = [r for r in rows if r["size"] == "1920x1080" and r["load"] == "cheap" and r["fps"]]
    splits = [r for r in cheap if r["variant"].startswith("split-")]
    if splits:
        best = max(splits, key=lambda r: r["fps"])
        out.append(
            f"- interop split ≥ 10,000 fps (1920x1080, cheap): best {best['variant']} on the "
            f"{best['queue']} queue, **{best['fps']:,.0f} fps** "
            f"({'met' if best['fps'] >= 10_000 else 'not met'})"
        )
        for queue in sorted({r["queue"] for r in cheap}):
            staging = find(rows, size="1920x1080", load="cheap", variant="staging", queue=queue)
            split = max((r for r in splits if r["queue"] == queue), key=lambda r: r["fps"], default=None)
            if staging and split:
                ratio = split["fps"] / staging["fps"]
                out.append(
                    f"- interop split ≥ 5× staging ({queue} queue): {split['variant']} {split['fps']:,.0f} fps / "
                    f"staging {staging['fps']:,.0f} fps = **{ratio:.1f}×** ({'met' if ratio >= 5 else 'not met'})"
                )
    for queue in sorted({r["queue"] for r in rows}):
        one = find(rows, size="1920x1080", load="balanced", variant="split-1", queue=queue)
        two = find(rows, size="1920x1080", load="balanced", variant="split-2", queue=queue)
        if one and two:
            ratio = two["fps"] / one["fps"]
            out.append(
                f"- balanced load, 2 buffers ≥ 1.8× 1 buffer ({queue} queue): {two['fps']:,.0f} / {one['fps']:,.0f} fps "
                f"= **{ratio:.2f}×** ({'met' if ratio >= 1.8 else 'not met'})"
            )
    return out


def markdown(meta, rows, variants, sizes=None):
    lines = [
        f"Device: {meta['device']}, driver {meta['driver']}, CUDA {meta['cuda'] or 'none'}; "
        f"{meta['date']}; median of {meta['repeats']} repeats × {meta['seconds']} s after warm-up "
        f"(`vkcuda bench`, vkcuda {meta['version']}).",
        "",
        "| queue | load | size | variant | fps | µs/frame | render µs | Vulkan µs | producer CPU µs | consumer CPU µs | rendered→consumed µs |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if sizes and r["size"] not in sizes:
            continue
        load = r["load"] if r["load"] == "cheap" else f"balanced ({r['cost']} it, {r['copies']} copies)"
        if r["skipped"]:
            lines.append(f"| {r['queue']} | {load} | {r['size']} | {r['variant']} | skipped: {r['skipped']} |||||||")
            continue
        lines.append(
            f"| {r['queue']} | {load} | {r['size']} | {r['variant']} | {num(r['fps'], 0)} | {num(r['us_per_frame'])} "
            f"| {num(r['render_us'])} | {num(r['vulkan_us'])} | {num(r['producer_cpu_us'])} "
            f"| {num(r['consumer_cpu_us'])} | {num(r['latency_us'])} |"
        )
    lines += ["", "Targets (issue 4), from the same rows:", ""] + targets(rows)
    lines += ["", "Variants:", ""] + [f"- `{name}`: {text}." for name, text in variants.items()]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", help="vkcuda bench --json output(s)")
    ap.add_argument("--readme", help="rewrite the table between the bench-table markers of this file")
    ap.add_argument("--size", action="append", help="only rows of this size (repeatable); targets use all rows")
    a = ap.parse_args()
    try:
        table = markdown(*load(a.json), sizes=a.size)
    except (OSError, ValueError, KeyError, IndexError) as e:
        sys.exit(f"bench-table: cannot read {a.json}: {e!r}")
    if not a.readme:
        sys.stdout.write(table)
        return
    with open(a.readme, encoding="utf-8") as f:
        text = f.read()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        sys.exit(f"bench-table: {a.readme} needs one '{BEGIN}' line before one '{END}' line")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    tmp = a.readme + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(head + BEGIN + "\n" + table + END + tail)
    os.replace(tmp, a.readme)
    print(f"bench-table: rewrote the table in {a.readme} ({len(table.splitlines())} lines)")


if __name__ == "__main__":
    main()
