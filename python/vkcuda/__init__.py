"""vkcuda for Python: show a GPU tensor (or a NumPy array) through Vulkan
without copying it to the host, in a window or headless.

    import torch, vkcuda

    x = torch.zeros((1080, 1920, 4), dtype=torch.uint8, device="cuda")
    with vkcuda.Viewer(headless=False) as v:    # a window; its own thread keeps it responsive
        for t in range(600):
            x[..., 0] = t % 256
            v.show(x)                            # packed on the current stream; returns at once

``Viewer.show(x)`` takes anything with ``__dlpack__`` or
``__cuda_array_interface__`` (PyTorch, CuPy, JAX, cuda.core, Numba) on the
viewer's GPU, or host memory (``__array_interface__``: NumPy; ``__dlpack__`` on
the CPU: a PyTorch CPU tensor), of dtype uint8, float16 or
float32, shaped HxW, HxWx1, HxWx3, HxWx4 (or CxHxW with
``channels_first=True``), with any strides. ``x`` may be overwritten right
after ``show`` returns (on the stream it was shown on). Headless, with
``out=``, every frame is written as PNG (OpenEXR for floats), named
``frame_000000.png`` and on. ``Viewer.frame()`` hands out a frame's memory
to write in place.

See docs/python.md in the repository for the semantics and how they map onto
vkcuda's timelines.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import time
import weakref
from typing import Any, NamedTuple, Optional

from . import _native

__all__ = ["Viewer", "Watcher", "read_frame", "frame_header", "doctor", "DoctorReport", "__version__"]
__version__: str = _native.__version__

# Viewers still open at interpreter exit are closed (their frames written) then.
_open: "weakref.WeakSet[Viewer]" = weakref.WeakSet()


class Viewer:
    """Shows arrays and tensors in a window, or headless (writing every frame to ``out``).

    Args:
        out: folder every shown frame is written to (made if missing);
            ``None``: frames are consumed but not written.
        every_frame: ``show`` waits until Vulkan has released the buffer the
            frame goes into instead of replacing a frame still waiting (the
            default when writing frames: none is dropped).
        validate: run with the Khronos validation layer (``stats()`` counts
            its messages).
        gpu: a Vulkan device index or UUID prefix (default: the first).
        headless: ``False``: a window (its own thread keeps it responsive:
            Esc or its close button closes it); ``True``: no window;
            ``None``: headless when ``out`` is given or there is no display.
        workers: writer threads for ``out`` (default: one per core).
        size: the window's size in pixels (frames are letterboxed into it).
        title: the window's title.
        serve: show the frames in a browser (headless): a port (on 127.0.0.1;
            0 for any free one) or ``"addr:port"`` (any address but loopback
            needs the token in ``url``). Each browser gets frames drawn at its
            canvas size on the GPU, newest first, paced and sized for its link
            (VP8 or JPEG; exact pixels once the picture stops); ``pointer()``
            and ``keys()`` read what the page sends. From a laptop:
            ``ssh -L 8080:localhost:8080 server``; through JupyterHub:
            ``jupyter_url`` (jupyter-server-proxy).
    """

    def __init__(
        self,
        out: Optional[os.PathLike | str] = None,
        *,
        every_frame: Optional[bool] = None,
        validate: bool = False,
        gpu: Optional[str | int] = None,
        headless: Optional[bool] = None,
        workers: Optional[int] = None,
        size: tuple = (1280, 720),
        title: str = "vkcuda",
        serve: Optional[int | str] = None,
    ) -> None:
        if serve is not None and headless is None:
            headless = True
        if headless is None:
            display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
            headless = out is not None or not display
        if every_frame is None:
            every_frame = out is not None
        self._native = _native.Viewer(
            out=None if out is None else os.fspath(out),
            every_frame=every_frame,
            validate=validate,
            gpu=None if gpu is None else str(gpu),
            workers=workers,
            window=None if headless else (int(size[0]), int(size[1])),
            title=title,
            serve=None if serve is None else str(serve),
        )
        # A widget that joins, or resizes, after the last frame shows that frame's array
        # again (as it is now); frames written to ``out`` are never shown twice.
        self._writes = out is not None
        self._last: Optional[tuple] = None
        self._shown = 0
        self._showing = threading.Lock()
        self._refresher: Optional[threading.Thread] = None
        _open.add(self)
        if self.url is not None:
            self._keep_watchers_fed()
            where = f"vkcuda: watch it at {self.url}"
            if "JUPYTERHUB_SERVICE_PREFIX" in os.environ or "JPY_SESSION_NAME" in os.environ:
                where += f" (in this Jupyter: its address + {self.jupyter_url})"
            print(where, file=sys.stderr)

    @property
    def url(self) -> Optional[str]:
        """The browser view's address (``serve=``), with its token when one is needed; else ``None``."""
        return self._native.url

    @property
    def jupyter_url(self) -> Optional[str]:
        """The browser view through this Jupyter server's proxy (jupyter-server-proxy,
        ``pip install jupyter-server-proxy``): a path on the notebook's own address,
        ``{JUPYTERHUB_SERVICE_PREFIX}proxy/PORT/?token=...`` (``/proxy/...`` without
        JupyterHub). The token lets the page in with the proxy's ``Host`` and ``Origin``."""
        url, token = self._native.url, self._native.token
        if url is None or token is None:
            return None
        port = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
        return f"{prefix.rstrip('/')}/proxy/{port}/?token={token}"

    def pointer(self) -> Optional[tuple]:
        """``(x, y, buttons)``: the frame pixel under the browser's pointer and the buttons
        held (bit 0 left, 1 right, 2 middle); ``None`` when it is not over the frame."""
        return self._native.pointer()

    def widget(self, *, mode: str = "auto", quality: Optional[int] = None, size: Optional[tuple] = None) -> Any:
        """A live view of this viewer in a notebook cell (anywidget; JupyterLab,
        Notebook 7, VS Code): frames drawn on the GPU at the widget's size,
        newest first, through Jupyter's own connection, so it works wherever
        the notebook does, paced and sized for that connection as the browser
        view is (``mode="auto"``: VP8 or JPEG, exact pixels once the picture
        stops; ``"jpeg"`` at ``quality``, ``"video"``, ``"png"`` or ``"raw"``:
        pinned). A viewer that is the last expression of a cell shows one. It
        shows the last frame shown (its array as it is now, unless frames are
        written to ``out``), then each one shown; keys and the pointer reach
        ``keys()`` and ``pointer()``. Closing the viewer leaves the last frame
        in the cell. ``size``: the widget's ``(width, height)`` in CSS pixels
        (default: the cell's width, 16:9). It takes one of the viewer's 32 watchers
        once a view of it speaks, not before: a notebook executed with no page
        (``nbconvert --execute``, papermill) may display a viewer any number of times."""
        from ._widget import ViewerWidget

        return ViewerWidget(self, mode=mode, quality=quality, size=size)

    def watch(self) -> "Watcher":
        """A new watcher of this viewer's frames, as a notebook widget is one: it
        speaks the browser view's protocol (``message``), and each frame drawn for
        it comes from ``next`` (the view's frame header, then the image;
        ``frame_header`` reads the header). While a watcher waits for a frame that
        does not come (nothing new shown), the last array is shown again."""
        watcher = Watcher(self._native.watch())
        self._keep_watchers_fed()
        return watcher

    def _keep_watchers_fed(self) -> None:
        """Starts, once, the thread that shows the last array again for a watcher
        that waits for a frame that does not come (a new page, or the exact frame
        of a picture that stopped)."""
        if self._refresher is None:
            self._refresher = threading.Thread(target=self._feed_watchers, name="vkcuda watchers", daemon=True)
            self._refresher.start()

    def _feed_watchers(self) -> None:
        while not self.closed:
            if self._native.wait_stale(0.5) and not self._still(self._shown):
                time.sleep(1.0)  # nothing to show again (no array kept, or frames written): less often

    def _still(self, since: int) -> bool:
        """Shows the last array again when nothing was shown after the ``since``-th
        frame; never waits: a ``show`` in progress brings a frame. Whether it did."""
        if self._writes or self._last is None or not self._showing.acquire(blocking=False):
            return False
        try:
            if self._shown == since and not self.closed:
                x, channels_first, stream = self._last
                self._show(x, channels_first, False, stream)
                return True
        except Exception:  # noqa: BLE001 - only a courtesy: the next show reports what is wrong
            pass
        finally:
            self._showing.release()
        return False

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        if self.closed:
            return {"text/plain": repr(self)}
        try:
            widget = self.widget()
        except ImportError:
            return {"text/plain": repr(self)}
        return widget._repr_mimebundle_(include=include, exclude=exclude)

    def keys(self) -> list:
        """The keys pressed in the browser since the last call (``KeyboardEvent.key`` names)."""
        return self._native.keys()

    def show(
        self, x: Any, *, channels_first: bool = False, block: Optional[bool] = None, stream: Any = None
    ) -> None:
        """Shows ``x`` as its stream has it now, without waiting for the GPU.

        ``x``: a GPU tensor (``__dlpack__`` or ``__cuda_array_interface__``:
        PyTorch, CuPy, JAX, cuda.core, Numba...) on the viewer's GPU, or a
        host array (``__array_interface__``: NumPy; or ``__dlpack__`` of host
        memory: a PyTorch CPU tensor). A GPU tensor is copied
        on ``stream``: by default the caller's current stream (PyTorch's and
        CuPy's current stream, the stream a CUDA array interface names), else
        the viewer's own, which the DLPack producer orders its work before.
        Right after ``show`` returns, ``x`` may be overwritten on that stream.

        ``block=True`` waits until the frame before was taken (every frame
        kept); ``block=False`` replaces a frame still waiting (counted in
        ``stats()["replaced"]``); ``None``: the viewer's ``every_frame``.
        """
        if stream is None:
            stream = _current_stream(x)
        with self._showing:
            self._show(x, channels_first, block, stream)
            # Kept for a widget (a reference: the array's memory lives until the next show).
            self._last = (x, channels_first, stream)
            self._shown += 1

    def _show(self, x: Any, channels_first: bool, block: Optional[bool], stream: Optional[int]) -> None:
        try:
            self._native.show(x, channels_first=channels_first, block=block, stream=stream)
        except BufferError:
            # PyTorch exports (__dlpack__) only tensors of its current device: on another GPU
            # this raises before the viewer did anything, so the call is made again on it.
            device = _torch_device(x)
            if device is None:
                raise
            with device:
                self._native.show(x, channels_first=channels_first, block=block, stream=stream)

    @contextlib.contextmanager
    def frame(self, height: int, width: int, dtype: str = "uint8", *, stream: Any = None, block: Optional[bool] = None):
        """Writes a frame in place: yields the GPU memory it is shown from.

            with v.frame(1080, 1920, "float32") as f:
                t = torch.from_dlpack(f)      # an (H, W, 4) tensor over the frame's memory
                my_kernel(t)                  # on the current stream
            # leaving the block shows it once the writes are done on the GPU

        The memory is the exported Vulkan buffer itself once Vulkan has
        released it (every frame: the call waits for that; newest wins, while
        Vulkan still reads it: memory copied in once it is released). ``f``
        has ``__dlpack__`` (its ``stream`` argument orders the consumer's
        stream after the frame's last use) and ``__cuda_array_interface__``
        (ready on ``f.stream``). Writes must be on ``stream`` (default: the
        legacy default stream) or on a stream a DLPack consumer named. An
        exception in the block drops the frame. With every frame, ``show``
        or another ``frame`` inside the block is an error (it would wait for
        this one). JAX arrays are immutable: use ``show`` for them.
        """
        f = self._native.begin_frame(height, width, dtype, stream=stream, block=block)
        try:
            yield f
        except BaseException:
            f.discard()  # its memory goes back now, after the writes already enqueued
            raise
        with self._showing:
            self._native.end_frame(f, block=block)
            self._last = None  # the frame's memory is the viewer's: nothing to show again
            self._shown += 1

    def flush(self) -> None:
        """Waits until every frame shown so far is consumed and written."""
        self._native.flush()

    def stats(self) -> dict:
        """Frames shown, replaced, consumed and written so far, the run in progress
        included (its counts rise as its frames are consumed and written; ``flush()``
        waits for all of them); validation messages; the device; the window's state
        ("open", "closed") and how frames reach it ("swapchain", "cpu"); the run's
        producer ("fed": host arrays, "fed-cuda": GPU tensors; None between runs)."""
        return dict(self._native.stats())

    def close(self) -> None:
        """Writes what was shown, then lets the device go. Calling it again does nothing."""
        self._native.close()
        self._last = None
        _open.discard(self)

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self) -> "Viewer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<vkcuda.Viewer {state}>"


