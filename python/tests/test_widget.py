"""The notebook widget through a real Jupyter kernel (ipykernel, driven by
jupyter_client as a notebook's page would drive it): the kernel opens the
anywidget comm, each frame arrives as one comm message with one buffer,
exactly the shown NumPy frame at 1:1 in raw mode, acknowledged by the test
as the page does; a key sent back reaches ``v.keys()``; another cell runs
while frames keep coming; closing the viewer says "closed" (the page keeps
the last frame); a kernel restart ends it without a hang. A widget opened
after the last frame, or resized, shows that frame; a PyTorch CUDA tensor
streams as NumPy does (on an NVIDIA GPU; else "skipped"). Lavapipe in CI,
the validation layer on. The page's JavaScript itself is the browser view's
protocol (tests/e2e/browser.rs drives that page in Chromium)."""

import json
import os
import queue
import sys
import time

import numpy as np
import pytest
from widget_cells import frame, setup

import vkcuda

pytest.importorskip("anywidget", reason="anywidget is not installed")
jupyter_client = pytest.importorskip("jupyter_client", reason="jupyter_client is not installed")

H, W = 48, 64

SETUP = setup(W, H, 'w = v.widget(mode="raw")\nw')


class Page:
    """The test's side of the kernel: what a notebook page does with the widget's comm."""

    def __init__(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.km, self.kc = jupyter_client.manager.start_new_kernel(kernel_name="python3", env=env)
        self.comm = None

    def execute(self, code, timeout=120):
        """Runs a cell; its stdout, once the kernel says it is done."""
        msg_id = self.kc.execute(code)
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        assert reply["content"]["status"] == "ok", reply["content"]
        return reply

    def iopub(self, timeout=30):
        return self.kc.get_iopub_msg(timeout=timeout)

    def send(self, content):
        data = {"method": "custom", "content": content}
        msg = self.kc.session.msg("comm_msg", {"comm_id": self.comm, "data": data})
        self.kc.shell_channel.send(msg)

    def widget_message(self, deadline):
        """The next custom message of the widget's comm: (content, buffers)."""
        while time.monotonic() < deadline:
            try:
                m = self.iopub(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if m["msg_type"] == "comm_open" and m["content"]["data"].get("state", {}).get("_esm"):
                self.comm = m["content"]["comm_id"]
            if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == self.comm:
                data = m["content"]["data"]
                if data.get("method") == "custom":
                    return data["content"], m.get("buffers", [])
        raise AssertionError("no widget message in time")

    def ack_if_frame(self, m):
        """Acknowledges a frame seen while waiting for something else, as the page would."""
        if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == self.comm:
            content = m["content"]["data"].get("content", {})
            if content.get("t") == "frame":
                frame = vkcuda.frame_header(bytes(m["buffers"][0]))["frame"]
                self.send({"t": "ack", "frame": frame})

    def frame(self, deadline):
        while True:
            content, buffers = self.widget_message(deadline)
            if content.get("t") == "frame":
                raw = bytes(buffers[0])
                h = vkcuda.frame_header(raw)
                self.send({"t": "ack", "frame": h["frame"]})
                return h["kind"], (h["width"], h["height"]), raw[32:]
            if content.get("t") == "closed":
                return None

    def stdout_of(self, code):
        msg_id = self.kc.execute(code)
        out = ""
        while True:
            m = self.iopub(timeout=60)
            self.ack_if_frame(m)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "stream":
                out += m["content"]["text"]
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return out


@pytest.fixture
def page():
    p = Page()
    yield p
    p.kc.stop_channels()
    p.km.shutdown_kernel(now=True)


def exact_frames(page, deadline, count):
    """Says the page's mode and canvas (raw, WxH), then checks `count` frames against the array."""
    page.send({"t": "mode", "mode": "raw"})
    page.send({"t": "canvas", "w": W, "h": H})
    for _ in range(count):
        kind, size, pixels = page.frame(deadline)
        assert (kind, size) == ("raw", (W, H))
        got = np.frombuffer(pixels, np.uint8).reshape(H, W, 4)
        assert np.abs(got[..., :3].astype(int) - frame(W, H)[..., :3]).max() <= 1


def test_the_widget_streams_exact_frames_through_the_kernels_comm(page):
    page.execute(SETUP)
    deadline = time.monotonic() + 60
    page.widget_message(deadline)  # the comm is open; the page says its canvas
    exact_frames(page, deadline, 5)
    page.send({"t": "key", "key": "ArrowRight"})
    assert "ArrowRight" in wait_for(page, "print(v.keys())")
    # Another cell runs while frames keep coming.
    started = time.monotonic()
    assert page.stdout_of("print(6 * 7)").strip() == "42"
    assert time.monotonic() - started < 10
    page.frame(time.monotonic() + 30)
    # Closing the viewer ends the stream: the page is told, and keeps its last frame.
    page.execute("stop.set(); v.close(); print(v.stats()['validation_errors'], v.stats()['validation_warnings'])")
    deadline = time.monotonic() + 30
    while page.frame(deadline) is not None:
        pass
    assert page.stdout_of("print(v.stats()['validation_errors'], v.stats()['validation_warnings'])").split() == ["0", "0"]


def test_a_widget_opened_after_the_last_frame_shows_it(page):
    # `v.show(img)` then `v` as the cell's last expression: the frame was consumed before the widget.
    page.execute(setup(W, H, "v", feed=False))
    deadline = time.monotonic() + 60
    page.widget_message(deadline)
    exact_frames(page, deadline, 1)
    # A new canvas size while nothing newer is shown: the same frame, drawn at that size.
    page.send({"t": "canvas", "w": 2 * W, "h": 2 * H})
    kind, size, pixels = page.frame(deadline)
    assert (kind, size) == ("raw", (2 * W, 2 * H))
    got = np.frombuffer(pixels, np.uint8).reshape(2 * H, 2 * W, 4)
    assert np.abs(got[::2, ::2, 2].astype(int) - 99).max() <= 1  # the blue channel is flat
    out = page.stdout_of("v.close(); s = v.stats(); print(s['shown'], s['validation_errors'], s['validation_warnings'])")
    shown, errors, warnings = out.split()
    assert (errors, warnings) == ("0", "0")
    print(f"widget: shown once, then {int(shown) - 1} more time(s) for the widget's two canvas sizes")
    assert int(shown) == 3


def test_a_widget_streams_a_cuda_tensor(page):
    if page.stdout_of("import torch; print(torch.cuda.is_available())").strip() != "True":
        pytest.skip("skipped: no NVIDIA GPU (torch.cuda.is_available() is False in the kernel)")
    page.execute(setup(W, H, 'w = v.widget(mode="raw")\nw', cuda=True))
    deadline = time.monotonic() + 60
    page.widget_message(deadline)
    exact_frames(page, deadline, 5)
    page.execute("stop.set(); v.close()")
    out = page.stdout_of("s = v.stats(); print(s['validation_errors'], s['validation_warnings'], s['shown'])")
    errors, warnings, shown = out.split()
    print(f"widget: a CUDA tensor, {shown} frames shown, validation {errors}/{warnings}")
    assert (errors, warnings) == ("0", "0")


def test_a_cell_run_again_and_again_leaves_room_for_the_next_widget(page):
    """A cell whose last expression is the viewer, run 40 times (a viewer takes 32
    watchers): each run's view says hello, the view it replaces says goodbye as its
    output goes, so the watchers never pile up and the next widget still streams.
    A widget for a closed viewer is a clear error, and nothing trips over it later."""
    page.execute(setup(W, H, "None"))
    previous = None
    for _ in range(40):
        page.execute("v")
        deadline = time.monotonic() + 30
        while True:  # the new widget's comm
            m = page.iopub(timeout=max(0.1, deadline - time.monotonic()))
            if m["msg_type"] == "comm_open" and m["content"]["data"].get("state", {}).get("_esm"):
                page.comm = m["content"]["comm_id"]
                break
        page.send({"t": "hello", "video": []})
        if previous is not None:
            page.comm, newest = previous, page.comm
            page.send({"t": "bye"})
            page.comm = newest
        previous = page.comm
    page.execute('w = v.widget(mode="raw")\nw')
    deadline = time.monotonic() + 60
    page.widget_message(deadline)
    exact_frames(page, deadline, 3)
    out = page.stdout_of(
        "import gc\nstop.set(); v.close()\ntry:\n    v.widget()\nexcept Exception as e:\n"
        "    print(type(e).__name__, e)\ngc.collect()\nprint(v.stats()['validation_errors'], v.stats()['validation_warnings'])"
    )
    print(f"widget: after 40 runs of the cell, a closed viewer's widget: {out.strip()!r}")
    assert "AttributeError" not in out and "Exception ignored" not in out, out
    assert out.split()[-2:] == ["0", "0"], out


def test_a_kernel_restart_ends_a_streaming_widget_without_a_hang(page):
    page.execute(SETUP)
    deadline = time.monotonic() + 60
    page.widget_message(deadline)
    page.send({"t": "canvas", "w": W, "h": H})
    assert page.frame(deadline) is not None
    started = time.monotonic()
    page.km.restart_kernel(now=False)
    assert time.monotonic() - started < 30
    # The new kernel answers (on the shell channel: iopub's subscription may miss its first messages).
    page.kc.wait_for_ready(timeout=60)
    reply = page.kc.execute_interactive("", user_expressions={"alive": "6 * 7"}, timeout=60)
    assert reply["content"]["user_expressions"]["alive"]["data"]["text/plain"] == "42"


def wait_for(page, code):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = page.stdout_of(code)
        if out.strip() not in ("[]", ""):
            return out
        time.sleep(0.1)
    raise AssertionError(f"{code}: nothing after 30 s")
