"""viser's path for the same frames, as its users have it: the frame made on
the GPU (a torch tensor), copied to the host (`.cpu().numpy()`), JPEG-encoded
on one core (`cv2.imencode`, else PIL, else torchvision: whichever is
installed, named in the output), sent over a WebSocket (a minimal
server from the standard library, speaking the view's frame header so the
same client measures both). The frame is resized to the canvas on the host
first when the canvas is smaller (`cv2.resize`/PIL), as a user would have to.

    python3 viser_path.py WIDTHxHEIGHT CANVAS_WxH PORT_FILE
"""

import base64
import hashlib
import socket
import struct
import sys
import time

import numpy as np
import torch

size = tuple(int(v) for v in sys.argv[1].split("x"))
canvas = tuple(int(v) for v in sys.argv[2].split("x"))
try:
    import cv2

    encoder = "cv2.imencode"

    def encode(rgb, canvas):
        if (rgb.shape[1], rgb.shape[0]) != canvas:
            rgb = cv2.resize(rgb, canvas, interpolation=cv2.INTER_AREA)
        return cv2.imencode(".jpg", rgb[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 80])[1].tobytes()
except ImportError:
    try:
        import io

        from PIL import Image

        encoder = "PIL"

        def encode(rgb, canvas):
            img = Image.fromarray(rgb)
            if img.size != canvas:
                img = img.resize(canvas, Image.BILINEAR)
            out = io.BytesIO()
            img.save(out, "JPEG", quality=80)
            return out.getvalue()
    except ImportError:
        import torchvision.io
        import torch.nn.functional as F

        encoder = "torchvision.io.encode_jpeg (CPU)"

        def encode(rgb, canvas):
            t = torch.from_numpy(rgb).permute(2, 0, 1)
            if (rgb.shape[1], rgb.shape[0]) != canvas:
                t = F.interpolate(t[None].float(), size=(canvas[1], canvas[0]), mode="bilinear")[0].byte()
            return torchvision.io.encode_jpeg(t, quality=80).numpy().tobytes()

print(f"viser path: encoder {encoder}", file=sys.stderr, flush=True)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(1)
open(sys.argv[3], "w").write(str(server.getsockname()[1]))
conn, _ = server.accept()
request = b""
while b"\r\n\r\n" not in request:
    request += conn.recv(4096)
key = [l.split(b":", 1)[1].strip() for l in request.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key")][0]
accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
conn.setblocking(False)

h, w = size[1], size[0]
ys = torch.arange(h, device="cuda", dtype=torch.int32)[:, None]
xs = torch.arange(w, device="cuda", dtype=torch.int32)[None, :]
frame = 0
try:
    while True:
        t = frame
        img = torch.stack([(xs + 4 * t) % 256 + 0 * ys, (ys + 2 * t) % 256 + 0 * xs, ((xs ^ ys) + t) % 256], -1).to(torch.uint8)
        torch.cuda.synchronize()
        stamp = time.time_ns() // 1000
        jpeg = encode(img.cpu().numpy(), canvas)
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