class Watcher:
    """A connection to a viewer's frames, as a page or notebook widget has one
    (``Viewer.watch()``): the page's messages go in (``message``: the JSON
    messages of the browser view's protocol, crates/serve/src/protocol.rs),
    frames drawn for it come out (``next``), paced by its acknowledgements."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def next(self, timeout: float) -> Optional[bytes]:
        """The next frame (header, then image), waiting at most ``timeout`` seconds;
        ``None``: none came, or the watcher is closed."""
        return self._native.next(timeout)

    def message(self, message: dict) -> Optional[dict]:
        """Applies a message from the page (``{"t": "canvas", "w": 640, "h": 360}``,
        ``{"t": "ack", "frame": 7}``...): the reply, if any. A malformed one is a
        ``ValueError``; ``{"t": "bye"}`` closes the watcher."""
        reply = self._native.message(json.dumps(message))
        return None if reply is None else json.loads(reply)

    def status(self) -> dict:
        """The status message a page is sent: the run, this watcher's stream and link."""
        return json.loads(self._native.status())

    def close(self) -> None:
        """No more frames are drawn for it."""
        self._native.close()

    @property
    def closed(self) -> bool:
        """Whether it was closed (or the viewer was)."""
        return self._native.closed


class DoctorReport(NamedTuple):
    """What this machine gives vkcuda (:func:`doctor`): the checklist as
    text, and the exit code ``vkcuda doctor`` gives it (0: CUDA renders
    headless frames; 1: only the CPU producer does; 2: no Vulkan device)."""

    text: str
    exit_code: int

    def __str__(self) -> str:
        return self.text


