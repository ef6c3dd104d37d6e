"""GPU tensors from PyTorch, CuPy, JAX and cuda.core, shown zero-copy: each
case is written by the viewer, read back and compared with the tensor's host
copy (uint8 exactly, floats bit for bit), validated with no message allowed.
Needs an NVIDIA GPU and the library; otherwise each test says
"skipped: <reason>".

Also here: the stream race (a kernel on a non-default stream writes the
tensor, show, an immediate overwrite on that stream, 1,000 times: every
frame holds the value at the call) and 100,000 shows with host and GPU
memory flat; odd sizes through both paths in both modes; a kernel that
faults on the caller's stream is an error, never a hang.
"""

import importlib
import os
import resource

import numpy as np
import pytest

import vkcuda

from test_headless import DTYPES, SHAPES, STRIDES, frames, make, run_python


def library(name):
    try:
        module = __import__(name)
    except Exception as e:  # noqa: BLE001 - any import failure is a reason to skip
        pytest.skip(f"skipped: {name} is not importable ({type(e).__name__}: {e})")
    return module


def torch_gpu():
    torch = library("torch")
    if not torch.cuda.is_available():
        pytest.skip("skipped: no NVIDIA GPU (torch.cuda.is_available() is False)")
    return torch


def cupy_gpu():
    cupy = library("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"skipped: no NVIDIA GPU for CuPy ({e})")
    return cupy


def jax_gpu():
    jax = library("jax")
    try:
        gpus = jax.devices("gpu")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"skipped: no GPU for JAX ({e})")
    return jax, gpus[0]


def cuda_core():
    try:
        core = importlib.import_module("cuda.core")
        core.Device  # noqa: B018 - cuda-core 1.x; 0.x has it under .experimental
    except Exception:  # noqa: BLE001
        try:
            core = importlib.import_module("cuda.core.experimental")
        except Exception as e:  # noqa: BLE001
            pytest.skip(f"skipped: cuda.core is not importable ({type(e).__name__}: {e})")
    try:
        # The default viewer's GPU: the first Vulkan device with a CUDA twin, CUDA device 0
        # on the machines here. A bare Device() is whichever GPU's context is current, and
        # on two GPUs an earlier test's library (PyTorch or JAX on GPU 1) may leave GPU 1's.
        device = core.Device(0)
        device.set_current()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"skipped: no NVIDIA GPU for cuda.core ({e})")
    return core, device


