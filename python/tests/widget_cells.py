"""What the notebook widget tests run in their kernels: a viewer (validation
on) fed one frame (NumPy, or a PyTorch CUDA tensor) over and over from a
thread or shown once, then the cell's last line (the widget); and that
frame, to compare the widget's pixels with."""

import numpy as np


def setup(width, height, last_line, feed=True, cuda=False, moving=False):
    """The first cell: the viewer, its feeding thread (``stop`` ends it; ``feed=False``:
    the frame shown once and consumed), then ``last_line``. ``cuda``: the frame is a
    PyTorch CUDA tensor. ``moving``: each frame shown differs (a standing picture is
    sent once more, exact, and then not again until it changes)."""
    made = f"""import threading, time
import numpy as np
import vkcuda
v = vkcuda.Viewer(validate=True)
img = np.zeros(({height}, {width}, 4), np.uint8)
img[..., 0] = (np.arange({width}) * 4 % 256)[None, :]
img[..., 1] = (np.arange({height}) * 5 % 256)[:, None]
img[..., 2] = 99
img[..., 3] = 255
"""
    if cuda:
        made += "import torch\nimg = torch.from_numpy(img).cuda()\n"
    if not feed:
        return made + f"v.show(img)\nv.flush()\n{last_line}"
    change = "img[0, :, 2] = k % 256; " if moving else ""
    return made + f"""stop = threading.Event()
def feed():
    k = 0
    while not stop.is_set():
        {change}v.show(img)
        k += 1
        time.sleep(0.002)
threading.Thread(target=feed, daemon=True).start()
{last_line}"""


def frame(width, height):
    """The frame the first cell shows."""
    img = np.zeros((height, width, 4), np.uint8)
    img[..., 0] = (np.arange(width) * 4 % 256)[None, :]
    img[..., 1] = (np.arange(height) * 5 % 256)[:, None]
    img[..., 2] = 99
    img[..., 3] = 255
    return img