def doctor() -> DoctorReport:
    """Looks at every piece vkcuda needs here: the Vulkan loader (the
    system's, or the one the wheel bundles), the driver files and where the
    loader looks, each Vulkan device, CUDA and which Vulkan device each CUDA
    device pairs with, NVRTC, the validation layer, a display, a container's
    hints; then says what works here. ``python -m vkcuda doctor`` prints it."""
    text, code = _native.doctor()
    return DoctorReport(text, code)


def frame_header(frame: bytes) -> dict:
    """The header of a frame a watcher or page got: ``kind`` ("raw", "jpeg", "vp8",
    "png"), ``key``, ``quality``, ``frame``, ``width``, ``height`` (the size it was
    sent at) and ``stamp`` (µs since the Unix epoch, when the frame was taken)."""
    return _native.frame_header(frame)


def _current_stream(x: Any) -> Optional[int]:
    """The caller's current stream for ``x``'s library, if it has the notion."""
    module = type(x).__module__.partition(".")[0]
    if module == "torch" and getattr(x, "is_cuda", False):
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # a plain int, without a Stream object
        if raw is not None:
            return raw(x.device.index)
        return torch.cuda.current_stream(x.device).cuda_stream
    if module == "cupy":
        cupy = sys.modules["cupy"]
        with x.device:
            return cupy.cuda.get_current_stream().ptr
    return None


def _torch_device(x: Any):
    """A context making ``x``'s GPU PyTorch's current device, for a CUDA tensor on another; else None."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor) or not x.is_cuda:
        return None
    if x.device.index == torch.cuda.current_device():
        return None
    return torch.cuda.device(x.device.index)


def read_frame(path: os.PathLike | str, dtype: Optional[str] = None):
    """Reads a frame a viewer wrote as a NumPy array (H, W, 4) of ``dtype``.

    ``dtype``: "uint8" for PNG files, "float16" or "float32" for OpenEXR
    (``None``: uint8 for .png, float32 for .exr).
    """
    import numpy as np

    path = os.fspath(path)
    if dtype is None:
        dtype = "float32" if path.endswith(".exr") else "uint8"
    width, height, pixels = _native.read_frame(path, dtype)
    return np.frombuffer(pixels, dtype=dtype).reshape(height, width, 4)


@atexit.register
def _close_all() -> None:
    for viewer in list(_open):
        try:
            viewer.close()
        except Exception:  # noqa: BLE001 - exit goes on; the error was the user's to see earlier
            pass
