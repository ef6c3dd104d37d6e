"""The notebook widget through a real Jupyter kernel (ipykernel, driven by
jupyter_client as a notebook's page would drive it): the kernel opens the
anywidget comm, each frame arrives as one comm message with one buffer,
exactly the shown NumPy frame at 1:1 in raw mode, acknowledged by the test
as the page does; a key sent back reaches ``v.keys()``; another cell runs
while frames keep coming; closing the viewer says "closed" (the page keeps
the last frame); a kernel restart ends it without a hang. A widget opened
after the last frame, or resized, shows that frame; a PyTorch CUDA tensor
streams as NumPy does (on an NVIDIA GPU; else "skipped"). A widget takes a
watcher only once a view of it speaks: a notebook executed with no page
(``jupyter nbconvert --execute``) displays a viewer 40 times and makes one
more widget after (a viewer takes 32 watchers). Lavapipe in CI,
the validation layer on. The page's JavaScript itself is the browser view's
protocol (tests/e2e/browser.rs drives that page in Chromium)."""

import json
import os
import queue
import subprocess
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

    def open_view(self, deadline):
        """Waits for the widget's comm, then says hello on it, as a view of it does when it
        opens (the widget takes its watcher then: before, the kernel says nothing)."""
        while True:
            m = self.iopub(timeout=max(0.1, deadline - time.monotonic()))
            if m["msg_type"] == "comm_open" and m["content"]["data"].get("state", {}).get("_esm"):
                self.comm = m["content"]["comm_id"]
                self.send({"t": "hello", "video": []})
                return

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
    page.open_view(deadline)
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
    page.open_view(deadline)
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
    page.open_view(deadline)
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
        page.open_view(time.monotonic() + 30)  # the new widget's comm
        if previous is not None:
            page.comm, newest = previous, page.comm
            page.send({"t": "bye"})
            page.comm = newest
        previous = page.comm
    page.execute('w = v.widget(mode="raw")\nw')
    deadline = time.monotonic() + 60
    page.open_view(deadline)
    exact_frames(page, deadline, 3)
    out = page.stdout_of(
        "import gc\nstop.set(); v.close()\ntry:\n    v.widget()\nexcept Exception as e:\n"
        "    print(type(e).__name__, e)\ngc.collect()\nprint(v.stats()['validation_errors'], v.stats()['validation_warnings'])"
    )
    print(f"widget: after 40 runs of the cell, a closed viewer's widget: {out.strip()!r}")
    assert "AttributeError" not in out and "Exception ignored" not in out, out
    assert out.split()[-2:] == ["0", "0"], out


def test_a_notebook_run_with_no_front_end_displays_a_viewer_40_times(tmp_path):
    """`jupyter nbconvert --execute` (papermill, CI) runs a notebook with no page: its
    widgets never hear from a view, so none takes one of the viewer's 32 watchers (a
    widget joins on its view's first message); the 41st widget, `v.widget()`, is made."""
    pytest.importorskip("nbconvert", reason="nbconvert is not installed")
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed")
    cells = [setup(W, H, "None", feed=False)] + ["v"] * 40
    cells.append('w = v.widget(mode="raw")\nprint("widget", type(w).__name__)')
    cells.append("v.close(); s = v.stats(); print('validation', s['validation_errors'], s['validation_warnings'])")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    path = tmp_path / "forty.ipynb"
    nbformat.write(nb, path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        # `jupyter nbconvert`, without needing `jupyter` on PATH (pip --target puts it beside the tools).
        [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
         "--ExecutePreprocessor.timeout=300", "--output", "ran.ipynb", str(path)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ran = nbformat.read(tmp_path / "ran.ipynb", as_version=4)
    outputs = [o for c in ran.cells for o in c.get("outputs", [])]
    said = "".join(o.get("text", "") + o.get("evalue", "") for o in outputs)  # printed, and errors
    view = "application/vnd.jupyter.widget-view+json"
    widgets = sum(1 for c in ran.cells[1:41] for o in c.outputs if view in o.get("data", {}))
    print(f"widget: 40 displays with no front end, then v.widget(): {said.split()!r}, {widgets} widget outputs")
    assert widgets == 40
    assert "widget ViewerWidget" in said and "validation 0 0" in said, said
    assert "too many" not in said


def page_says(w, content):
    """A message from a view of widget `w`, as the kernel hands it over (its comm)."""
    w.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def room(v):
    """How many more watchers the viewer takes (each one made here leaves again)."""
    made = []
    try:
        while len(made) <= 64:
            made.append(v.watch())
    except RuntimeError as e:
        assert "too many widgets watch this viewer" in str(e), e
    finally:
        for m in made:
            m.close()
    return len(made)


def test_a_widget_takes_a_watcher_from_its_views_first_message_until_the_last_leaves():
    """In this process (no kernel: the widgets' comms go nowhere). A widget no view ever
    spoke to takes no watcher; a view's first message joins it, once however often it
    speaks (a page cannot take the viewer's watchers through one widget); its last
    view's goodbye leaves; with no room, a view is told why it gets no frames."""
    with vkcuda.Viewer(headless=True, validate=True) as v:
        v.show(frame(W, H))
        widgets = [v.widget(mode="raw") for _ in range(40)]
        full = room(v)
        assert full == 32  # hub.rs MAX_CLIENTS: all still free
        first = widgets[0]
        page_says(first, {"t": "canvas", "w": W, "h": H})  # a canvas may come before hello
        assert room(v) == full - 1
        for _ in range(50):
            page_says(first, {"t": "hello", "video": []})
        assert room(v) == full - 1
        for _ in range(50):
            page_says(first, {"t": "bye"})
        assert room(v) == full
        page_says(first, {"t": "hello", "video": []})  # a view again: joins again
        assert room(v) == full - 1
        # The watchers taken by views of other widgets: the last widget's view is refused, and told.
        for w in widgets[1:full]:
            page_says(w, {"t": "hello", "video": []})
        assert room(v) == 0
        last, told = widgets[-1], []
        last.send = lambda content, buffers=None: told.append(content)
        page_says(last, {"t": "hello", "video": []})
        assert told and told[-1]["t"] == "closed" and "too many widgets" in told[-1]["reason"], told
        for w in widgets:
            w.close()
        assert room(v) == full
    s = v.stats()
    assert (s["validation_errors"], s["validation_warnings"]) == (0, 0), s


def test_a_kernel_restart_ends_a_streaming_widget_without_a_hang(page):
    page.execute(SETUP)
    deadline = time.monotonic() + 60
    page.open_view(deadline)
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
