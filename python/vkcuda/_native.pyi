"""The native half of vkcuda (Rust, pyo3): what ``vkcuda.Viewer`` calls.
Use ``vkcuda.Viewer``; these signatures are for editors and type checkers."""

from os import PathLike
from typing import Any, Optional, final

__all__ = ["Viewer", "FrameSlot", "read_frame", "__version__"]

__version__: str

@final
class FrameSlot:
    """A frame handed out by ``Viewer.frame()``: an (H, W, 4) tensor over the
    device memory it is shown from (DLPack and ``__cuda_array_interface__``)."""

    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[tuple[int, int]] = None,
        dl_device: Optional[tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...
    @property
    def shape(self) -> tuple[int, int, int]: ...
    @property
    def stream(self) -> int: ...
    def discard(self) -> None: ...

@final
class Viewer:
    def __new__(
        cls,
        out: Optional[str | PathLike[str]] = None,
        every_frame: bool = False,
        validate: bool = False,
        gpu: Optional[str] = None,
        workers: Optional[int] = None,
        window: Optional[tuple[int, int]] = None,
        title: str = "vkcuda",
        serve: Optional[str] = None,
    ) -> "Viewer": ...
    def show(self, x: Any, channels_first: bool = False, block: Optional[bool] = None, stream: Optional[int] = None) -> None: ...
    def begin_frame(
        self, height: int, width: int, dtype: str = "uint8", stream: Optional[int] = None, block: Optional[bool] = None
    ) -> FrameSlot: ...
    def end_frame(self, frame: FrameSlot, block: Optional[bool] = None) -> None: ...
    def flush(self) -> None: ...
    def stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
    @property
    def url(self) -> Optional[str]: ...
    def pointer(self) -> Optional[tuple[int, int, int]]: ...
    def keys(self) -> list[str]: ...
    @property
    def closed(self) -> bool: ...

def read_frame(path: str | PathLike[str], dtype: str) -> tuple[int, int, Any]: ...
