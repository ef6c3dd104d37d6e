"""The Python module's browser view (``serve=``), with NumPy arrays on this
machine's Vulkan (lavapipe in CI): a WebSocket client (websocket-client, as a
browser would) gets each shown frame drawn at its canvas size, exactly at
1:1; the pointer and keys it sends reach ``pointer()`` and ``keys()``; a port
in use is an ``OSError`` before the GPU is opened; ``close()`` frees the port.
The validation layer is on and no message is allowed. The page itself is
tested in a real browser by the CLI's end-to-end tests (tests/e2e/browser.rs).
"""

import json
import shutil
import socket
import time

import numpy as np
import pytest

import vkcuda

websocket = pytest.importorskip("websocket", reason="websocket-client is not installed")


def port_of(url):
    return int(url.split(":")[2].split("/")[0])


def connect(url, canvas, mode="raw"):
    ws = websocket.create_connection(f"ws://127.0.0.1:{port_of(url)}/ws", timeout=30)
    ws.send(json.dumps({"t": "mode", "mode": mode}))
    ws.send(json.dumps({"t": "canvas", "w": canvas[0], "h": canvas[1]}))
    return ws


def next_frame(ws, v, image, deadline):
    """Shows `image` until the client gets a frame; the frame's header fields and pixels."""
    ws.settimeout(0.05)
    while time.monotonic() < deadline:
        v.show(image)
        try:
            data = ws.recv()
        except websocket.WebSocketTimeoutException:
            continue
        if isinstance(data, bytes):
            h = vkcuda.frame_header(data)
            ws.send(json.dumps({"t": "ack", "frame": h["frame"]}))
            return h["kind"], h["frame"], (h["width"], h["height"]), data[32:]
    raise AssertionError("no frame came in 60 s")


def wait_until(check, what):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"not after 30 s: {what}")


def test_a_served_viewer_sends_each_frame_at_the_canvas_size():
    h, w = 48, 64
    image = np.zeros((h, w, 4), np.uint8)
    image[..., 0] = (np.arange(w) * 4)[None, :]
    image[..., 1] = (np.arange(h) * 5)[:, None]
    image[..., 2] = 200
    image[..., 3] = 255
    with vkcuda.Viewer(serve=0, validate=True) as v:
        assert v.url.startswith("http://127.0.0.1:"), v.url
        exact = connect(v.url, (w, h))
        kind, _, size, pixels = next_frame(exact, v, image, time.monotonic() + 60)
        assert (kind, size) == ("raw", (w, h))
        got = np.frombuffer(pixels, np.uint8).reshape(h, w, 4)
        assert np.abs(got[..., :3].astype(int) - image[..., :3]).max() <= 1
        # Another client, another size and JPEG: its own draw.
        small = connect(v.url, (32, 24), "jpeg")
        kind, _, size, pixels = next_frame(small, v, image, time.monotonic() + 60)
        assert (kind, size) == ("jpeg", (32, 24)) and pixels[:2] == b"\xff\xd8"
        # The pointer and keys the page sends reach the caller, in frame pixels.
        exact.send(json.dumps({"t": "pointer", "x": 10.5, "y": 20.5, "buttons": 1}))
        exact.send(json.dumps({"t": "key", "key": " "}))
        assert wait_until(v.pointer, "the pointer") == (10, 20, 1)
        assert wait_until(v.keys, "the keys") == [" "]
        assert v.keys() == []
        exact.send(json.dumps({"t": "pointer", "buttons": 0}))
        wait_until(lambda: v.pointer() is None, "the pointer leaving")
        port = port_of(v.url)
        stats = v.stats()
    assert (stats["validation_errors"], stats["validation_warnings"]) == (0, 0)
    with socket.socket() as s:
        # Free once the viewer is closed: a server can listen there again (as servers
        # do, with SO_REUSEADDR: the closed connections' TIME_WAIT does not count).
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()



def page_status(ws, deadline, wanted):
    """Status messages the page gets, until one's run part satisfies `wanted` (frames acknowledged)."""
    ws.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            data = ws.recv()
        except websocket.WebSocketTimeoutException:
            continue
        if isinstance(data, bytes):
            ws.send(json.dumps({"t": "ack", "frame": vkcuda.frame_header(data)["frame"]}))
        elif json.loads(data).get("t") == "status" and wanted(json.loads(data)["run"]):
            return json.loads(data)["run"]
    raise AssertionError("no such status in 30 s")


