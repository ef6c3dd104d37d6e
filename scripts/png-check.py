#!/usr/bin/env python3
"""Decodes every frame_*.png in a folder with zlib alone (no PNG library):
checks the signature, the IHDR size (WIDTHxHEIGHT), 8-bit RGBA, the CRCs, and
that the image data inflates to exactly one filter byte plus width x 4 bytes
per row, with every row's filter in 0..4, and undoes the filters. Prints
"decoded N files WxH" or the first problem, and exits 1 on a problem.
    png-check.py DIR WIDTHxHEIGHT [EXPECTED_COUNT]"""
import struct, sys, zlib, pathlib

def decode(path, w, h, unfilter=True):
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in {kind!r}")
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    if ihdr is None or ihdr[:4] != (w, h, 8, 6):
        raise ValueError(f"IHDR {ihdr} is not {w}x{h} 8-bit RGBA")
    raw = zlib.decompress(idat)
    stride = w * 4
    if len(raw) != h * (stride + 1):
        raise ValueError(f"image data is {len(raw)} bytes, not {h * (stride + 1)}")
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        if not unfilter:
            if f > 4:
                raise ValueError(f"row {y} has filter {f}")
            continue
        row = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f > 4:
            raise ValueError(f"row {y} has filter {f}")
        for i in range(stride):
            a = row[i - 4] if i >= 4 else 0
            b, c = prev[i], (prev[i - 4] if i >= 4 else 0)
            if f == 1: row[i] = (row[i] + a) & 255
            elif f == 2: row[i] = (row[i] + b) & 255
            elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = row

def main():
    folder, size = pathlib.Path(sys.argv[1]), sys.argv[2]
    w, h = map(int, size.split("x"))
    files = sorted(folder.glob("frame_*.png"))
    others = [p.name for p in folder.iterdir() if not p.name.startswith("frame_") or p.suffix != ".png"]
    if others:
        print(f"png-check: not frames: {others[:5]}"); sys.exit(1)
    if len(sys.argv) > 3 and len(files) != int(sys.argv[3]):
        print(f"png-check: {len(files)} files, expected {sys.argv[3]}"); sys.exit(1)
    for p in files:
        try:
            # Undoing the filters is slow in Python: done for frames up to 1 Mpixel.
            decode(p, w, h, unfilter=w * h <= 1 << 20)
        except Exception as e:
            print(f"png-check: {p.name}: {e}"); sys.exit(1)
    print(f"decoded {len(files)} files {size}")

main()
