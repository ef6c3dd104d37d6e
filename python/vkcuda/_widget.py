"""The notebook widget (anywidget): a viewer's frames in an output cell,
through Jupyter's own connection. The kernel side is a ``Viewer.watch()``
watcher, as a page of the browser view would be; a thread pumps each frame
drawn for it to the page as one comm message with one buffer; the page's
messages (what it decodes, its canvas size, acknowledgements, keys,
pointer) come back through the same comm. The page's code is the view's
one client module (``_native.CLIENT_JS``, embedded in the binary) and
widget.js. The widget takes a watcher when a view of it first speaks (its
hello, or a canvas said before it): a notebook run with no page
(``jupyter nbconvert --execute``, papermill) displays as many as it likes,
none holding one of the viewer's watchers; a page takes at most one per
widget however often it speaks. Each view says goodbye when its output goes
(a cleared or re-run cell): with no view left, the watcher leaves the
viewer, and the next view to speak joins it again."""

from __future__ import annotations

import json
import pathlib
import threading
import time
from typing import Any, Optional

import anywidget
import traitlets

from . import _native

# What the widget tells its views, as the module words it (protocol.rs's ToPage): the
# message each frame's buffer comes with, and why frames stop.
_FRAME: dict = json.loads(_native.frame_message())


def _closed(reason: str) -> dict:
    return json.loads(_native.closed_message(reason))


class ViewerWidget(anywidget.AnyWidget):
    """A live view of a :class:`vkcuda.Viewer` in a notebook cell."""

    _esm = _native.CLIENT_JS + "\n" + (pathlib.Path(__file__).parent / "widget.js").read_text()
    _css = """
    .vkcuda-widget canvas { width: 100%; aspect-ratio: 16 / 9; display: block; background: #000; outline: none; }
    .vkcuda-widget .vkcuda-status { font: 12px monospace; color: #888; padding: 2px 0; }
    .vkcuda-widget { position: relative; }
    .vkcuda-widget .vkcuda-fault { position: absolute; left: 8px; right: 8px; top: 8px; padding: 8px;
      font: 12px monospace; background: #400c; color: #fcc; border: 1px solid #c44; white-space: pre-wrap; }
    """
    mode = traitlets.Unicode("auto").tag(sync=True)
    quality = traitlets.Int(_native.DEFAULT_QUALITY).tag(sync=True)
    # The canvas's size in CSS pixels; empty: the cell's width, 16:9.
    size = traitlets.List(traitlets.Int(), default_value=[]).tag(sync=True)

    def __init__(
        self, viewer: Any, *, mode: str = "auto", quality: Optional[int] = None, size: Optional[tuple] = None,
        **kwargs: Any,
    ) -> None:
        # What close() and __del__ need, first: a widget refused here still closes.
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._viewer = viewer
        self._views = 0
        self._watcher: Any = None
        self._pump: Optional[threading.Thread] = None
        if viewer.closed:
            raise RuntimeError("vkcuda: the viewer is closed")
        quality = _native.DEFAULT_QUALITY if quality is None else quality
        super().__init__(mode=mode, quality=quality, size=list(size or ()), **kwargs)
        self.on_msg(self._on_page)

    def _join(self) -> Optional[str]:
        """Joins the viewer (again) and starts pumping its frames; why not, when it cannot
        (the viewer's watchers are all taken)."""
        try:
            self._watcher = self._viewer.watch()
        except RuntimeError as e:
            return str(e).removeprefix("vkcuda: ")
        self._pump = threading.Thread(target=self._run, args=(self._watcher,), name="vkcuda widget", daemon=True)
        self._pump.start()
        return None

    def _on_page(self, _widget: Any, content: Any, _buffers: Any) -> None:
        reply = self._answer(content)
        if reply is not None:
            self.send(reply)

    def _answer(self, content: Any) -> Optional[dict]:
        """What a view's message does: the first one joins the viewer; the reply, if any."""
        with self._lock:
            kind = content.get("t") if isinstance(content, dict) else None
            joined = self._watcher is not None and not self._watcher.closed
            if kind == "hello":
                self._views += 1
            if kind == "bye":
                # Another view of this widget may still show it (a page that says it too often counts none).
                self._views = max(0, self._views - 1)
                if self._views > 0 or not joined:
                    return None
            elif not joined:
                if self._stop.is_set() or self._viewer.closed:
                    return None
                refused = self._join()
                if refused is not None:
                    return _closed(refused)
            try:
                return self._watcher.message(content)
            except ValueError:
                self._watcher.close()
                return None

    def _run(self, watcher: Any) -> None:
        status_at = 0.0
        while not self._stop.is_set():
            frame = watcher.next(0.25)
            if frame is not None:
                self.send(_FRAME, buffers=[frame])
            elif watcher.closed:
                break
            if time.monotonic() - status_at > 0.5:
                status_at = time.monotonic()
                self.send(watcher.status())
        if self._viewer.closed or self._stop.is_set():
            self.send(_closed("the viewer closed"))

    def close(self) -> None:
        """Stops the frames (the page keeps the last one) and closes the widget."""
        with self._lock:  # no view's message joins after this
            self._stop.set()
        if self._watcher is not None:
            self._watcher.close()
        if self._pump is not None and self._pump is not threading.current_thread():
            self._pump.join(timeout=5)
        super().close()