def raw_of(x):
    """The memory under view `x` as a flat array, and where `x` lies in it, in elements."""
    root = x
    while root.base is not None:
        root = root.base
    flat = np.lib.stride_tricks.as_strided(root, (root.size,), (root.itemsize,)).copy()
    offset = (x.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // x.itemsize
    return flat, offset, [s // x.itemsize for s in x.strides]


def to_torch(x):
    torch = torch_gpu()
    flat, offset, strides = raw_of(x)
    return torch.as_strided(torch.from_numpy(flat).cuda(), x.shape, strides, offset)


def to_cupy(x):
    cupy = cupy_gpu()
    flat, offset, strides = raw_of(x)
    g = cupy.asarray(flat)
    return cupy.ndarray(x.shape, x.dtype, g.data + offset * x.itemsize, [s * x.itemsize for s in strides])


def to_jax(x):
    jax, gpu = jax_gpu()
    # JAX arrays have no strides of their own: the values, laid out by JAX.
    return jax.device_put(np.array(x), gpu)


class CoreArray:
    """cuda.core device memory seen through __cuda_array_interface__, ready on `stream`."""

    def __init__(self, buffer, pointer, x, stream):
        self.buffer = buffer  # keeps the memory alive
        self.__cuda_array_interface__ = {
            "data": (pointer, False),
            "shape": tuple(x.shape),
            "strides": tuple(x.strides),
            "typestr": x.dtype.str,
            "stream": int(stream.handle),
            "version": 3,
        }


def to_core(x):
    core, device = cuda_core()
    from cuda.bindings import driver

    stream = device.create_stream()
    flat, offset, _ = raw_of(x)
    buffer = device.allocate(max(flat.nbytes, 1), stream=stream)
    stream.sync()
    (err,) = driver.cuMemcpyHtoD(int(buffer.handle), flat.ctypes.data, flat.nbytes)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return CoreArray(buffer, int(buffer.handle) + offset * x.itemsize, x, stream)


PRODUCERS = {"torch": to_torch, "cupy": to_cupy, "jax": to_jax, "cuda.core": to_core}


@pytest.mark.parametrize("strides", STRIDES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_gpu_tensors_are_written_as_they_are(tmp_path, producer, dtype, shape, strides):
    x, expected = make(dtype, shape, strides, height=41, width=67, seed=3)
    shown_as_written(tmp_path, PRODUCERS[producer](x), expected, channels_first=shape.startswith("chw"))


def shown_as_written(folder, x, expected, channels_first=False):
    """Shows `x` once, validated, into `folder`: the frame written is `expected`, byte for byte."""
    with vkcuda.Viewer(out=folder, validate=True) as v:
        v.show(x, channels_first=channels_first)
        v.flush()
        s = v.stats()
    assert (s["validation_errors"], s["validation_warnings"]) == (0, 0), s
    assert (s["shown"], s["written"]) == (1, 1), s
    [name] = frames(folder)
    got = vkcuda.read_frame(folder / name, expected.dtype.name)
    assert got.shape == expected.shape
    differing = np.count_nonzero(got.view(np.uint8) != np.ascontiguousarray(expected).view(np.uint8))
    assert differing == 0, f"{differing} bytes differ"


@pytest.mark.parametrize("strides", STRIDES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_torch_cpu_tensor_is_shown_from_the_host(tmp_path, dtype, strides):
    # A PyTorch CPU tensor has no __array_interface__: it is read through its DLPack capsule.
    torch = library("torch")
    x, expected = make(dtype, "hw3", strides, height=41, width=67, seed=5)
    t = torch.from_numpy(x)
    assert t.device.type == "cpu" and not hasattr(t, "__array_interface__")
    shown_as_written(tmp_path, t, expected)


def test_the_frame_is_the_tensor_at_the_call_on_its_stream(tmp_path):
    torch = torch_gpu()
    n = 1000
    side = torch.cuda.Stream()
    x = torch.zeros((64, 96, 4), dtype=torch.uint8, device="cuda")
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        with torch.cuda.stream(side):
            for i in range(n):
                x.fill_(i % 251)  # a kernel on the non-default stream writes x
                v.show(x)  # on the current stream: `side`
                x.fill_(255)  # the immediate overwrite, on the same stream
        v.flush()
        s = v.stats()
    assert (s["validation_errors"], s["validation_warnings"]) == (0, 0), s
    assert (s["shown"], s["written"], s["replaced"]) == (n, n, 0), s
    wrong = []
    for i, name in enumerate(frames(tmp_path)):
        got = vkcuda.read_frame(tmp_path / name)
        if not (got == i % 251).all():
            wrong.append((name, i % 251, sorted(set(np.unique(got).tolist()))[:4]))
    assert not wrong, f"{len(wrong)} of {n} frames differ from the value at the call (name, want, got): {wrong[:5]}"
    print(f"stream race: {n} frames, {len(wrong)} differ")


def test_a_named_stream_orders_the_frame(tmp_path):
    cupy = cupy_gpu()
    s = cupy.cuda.Stream(non_blocking=True)
    x = cupy.zeros((33, 17), dtype=cupy.uint8)
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        for i in range(50):
            with s:
                x.fill(i)
            v.show(x, stream=s)
            with s:
                x.fill(255)
    for i, name in enumerate(frames(tmp_path)):
        assert (vkcuda.read_frame(tmp_path / name)[:, :, 0] == i).all(), name


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_100000_shows_keep_memory_flat():
    torch = torch_gpu()
    n = int(os.environ.get("VKCUDA_SHOWS", "100000"))
    x = torch.rand((270, 480, 4), device="cuda")
    with vkcuda.Viewer(headless=True, validate=False) as v:
        for _ in range(2000):
            v.show(x)
        torch.cuda.synchronize()
        free0, _ = torch.cuda.mem_get_info()
        rss0 = rss_mib()
        for i in range(n):
            x[0, 0, 0] = i
            v.show(x)
        torch.cuda.synchronize()
        free1, _ = torch.cuda.mem_get_info()
        rss1 = rss_mib()
        s = v.stats()
    gpu_growth = (free0 - free1) / 2**20
    print(f"{n} shows: host RSS {rss0:.1f} -> {rss1:.1f} MiB, GPU used +{gpu_growth:.1f} MiB, {s}")
    assert s["shown"] == n + 2000
    assert rss1 - rss0 < 8, (rss0, rss1)
    assert gpu_growth < 8, gpu_growth
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0


def two_gpus():
    """torch, and the UUIDs of CUDA devices 0 and 1 (Vulkan may number them otherwise)."""
    torch = torch_gpu()
    if torch.cuda.device_count() < 2:
        pytest.skip(f"skipped: needs two GPUs, torch sees {torch.cuda.device_count()}")
    return torch, [str(torch.cuda.get_device_properties(i).uuid).removeprefix("GPU-") for i in range(2)]


def current_cuda_device():
    """The CUDA device of the calling thread's current context (the driver's view), or None."""
    from cuda.bindings import driver

    err, ctx = driver.cuCtxGetCurrent()
    assert err == driver.CUresult.CUDA_SUCCESS, err
    if int(ctx) == 0:
        return None
    err, device = driver.cuCtxGetDevice()
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return int(device)


@pytest.mark.parametrize("mine", [0, 1])
def test_a_tensor_on_another_gpu_is_refused(mine):
    torch, uuids = two_gpus()
    other = 1 - mine
    x = torch.zeros((4, 4), dtype=torch.uint8, device=f"cuda:{other}")
    before = current_cuda_device()
    with vkcuda.Viewer(headless=True, gpu=uuids[mine]) as v:
        with pytest.raises(RuntimeError, match=f"CUDA device {other}, this viewer on") as e:
            v.show(x)
        assert v.stats()["shown"] == 0
    assert current_cuda_device() == before, (current_cuda_device(), before)
    print(e.value)


@pytest.mark.parametrize("mine", [0, 1])
def test_each_gpu_shows_its_own_tensors(tmp_path, mine):
    """The viewer made on a tensor's GPU (by UUID) shows it, and a frame written in place there."""
    torch, uuids = two_gpus()
    device = f"cuda:{mine}"
    x = torch.arange(37 * 53 * 4, device=device).reshape(37, 53, 4).to(torch.uint8)
    before = current_cuda_device()
    with vkcuda.Viewer(out=tmp_path, validate=True, gpu=uuids[mine]) as v:
        assert uuids[mine].replace("-", "")[:8] in v.stats()["device"].replace("-", "").lower(), v.stats()
        v.show(x)
        with torch.cuda.device(mine), v.frame(37, 53) as f:
            t = torch.from_dlpack(f)
            assert t.device == torch.device(device), t.device
            t.copy_(x.flip(0))
        v.flush()
        s = v.stats()
    assert (s["validation_errors"], s["validation_warnings"]) == (0, 0), s
    assert (s["shown"], s["written"]) == (2, 2), s
    # The viewer binds its GPU's context for its own calls, and gives the caller's back.
    assert current_cuda_device() == before, (current_cuda_device(), before)
    first, second = (vkcuda.read_frame(tmp_path / n) for n in frames(tmp_path))
    assert (first == x.cpu().numpy()).all() and (second == x.flip(0).cpu().numpy()).all()


def test_gpu_dtypes_outside_the_list_are_refused():
    torch = torch_gpu()
    with vkcuda.Viewer(headless=True) as v:
        for dtype, name in [(torch.int32, "int32"), (torch.bfloat16, "bfloat16"), (torch.float64, "float64")]:
            with pytest.raises(TypeError, match=name):
                v.show(torch.zeros((4, 4), dtype=dtype, device="cuda"))


FILL = r"""
extern "C" __global__ void fill(unsigned char* out, unsigned int value, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (unsigned char)value;
}
"""


def test_a_cuda_core_kernel_on_its_stream_orders_the_frame(tmp_path):
    core, device = cuda_core()
    stream = device.create_stream()
    program = core.Program(FILL, code_type="c++", options=core.ProgramOptions(arch=f"sm_{device.arch}"))
    fill = program.compile("cubin").get_kernel("fill")
    h, w, n = 31, 45, 200
    buffer = device.allocate(h * w, stream=stream)
    x = CoreArray(buffer, int(buffer.handle), np.zeros((h, w), np.uint8), stream)
    config = core.LaunchConfig(grid=(h * w + 255) // 256, block=256)
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        for i in range(n):
            core.launch(stream, config, fill, buffer, np.uint32(i % 251), np.uint32(h * w))
            v.show(x, stream=stream)  # __cuda_stream__: the kernel's stream
            core.launch(stream, config, fill, buffer, np.uint32(255), np.uint32(h * w))
        v.flush()
        s = v.stats()
    assert (s["validation_errors"], s["validation_warnings"], s["written"]) == (0, 0, n), s
    rgb = lambda f: vkcuda.read_frame(tmp_path / f)[:, :, :3]  # noqa: E731 - grey: alpha is opaque
    wrong = [f for i, f in enumerate(frames(tmp_path)) if not (rgb(f) == i % 251).all()]
    assert not wrong, f"{len(wrong)} of {n} frames differ from the value at the call"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("producer", ["torch", "cupy"])
def test_frames_written_in_place(tmp_path, producer, dtype):
    name = np.dtype(dtype).name
    n, h, w = 40, 37, 59
    values = [np.array(i % 200, dtype) for i in range(n)]
    lib = torch_gpu() if producer == "torch" else cupy_gpu()
    side = lib.cuda.Stream() if producer == "torch" else lib.cuda.Stream(non_blocking=True)
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        for i in range(n):
            with v.frame(h, w, name) as f:
                if producer == "torch":
                    with torch_gpu().cuda.stream(side):
                        t = torch_gpu().from_dlpack(f)  # torch names its current stream: `side`
                        t.fill_(float(values[i]))
                else:
                    with side:
                        t = lib.from_dlpack(f)
                        t.fill(values[i])
        v.flush()
        s = v.stats()
    assert (s["validation_errors"], s["validation_warnings"], s["written"]) == (0, 0, n), s
    for i, f in enumerate(frames(tmp_path)):
        got = vkcuda.read_frame(tmp_path / f, name)
        assert got.shape == (h, w, 4) and (got == values[i]).all(), (f, values[i], np.unique(got)[:4])


@pytest.mark.parametrize("inside", ["raise", "show", "flush"])
def test_a_frame_whose_block_fails_is_not_shown(tmp_path, inside):
    """The block raises; or shows with every frame, which would wait for the block's own
    frame (an error, not a wait that never ends); or flushes, which ends the run (leaving
    the block says the frame is not shown). The next frame is shown."""
    torch = torch_gpu()
    error, match = {"raise": (ZeroDivisionError, None), "show": (RuntimeError, r"written in place \(frame\(\)\)"),
                    "flush": (RuntimeError, "run ended")}[inside]
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        with pytest.raises(error, match=match):
            with v.frame(8, 8) as f:
                torch.from_dlpack(f).fill_(7)
                if inside == "raise":
                    1 / 0
                elif inside == "show":
                    v.show(torch.zeros((8, 8, 4), dtype=torch.uint8, device="cuda"))
                else:
                    v.flush()
        with v.frame(8, 8) as f:
            torch.from_dlpack(f).fill_(9)
        v.flush()
        s = v.stats()
    assert (s["shown"], s["written"], s["validation_errors"], s["validation_warnings"]) == (1, 1, 0, 0), s
    assert (vkcuda.read_frame(tmp_path / frames(tmp_path)[0]) == 9).all()


def test_newest_wins_mixes_frames_written_in_place_and_shown_on_two_streams(tmp_path):
    """Frames written in place (the shared buffer itself, or a slot while Vulkan reads it) and
    shown tensors, on two streams, newest wins: the frames written are some of the values, in
    the order given, the last one last (each frame's signal waits for the one before)."""
    torch = torch_gpu()
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    n, h, w = 120, 45, 67
    x = torch.zeros((h, w, 4), dtype=torch.uint8, device="cuda")
    with vkcuda.Viewer(out=tmp_path, every_frame=False, validate=True) as v:
        for i in range(n):
            if i % 2:
                with torch.cuda.stream(a):
                    x.fill_(i)
                    v.show(x)
            else:
                with torch.cuda.stream(b), v.frame(h, w) as f:
                    torch.from_dlpack(f).fill_(i)
        v.flush()
        s = v.stats()
    assert (s["validation_errors"], s["validation_warnings"], s["shown"]) == (0, 0, n), s
    got = [int(vkcuda.read_frame(tmp_path / f)[0, 0, 0]) for f in frames(tmp_path)]
    assert got == sorted(set(got)) and got[-1] == n - 1, got
    for f in frames(tmp_path):
        frame = vkcuda.read_frame(tmp_path / f)
        assert (frame[..., :3] == frame[0, 0, 0]).all(), f


def test_newest_wins_never_shows_a_frame_whose_pack_was_skipped(tmp_path):
    """Newest wins while the consumer writes PNGs (far behind), in bursts of 8 shows each ended by
    a flush: in each burst most shows are replaced, and a replaced frame's pack that has not run
    yet skips its work, while the burst's last frame (a slot the producer copies) must be packed
    whole. Every frame written is one value whole, the values rise, the last shown is last."""
    torch = torch_gpu()
    side = torch.cuda.Stream()
    bursts, size, h, w = 30, 8, 767, 1021
    x = torch.zeros((h, w, 4), dtype=torch.uint8, device="cuda")
    with vkcuda.Viewer(out=tmp_path, every_frame=False, validate=True) as v:
        for b in range(bursts):
            with torch.cuda.stream(side):
                for i in range(b * size, (b + 1) * size):
                    x.fill_(i)
                    v.show(x)
                    x.fill_(255)  # the immediate overwrite, on the same stream
            v.flush()
        s = v.stats()
    n = bursts * size
    assert (s["validation_errors"], s["validation_warnings"], s["shown"]) == (0, 0, n), s
    assert s["replaced"] > 0, s
    got = []
    for f in frames(tmp_path):
        frame = vkcuda.read_frame(tmp_path / f)
        assert (frame == frame[0, 0, 0]).all(), f"{f}: not one value whole: {np.unique(frame)[:6]}"
        got.append(int(frame[0, 0, 0]))
    assert got == sorted(set(got)) and got[-1] == n - 1, got
    ends = [(b + 1) * size - 1 for b in range(bursts)]
    assert set(ends) <= set(got), f"a burst's last frame is missing: {sorted(set(ends) - set(got))}"
    print(f"newest wins: {n} shown, {s['replaced']} replaced, {len(got)} written, all whole")


def test_a_show_inside_a_frame_block_waits_for_it_without_spinning(tmp_path):
    """Newest wins: a tensor shown while a frame is written in place waits in a slot; the
    producer waits for the block to end without burning a core, and the frame written in
    place, shown last, replaces it."""
    import time

    torch = torch_gpu()
    x = torch.full((8, 8, 4), 4, dtype=torch.uint8, device="cuda")
    with vkcuda.Viewer(out=tmp_path, every_frame=False, validate=True) as v:
        v.show(x, block=True)  # waits until the run makes frames: frame 1's buffer is then free
        with v.frame(8, 8) as f:
            torch.from_dlpack(f).fill_(3)
            v.show(x)
            cpu = time.process_time()
            time.sleep(0.3)  # the window the process's CPU is measured in, not a wait for a state
            cpu = time.process_time() - cpu
        v.flush()
        s = v.stats()
    assert cpu < 0.15, f"{cpu:.2f} s of CPU in 0.3 s while a frame was written in place"
    assert (s["shown"], s["replaced"], s["written"], s["validation_errors"]) == (3, 1, 2, 0), s
    assert [int(vkcuda.read_frame(tmp_path / f)[0, 0, 0]) for f in frames(tmp_path)] == [4, 3]


ODD = [(1, 1), (1, 3), (3, 1), (1, 1021), (1021, 1), (7, 5)]


@pytest.mark.parametrize("every", [True, False], ids=["every", "newest"])
@pytest.mark.parametrize("size", ODD, ids=[f"{h}x{w}" for h, w in ODD])
def test_odd_sizes_shown_and_written_in_place(tmp_path, size, every):
    """Tensors shown and frames written in place, alternating on a side stream, at sizes whose
    rows are one element or not a multiple of the packing kernel's 16x16 blocks, uint8 and float32:
    every frame (or, newest wins, the last) is the value at its call, whole."""
    torch = torch_gpu()
    h, w = size
    side = torch.cuda.Stream()
    for dt, name in [(torch.uint8, "uint8"), (torch.float32, "float32")]:
        out = tmp_path / name
        values = [(i * 37 + 5) % 251 for i in range(6)]
        with vkcuda.Viewer(out=out, every_frame=every, validate=True) as v, torch.cuda.stream(side):
            for i, value in enumerate(values):
                if i % 2:
                    v.show(torch.full((h, w, 4), value, dtype=dt, device="cuda"))
                else:
                    with v.frame(h, w, name) as f:
                        torch.from_dlpack(f).fill_(value)
            v.flush()
            s = v.stats()
        assert (s["validation_errors"], s["validation_warnings"], s["shown"]) == (0, 0, 6), s
        got = [vkcuda.read_frame(out / f, name) for f in frames(out)]
        assert all(g.shape == (h, w, 4) and (g == g[0, 0, 0]).all() for g in got), name
        seen = [int(g[0, 0, 0]) for g in got]
        assert seen == values if every else seen[-1] == values[-1], (name, seen, values)


FAULT = """
    import sys, time, cupy, vkcuda
    mode, path, out = sys.argv[1:]
    bad = cupy.RawKernel(r'extern "C" __global__ void bad(unsigned char* p) { p[1ull << 44] = 1; }', "bad")
    x = cupy.zeros((33, 17, 4), dtype=cupy.uint8)
    s = cupy.cuda.Stream(non_blocking=True)
    v = vkcuda.Viewer(out=out, every_frame=mode == "every", validate=True)
    widget = v.watch()
    for i in range(3):
        with s:
            x.fill(i)
        v.show(x, stream=s)
    v.flush()
    with s:
        bad((1,), (1,), (x,))
    t = time.monotonic()
    try:
        for i in range(1000000):
            if path == "frame":
                with s, v.frame(33, 17):
                    pass
            else:
                v.show(x, stream=s)
        print("no error")
    except RuntimeError as e:
        print(f"raised after {time.monotonic() - t:.2f} s: {str(e).splitlines()[0]}")
    said = widget.status()["run"]["error"]
    print("the widget and page say:", said and said.splitlines()[0])
    t = time.monotonic()
    try:
        v.close()
        print(f"closed in {time.monotonic() - t:.2f} s")
    except RuntimeError as e:
        print(f"closed in {time.monotonic() - t:.2f} s raising: {str(e).splitlines()[0]}")
    s = v.stats()
    print("validation", s["validation_errors"], s["validation_warnings"])
"""


@pytest.mark.parametrize("path", ["show", "frame"])
@pytest.mark.parametrize("every", [True, False], ids=["every", "newest"])
def test_a_kernel_fault_on_the_callers_stream_is_an_error_not_a_hang(tmp_path, every, path):
    """A kernel faults on the caller's stream, and the caller goes on showing (or writing frames
    in place): Vulkan would wait for those frames forever. The show (or frame) raises CUDA's
    error within seconds, which the notebook widget and the page then say over their last frame;
    close() returns at once, no validation message, no panic. In a process of its own: a fault
    spoils the CUDA context for good."""
    cupy_gpu()
    mode = "every" if every else "newest"
    done = run_python(FAULT, timeout=90, args=[mode, path, str(tmp_path)])
    lines = done.stdout.splitlines()
    print(f"fault, {mode}, {path}: {lines}")
    assert "panicked" not in done.stderr, done.stderr[-2000:]
    raised = [ln for ln in lines if ln.startswith("raised after")]
    assert raised and "CUDA_ERROR_ILLEGAL_ADDRESS" in raised[0], (lines, done.stderr[-2000:])
    assert float(raised[0].split()[2]) < 5, raised
    said = [ln for ln in lines if ln.startswith("the widget and page say:")]
    assert said and "CUDA_ERROR_ILLEGAL_ADDRESS" in said[0], lines
    closed = [ln for ln in lines if ln.startswith("closed in")]
    assert closed and float(closed[0].split()[2]) < 3, (lines, done.stderr[-2000:])
    assert "validation 0 0" in lines, lines
