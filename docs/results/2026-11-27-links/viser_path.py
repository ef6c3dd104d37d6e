"""viser's path for the same frames, as its users have it, for link_bench:
the julia frame made on the GPU (a torch tensor, the project's fixed-point
julia at the frame's tick, in integers as the CUDA scene computes it), copied
to the host (`.cpu().numpy()`), resized to the canvas on the host
(`cv2.resize`, INTER_AREA), JPEG-encoded at quality 80 on one core
(`cv2.imencode`), sent over a WebSocket as fast as the socket takes it (a
JPEG loop without acknowledgements; TCP's back-pressure is its only pacing).
Speaks the view's version-1 frame header so link_bench measures both.

    python3 viser_path.py WIDTHxHEIGHT CANVAS_WxH BIND_ADDR:PORT
Prints "watch it at http://ADDR:PORT/" on stderr once listening.
"""

import base64
import hashlib
import math
import socket
import struct
import sys
import time

import cv2
import torch

size = tuple(int(v) for v in sys.argv[1].split("x"))
canvas = tuple(int(v) for v in sys.argv[2].split("x"))
host, port = sys.argv[3].rsplit(":", 1)
FRAC, COST = 28, 64
w, h = size
xs = torch.arange(w, device="cuda", dtype=torch.int64)[None, :]
ys = torch.arange(h, device="cuda", dtype=torch.int64)[:, None]


def julia(t):
    """crates/run/src/scene/mod.rs's julia at tick t, RGB."""
    one = float(1 << FRAC)
    angle = 2.2 + t * 0.01
    cr, ci = int(round(0.7885 * math.cos(angle) * one)), int(round(0.7885 * math.sin(angle) * one))
    step = int(3.2 * one / max(w, h))
    zr = ((xs - w // 2) * step).expand(h, w).clone()
    zi = ((ys - h // 2) * step).expand(h, w).clone()
    escaped = torch.full((h, w), COST, device="cuda", dtype=torch.int64)
    four = 4 << FRAC
    for k in range(COST):
        zr2, zi2 = (zr * zr) >> FRAC, (zi * zi) >> FRAC
        escaped = torch.where((escaped == COST) & (zr2 + zi2 > four), k, escaped)
        active = escaped == COST
        zi = torch.where(active, ((2 * zr * zi) >> FRAC) + ci, zi)
        zr = torch.where(active, zr2 - zi2 + cr, zr)
    n = (escaped * 7 + t) & 0xFFFFFFFF
    rgb = torch.stack([n & 255, ((n * 3) >> 1) & 255, 255 - (n & 255)], -1)
    inside = (escaped == COST)[..., None]
    return torch.where(inside, torch.tensor([16, 12, 40], device="cuda"), rgb).to(torch.uint8)


server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((host, int(port)))
server.listen(1)
print(f"viser path: encoder cv2.imencode; watch it at http://{host}:{server.getsockname()[1]}/", file=sys.stderr, flush=True)
conn, _ = server.accept()
request = b""
while b"\r\n\r\n" not in request:
    request += conn.recv(4096)
key = [l.split(b":", 1)[1].strip() for l in request.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key")][0]
accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
conn.setblocking(False)
frame = 0
try:
    while True:
        img = julia(frame)
        torch.cuda.synchronize()
        stamp = time.time_ns() // 1000
        rgb = img.cpu().numpy()
        if (w, h) != canvas:
            rgb = cv2.resize(rgb, canvas, interpolation=cv2.INTER_AREA)
        jpeg = cv2.imencode(".jpg", rgb[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 80])[1].tobytes()
        payload = b"VKF1" + bytes([1, 0, 0, 0]) + struct.pack("<QIIQ", frame, canvas[0], canvas[1], stamp) + jpeg
        n = len(payload)
        head = bytes([0x82, 127]) + struct.pack(">Q", n) if n > 65535 else bytes([0x82, 126]) + struct.pack(">H", n)
        conn.setblocking(True)
        conn.sendall(head + payload)
        conn.setblocking(False)
        try:
            if conn.recv(65536) == b"":
                break
        except BlockingIOError:
            pass
        frame += 1
except (BrokenPipeError, ConnectionResetError):
    pass
