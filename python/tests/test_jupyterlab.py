"""The notebook widget in a real JupyterLab and a real Notebook 7 in a real
browser: a Jupyter server (from PyPI) and Debian's headless Chromium (over
the DevTools protocol) open a notebook whose first cell shows NumPy frames on this
machine's Vulkan (lavapipe in CI) in a raw-mode widget of 64x48 CSS pixels
at scale 1, so the widget's canvas pixels must equal the array; a key
pressed in the widget reaches ``v.keys()``; the cell after it runs while
frames keep coming; a kernel restart leaves the last frame and no hung cell.
Then the frames per second the widget receives at 960x540 and 1920x1080
(JPEG), measured and printed (not a timed test)."""

import json
import os
import time

import numpy as np
import pytest
from widget_cells import frame, setup

pytest.importorskip("anywidget", reason="anywidget is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
pytest.importorskip("websocket", reason="websocket-client is not installed")
from jupyter_pages import CANVAS, CHROMIUM, NB, Chromium, JupyterServer, canvas_pixels, run_all  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"no {CHROMIUM} (Debian's chromium package)", allow_module_level=True)

H, W = 48, 64
SETUP = setup(W, H, f'v.widget(mode="raw", size=({W}, {H}))')


# The front ends: their Python module, and the notebook's path on the server.
FRONTS = {"jupyterlab": "lab/tree", "notebook": "notebooks"}


@pytest.fixture(params=["jupyterlab"])
def lab(request):
    front = request.param
    pytest.importorskip(front, reason=f"{front} is not installed")
    server = JupyterServer(front, [SETUP, "print(6 * 7)"], "vkcuda-test-token")
    browser = Chromium(f"http://127.0.0.1:{server.port}/{FRONTS[front]}/view.ipynb?token={server.token}",
                       os.path.join(server.root, ".chromium"))
    yield browser, front
    browser.close()
    server.stop()


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


# The least frames/s a widget gets (JPEG, lavapipe, 2 cores shared with other work): about a
# third of the slowest of 3 runs measured on the CI-like machine (2026-12-02: 7.0, 11.9, 13.9
# at 960x540 and 2.4, 2.8, 3.8 at 1920x1080; the slowest each while another build ran).
FLOOR = {(960, 540): 2.0, (1920, 1080): 0.8}


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
    assert frames / secs >= FLOOR[size], f"{frames / secs:.1f} frames/s, below {FLOOR[size]}"
