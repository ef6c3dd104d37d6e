"""The notebook widget in a real JupyterLab and a real Notebook 7 in a real
browser: a Jupyter server (from PyPI) and Debian's headless Chromium (over
the DevTools protocol) open a notebook whose first cell shows NumPy frames on this
machine's Vulkan (lavapipe in CI) in a raw-mode widget of 64x48 CSS pixels
at scale 1, so the widget's canvas pixels must equal the array; a key
pressed in the widget reaches ``v.keys()``; the cell after it runs while
frames keep coming; a kernel restart leaves the last frame and no hung cell.
Then the frames per second the widget receives at 960x540 and 1920x1080
(JPEG), measured and printed (not a timed test)."""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
from widget_cells import frame, setup

pytest.importorskip("anywidget", reason="anywidget is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
websocket = pytest.importorskip("websocket", reason="websocket-client is not installed")
CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"no {CHROMIUM} (Debian's chromium package)", allow_module_level=True)

H, W = 48, 64
SETUP = setup(W, H, f'v.widget(mode="raw", size=({W}, {H}))')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chromium:
    """Headless Chromium with one page, over the DevTools protocol (flat sessions)."""

    def __init__(self, url, profile, extra=()):
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-port=0", "--force-device-scale-factor=1", "--window-size=1280,900",
             f"--user-data-dir={profile}", *extra, "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        endpoint = None
        deadline = time.monotonic() + 30
        while endpoint is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if "DevTools listening on " in line:
                endpoint = line.split("DevTools listening on ")[1].strip()
        assert endpoint, "Chromium printed no DevTools address"
        self.ws = websocket.create_connection(endpoint, timeout=60)
        self.next_id, self.session = 0, None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.navigate", {"url": url})

    def call(self, method, params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply["error"]
                return reply["result"]

    def eval(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    def wait_for(self, expression, secs=120):
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"not true after {secs} s: {expression}")

    def press(self, key, code, vk):
        for kind in ["keyDown", "keyUp"]:
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": vk})

    def close(self):
        self.proc.kill()
        self.proc.wait()


# The front ends: their Python module, and the notebook's path on the server.
FRONTS = {"jupyterlab": "lab/tree", "notebook": "notebooks"}


@pytest.fixture(params=["jupyterlab"])
def lab(request):
    front = request.param
    pytest.importorskip(front, reason=f"{front} is not installed")
    root = tempfile.mkdtemp(prefix="vkcuda-lab-")
    notebook = {"cells": [{"cell_type": "code", "id": "view", "metadata": {}, "outputs": [], "execution_count": None, "source": SETUP},
                          {"cell_type": "code", "id": "after", "metadata": {}, "outputs": [], "execution_count": None, "source": "print(6 * 7)"}],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    with open(os.path.join(root, "view.ipynb"), "w") as f:
        json.dump(notebook, f)
    port, token = free_port(), "vkcuda-test-token"
    # JupyterLab's files and the widgets' extensions where pip put them (a --target folder, or the prefix).
    import jupyterlab

    share = os.path.join(os.path.dirname(os.path.dirname(jupyterlab.__file__)), "share", "jupyter")
    if not os.path.isdir(os.path.join(share, "lab")):
        share = os.path.join(sys.prefix, "share", "jupyter")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), JUPYTER_CONFIG_DIR=os.path.join(root, ".cfg"),
               JUPYTER_DATA_DIR=os.path.join(root, ".data"), JUPYTER_RUNTIME_DIR=os.path.join(root, ".run"),
               JUPYTER_PATH=share, JUPYTERLAB_DIR=os.path.join(share, "lab"))
    server = subprocess.Popen(
        [sys.executable, "-m", front, "--no-browser", "--expose-app-in-browser", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.ip=127.0.0.1",
         "--ServerApp.allow_root=True"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "server.log"), "w"))
    profile = os.path.join(root, ".chromium")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    browser = Chromium(f"http://127.0.0.1:{port}/{FRONTS[front]}/view.ipynb?token={token}", profile)
    yield browser, front
    browser.close()
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    shutil.rmtree(root, ignore_errors=True)


CANVAS = "document.querySelector('.vkcuda-widget canvas')"
NB = "window.jupyterapp.shell.currentWidget"