def test_a_frame_that_fails_is_said_on_the_page_and_the_widget_until_one_goes_through(tmp_path):
    """The caller's frames stop reaching the view with an error (a CUDA fault in the caller's
    kernels on a GPU; here the run's PNG writer, whose folder went): the show raises it, and the
    page and the notebook widget are told it (said over their last frame) until a frame goes
    through again. A wrong argument is the caller's alone and tells them nothing."""
    out = tmp_path / "frames"
    image = np.zeros((16, 24, 4), np.uint8)
    with vkcuda.Viewer(serve=0, out=str(out), every_frame=True, validate=True) as v:
        page, widget = connect(v.url, (24, 16)), v.watch()
        for i in range(3):
            image[:] = i
            v.show(image)
        v.flush()
        with pytest.raises(TypeError):
            v.show(np.zeros((16, 24, 4), np.int64))
        assert widget.status()["run"]["error"] is None
        shutil.rmtree(out)
        with pytest.raises(RuntimeError, match="PNG writer") as raised:
            for _ in range(10000):
                v.show(image)
            v.flush()
        said = str(raised.value)
        assert widget.status()["run"]["error"] == said
        deadline = time.monotonic() + 30
        assert page_status(page, deadline, lambda run: run["error"])["error"] == said
        out.mkdir()
        v.show(image)
        v.flush()
        assert widget.status()["run"]["error"] is None
        page_status(page, deadline, lambda run: run["error"] is None)
        stats = v.stats()
    assert (stats["validation_errors"], stats["validation_warnings"]) == (0, 0)


def pattern(h, w, k):
    image = np.zeros((h, w, 4), np.uint8)
    image[..., 0] = (np.arange(w) * 4 + 40 * k)[None, :] % 256
    image[..., 1] = (np.arange(h) * 5)[:, None]
    image[..., 2] = 30 * k
    image[..., 3] = 255
    return image


def test_each_frame_shown_once_reaches_a_watcher_without_another():
    # A training step's image every few seconds: each must reach the page by itself,
    # not once later frames push it out of the consumer's slots.
    h, w = 24, 32
    with vkcuda.Viewer(validate=True) as v:
        client = v.watch()
        client.message({"t": "mode", "mode": "raw"})
        client.message({"t": "canvas", "w": w, "h": h})
        for k in range(4):
            v.show(pattern(h, w, k))
            data = client.next(30.0)
            assert data is not None, f"frame {k} did not come in 30 s without another shown"
            hd = vkcuda.frame_header(data)
            kind, frame, fw, fh = hd["kind"], hd["frame"], hd["width"], hd["height"]
            got = np.frombuffer(data[32:], np.uint8).reshape(fh, fw, 4)
            assert (kind, fw, fh) == ("raw", w, h)
            assert np.abs(got[..., :3].astype(int) - pattern(h, w, k)[..., :3]).max() <= 1, f"frame {k}"
            client.message({"t": "ack", "frame": frame})
        stats = v.stats()
    assert (stats["validation_errors"], stats["validation_warnings"]) == (0, 0)


@pytest.mark.parametrize("producer", ["torch"])
def test_a_served_viewer_sends_a_cuda_tensor(producer):
    torch = pytest.importorskip("torch", reason="skipped: torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("skipped: no NVIDIA GPU (torch.cuda.is_available() is False)")
    h, w = 37, 53  # odd: rows that are not a multiple of anything
    image = pattern(h, w, 1)
    with vkcuda.Viewer(serve=0, validate=True) as v:
        ws = connect(v.url, (w, h))
        kind, _, size, pixels = next_frame(ws, v, torch.from_numpy(image).cuda(), time.monotonic() + 60)
        assert (kind, size) == ("raw", (w, h))
        got = np.frombuffer(pixels, np.uint8).reshape(h, w, 4)
        assert np.abs(got[..., :3].astype(int) - image[..., :3]).max() <= 1
        stats = v.stats()
    assert (stats["validation_errors"], stats["validation_warnings"]) == (0, 0)


def test_a_port_in_use_is_an_os_error_before_the_gpu():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="the port is in use"):
            vkcuda.Viewer(serve=port)
    with pytest.raises(ValueError, match="not PORT or ADDR:PORT"):
        vkcuda.Viewer(serve="nowhere")
    with pytest.raises(ValueError, match="not with a window"):
        vkcuda.Viewer(serve=0, headless=False)
