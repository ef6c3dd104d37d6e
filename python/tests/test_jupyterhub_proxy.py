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

import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

pytest.importorskip("jupyter_server_proxy", reason="jupyter-server-proxy is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
pytest.importorskip("websocket", reason="websocket-client is not installed")
from jupyter_pages import CHROMIUM, Chromium, JupyterServer, run_all  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"no {CHROMIUM} (Debian's chromium package)", allow_module_level=True)

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
    keys = tempfile.mkdtemp(prefix="vkcuda-hub-")
    cert, key = os.path.join(keys, "cert.pem"), os.path.join(keys, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    server = JupyterServer(
        "jupyterlab", [CELL], "vkcuda-hub-token",
        args=["--ServerApp.allow_remote_access=True", "--ServerApp.base_url=/user/test/", f"--ServerApp.certfile={cert}",
              f"--ServerApp.keyfile={key}", "--ServerApp.jpserver_extensions={'jupyter_server_proxy': True}"],
        env={"JUPYTERHUB_SERVICE_PREFIX": "/user/test/"})
    base = f"https://hub.test:{server.port}"
    browser = Chromium(f"{base}/user/test/lab/tree/view.ipynb?token={server.token}", os.path.join(server.root, ".chromium"),
                       extra=["--ignore-certificate-errors", "--host-resolver-rules=MAP hub.test 127.0.0.1"])
    yield browser, base
    browser.close()
    server.stop()
    shutil.rmtree(keys, ignore_errors=True)


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
