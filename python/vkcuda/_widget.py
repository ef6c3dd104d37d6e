"""The notebook widget (anywidget): a viewer's frames in an output cell,
through Jupyter's own connection. The kernel side joins the viewer's hub
(``Viewer._native.watch()``), as a page of the browser view would, and a
thread pumps each frame drawn for it to the page as one comm message with
one buffer; the page's messages (its canvas size, acknowledgements, keys,
pointer) come back through the same comm. A new canvas size while nothing
newer is shown has the viewer show its last array again."""

from __future__ import annotations

import json
import pathlib
import threading
import time
from typing import Any, Optional

import anywidget
import traitlets


class ViewerWidget(anywidget.AnyWidget):
    """A live view of a :class:`vkcuda.Viewer` in a notebook cell."""

    _esm = pathlib.Path(__file__).parent / "widget.js"
    _css = """
    .vkcuda-widget canvas { width: 100%; aspect-ratio: 16 / 9; display: block; background: #000; outline: none; }
    .vkcuda-widget .vkcuda-status { font: 12px monospace; color: #888; padding: 2px 0; }
    """
    mode = traitlets.Unicode("jpeg").tag(sync=True)
    quality = traitlets.Int(80).tag(sync=True)
    # The canvas's size in CSS pixels; empty: the cell's width, 16:9.
    size = traitlets.List(traitlets.Int(), default_value=[]).tag(sync=True)

    def __init__(
        self, viewer: Any, *, mode: str = "jpeg", quality: int = 80, size: Optional[tuple] = None, **kwargs: Any
    ) -> None:
        super().__init__(mode=mode, quality=quality, size=list(size or ()), **kwargs)
        self._viewer = viewer
        # The viewer's count of frames shown when this widget last got one (or joined).
        self._shown_at = viewer._shown
        self._client = viewer._native.watch()
        self._stop = threading.Event()
        self.on_msg(self._on_page)
        self._pump = threading.Thread(target=self._run, name="vkcuda widget", daemon=True)
        self._pump.start()

    def _on_page(self, _widget: Any, content: Any, _buffers: Any) -> None:
        try:
            reply = self._client.message(json.dumps(content))
        except ValueError:
            self._client.close()
            return
        if reply is not None:
            self.send(json.loads(reply))
        if content.get("t") == "canvas":
            # A new canvas size: the last frame again if no newer one is coming.
            self._viewer._still(self._shown_at)

    def _run(self) -> None:
        status_at = 0.0
        while not self._stop.is_set():
            frame = self._client.next(0.25)
            if frame is not None:
                self._shown_at = self._viewer._shown
                self.send({"t": "frame"}, buffers=[frame])
            elif self._client.closed:
                break
            if time.monotonic() - status_at > 0.5:
                status_at = time.monotonic()
                self.send(json.loads(self._client.status()))
        self.send({"t": "closed"})

    def close(self) -> None:
        """Stops the frames (the page keeps the last one) and closes the widget."""
        self._stop.set()
        self._client.close()
        if self._pump is not threading.current_thread():
            self._pump.join(timeout=5)
        super().close()