def run_all(b):
    b.wait_for(f"window.jupyterapp && {NB} && {NB}.sessionContext && {NB}.sessionContext.session && {NB}.sessionContext.session.kernel && {NB}.sessionContext.session.kernel.connectionStatus === 'connected'")
    b.eval("window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => 1)")


def canvas_pixels(b):
    v = b.eval(f"""(() => {{ const c = {CANVAS}; const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let s = ''; for (let i = 0; i < d.length; i += 32768) s += String.fromCharCode.apply(null, d.subarray(i, i + 32768));
        return {{ w: c.width, h: c.height, data: btoa(s) }}; }})()""")
    return v["w"], v["h"], np.frombuffer(base64.b64decode(v["data"]), np.uint8).reshape(v["h"], v["w"], 4)


@pytest.mark.parametrize("lab", list(FRONTS), indirect=True)
def test_the_widget_in_jupyter(lab):
    b, front = lab
    run_all(b)
    b.wait_for(f"{CANVAS} && {CANVAS}.vkcuda && {CANVAS}.vkcuda.frames > 5")
    w, h, got = canvas_pixels(b)
    assert (w, h) == (W, H)
    img = frame(W, H)
    diff = np.abs(got[..., :3].astype(int) - img[..., :3]).max()
    print(f"{front}: the widget's {w}x{h} canvas against the array: largest difference {diff}")
    assert diff <= 1
    # The cell after it ran while frames kept coming.
    b.wait_for("Array.from(document.querySelectorAll('.jp-OutputArea-output')).some(e => e.textContent.trim() === '42')")
    seen = b.eval(f"{CANVAS}.vkcuda.frames")
    b.wait_for(f"{CANVAS}.vkcuda.frames > {seen} + 5")
    # A key pressed in the widget reaches v.keys().
    b.eval(f"{CANVAS}.focus()")
    b.press("ArrowRight", "ArrowRight", 39)
    # Asked through the notebook's kernel connection (Notebook 7's run-cell command needs the notebook focused).
    keys = b.eval(f"""(async () => {{ let out = '';
        const future = {NB}.sessionContext.session.kernel.requestExecute({{ code: 'print(v.keys())' }});
        future.onIOPub = (m) => {{ if (m.header.msg_type === 'stream') out += m.content.text; }};
        await future.done; return out; }})()""")
    assert "'ArrowRight'" in keys, keys
    print(f"{front}: ArrowRight in the widget reached v.keys()")
    # A kernel restart leaves the last frame, and the notebook goes on.
    frames = b.eval(f"{CANVAS}.vkcuda.frames")
    b.eval(f"{NB}.sessionContext.session.kernel.restart().then(() => 1)")
    b.wait_for(f"{NB}.sessionContext.session.kernel.status === 'idle'", 60)
    _, _, after = canvas_pixels(b)
    assert np.abs(after[..., :3].astype(int) - img[..., :3]).max() <= 1, "the last frame stays"
    print(f"{front}: kernel restarted after {frames} frames; the canvas keeps the last one")


@pytest.mark.parametrize("size", [(960, 540), (1920, 1080)])
def test_the_widgets_frame_rate_in_jupyterlab(lab, size):
    b, _ = lab
    cell = setup(size[0], size[1], f'v.widget(mode="jpeg", size={size})', moving=True)
    b.wait_for(f"window.jupyterapp && {NB} && {NB}.content.widgets.length === 2")
    b.eval(f"{NB}.content.widgets[0].model.sharedModel.setSource({json.dumps(cell)}); 1")
    run_all(b)
    b.wait_for(f"{CANVAS} && {CANVAS}.vkcuda && {CANVAS}.vkcuda.frames > 3", 120)
    start, t0 = b.eval(f"{CANVAS}.vkcuda.frames"), time.monotonic()
    time.sleep(5)
    frames, secs = b.eval(f"{CANVAS}.vkcuda.frames") - start, time.monotonic() - t0
    print(f"jupyterlab: a {size[0]}x{size[1]} widget received {frames / secs:.1f} frames/s (JPEG, lavapipe, 2 cores)")
    assert frames > 0
