"""The browser view (``Viewer(serve=...)``) reached as JupyterHub users reach
it: through jupyter-server-proxy (from PyPI) under a hub-like prefix
(``--ServerApp.base_url=/user/test/``, ``JUPYTERHUB_SERVICE_PREFIX``), over
HTTPS at a hub's host name (``hub.test``, which Chromium resolves to this
machine; a self-signed certificate; the page's ``Origin`` is the proxy's
``https://`` one, its ``Host`` the hub's), in a real JupyterLab in Debian's
headless Chromium. The
notebook prints ``v.jupyter_url``; the page opened there takes its stream
from a relative ``wss://`` URL through the proxy, and its canvas equals the
shown NumPy frame exactly (raw mode, 1:1). Without the view's token the
proxy's request is refused (the server cannot tell a forwarded page from any
other by its address: the token is what lets it in)."""

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
from test_jupyterlab import CANVAS, Chromium, canvas_pixels, free_port, run_all  # noqa: F401

pytest.importorskip("jupyter_server_proxy", reason="jupyter-server-proxy is not installed")

W, H = 320, 180
CELL = f"""import threading, time
import numpy as np
import vkcuda
v = vkcuda.Viewer(serve=0, validate=True)
img = np.zeros(({H}, {W}, 4), np.uint8)
img[..., 0] = (np.arange({W}) % 256)[None, :]
img[..., 1] = (np.arange({H}) * 3 % 256)[:, None]
img[..., 2] = 77
img[..., 3] = 255
stop = threading.Event()
def feed():
    while not stop.is_set():
        v.show(img)
        time.sleep(0.005)
threading.Thread(target=feed, daemon=True).start()
print("VIEW", v.jupyter_url)"""


def image():
    img = np.zeros((H, W, 4), np.uint8)
    img[..., 0] = (np.arange(W) % 256)[None, :]
    img[..., 1] = (np.arange(H) * 3 % 256)[:, None]
    img[..., 2] = 77
    img[..., 3] = 255
    return img


@pytest.fixture
def hub_like():
    """JupyterLab over HTTPS under /user/test/, jupyter-server-proxy on, and Chromium on it."""
    import jupyterlab

    root = tempfile.mkdtemp(prefix="vkcuda-hub-")
    cert, key = os.path.join(root, "cert.pem"), os.path.join(root, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    notebook = {"cells": [{"cell_type": "code", "id": "view", "metadata": {}, "outputs": [], "execution_count": None, "source": CELL}],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    with open(os.path.join(root, "view.ipynb"), "w") as f:
        json.dump(notebook, f)
    port, token = free_port(), "vkcuda-hub-token"
    share = os.path.join(os.path.dirname(os.path.dirname(jupyterlab.__file__)), "share", "jupyter")
    if not os.path.isdir(os.path.join(share, "lab")):
        share = os.path.join(sys.prefix, "share", "jupyter")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), JUPYTER_CONFIG_DIR=os.path.join(root, ".cfg"),
               JUPYTER_DATA_DIR=os.path.join(root, ".data"), JUPYTER_RUNTIME_DIR=os.path.join(root, ".run"),
               JUPYTER_PATH=share, JUPYTERLAB_DIR=os.path.join(share, "lab"), JUPYTERHUB_SERVICE_PREFIX="/user/test/")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--expose-app-in-browser", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.ip=127.0.0.1",
         "--ServerApp.allow_root=True", "--ServerApp.allow_remote_access=True", "--ServerApp.base_url=/user/test/", f"--ServerApp.certfile={cert}",
         f"--ServerApp.keyfile={key}", "--ServerApp.jpserver_extensions={'jupyter_server_proxy': True}"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, "server.log"), "w"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    base = f"https://hub.test:{port}"
    browser = Chromium(f"{base}/user/test/lab/tree/view.ipynb?token={token}", os.path.join(root, ".chromium"),
                       extra=["--ignore-certificate-errors", "--host-resolver-rules=MAP hub.test 127.0.0.1"])
    yield browser, base
    browser.close()
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    shutil.rmtree(root, ignore_errors=True)


def test_the_view_through_jupyter_server_proxy_over_https(hub_like):
    b, base = hub_like
    run_all(b)
    printed = b.wait_for("Array.from(document.querySelectorAll('.jp-OutputArea-output'))"
                         ".map(e => e.textContent).find(t => t.includes('VIEW /user/test/proxy/'))", 120)
    path = printed.split("VIEW ", 1)[1].split()[0]
    assert path.startswith("/user/test/proxy/") and "?token=" in path, path
    # The page through the proxy, its canvas the frame's size (the status bar is 24 px).
    b.call("Emulation.setDeviceMetricsOverride", {"width": W, "height": H + 24, "deviceScaleFactor": 1, "mobile": False})
    b.call("Page.navigate", {"url": f"{base}{path}&mode=raw"})
    b.wait_for("window.vkcuda && vkcuda.frames > 5 && vkcuda.status", 120)
    v = b.eval("({ protocol: location.protocol, canvas: vkcuda.canvas, last: vkcuda.last })")
    assert v["protocol"] == "https:" and v["canvas"] == [W, H] and v["last"]["kind"] == "raw", v
    got = np.frombuffer(bytes(b.eval("""(() => { const c = document.getElementById('view');
        return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data); })()""")), np.uint8)
    diff = np.abs(got.reshape(H, W, 4)[..., :3].astype(int) - image()[..., :3]).max()
    print(f"proxy: {W}x{H} through jupyter-server-proxy over https under /user/test/: largest difference {diff}")
    assert diff <= 1
    # The proxy forwards the browser's Host (the hub's) and https Origin: without the view's token, no entry.
    no_token = path.split("?", 1)[0]
    status = b.eval(f"fetch('{base}{no_token}').then(r => r.status)")
    print(f"proxy: the page without the view's token: {status}")
    assert status == 403
