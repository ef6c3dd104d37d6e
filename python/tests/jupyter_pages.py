"""What the notebook tests in a real browser share: a Jupyter server (from
PyPI) of its own, on a notebook written for the test, and Debian's headless
Chromium driven over the DevTools protocol (flat sessions)."""

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
import websocket

CHROMIUM = "/usr/bin/chromium"


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


class JupyterServer:
    """``python -m FRONT`` (jupyterlab, notebook) in a folder of its own holding
    ``view.ipynb`` (the code cells ``cells``), on a free loopback port with
    ``token``; ``args`` and ``env`` add to its command line and environment.
    Once its port answers (60 s at most) it is ready; ``stop`` ends it."""

    def __init__(self, front, cells, token, args=(), env=None):
        import jupyterlab

        self.root = tempfile.mkdtemp(prefix="vkcuda-jupyter-")
        self.port, self.token = free_port(), token
        notebook = {"cells": [{"cell_type": "code", "id": f"cell{i}", "metadata": {}, "outputs": [], "execution_count": None,
                               "source": source} for i, source in enumerate(cells)],
                    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                    "nbformat": 4, "nbformat_minor": 5}
        with open(os.path.join(self.root, "view.ipynb"), "w") as f:
            json.dump(notebook, f)
        # JupyterLab's files and the widgets' extensions where pip put them (a --target folder, or the prefix).
        share = os.path.join(os.path.dirname(os.path.dirname(jupyterlab.__file__)), "share", "jupyter")
        if not os.path.isdir(os.path.join(share, "lab")):
            share = os.path.join(sys.prefix, "share", "jupyter")
        run_env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
                       JUPYTER_CONFIG_DIR=os.path.join(self.root, ".cfg"), JUPYTER_DATA_DIR=os.path.join(self.root, ".data"),
                       JUPYTER_RUNTIME_DIR=os.path.join(self.root, ".run"), JUPYTER_PATH=share,
                       JUPYTERLAB_DIR=os.path.join(share, "lab"), **(env or {}))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", front, "--no-browser", "--expose-app-in-browser", f"--ServerApp.port={self.port}",
             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={self.root}", "--ServerApp.ip=127.0.0.1",
             "--ServerApp.allow_root=True", *args],
            env=run_env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.root, "server.log"), "w"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"{front} did not listen on port {self.port} within 60 s")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.root, ignore_errors=True)


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
