"""The Python module headless, with NumPy arrays: every case is shown, written,
read back and compared with the array it came from (uint8 exactly, floats
within half a unit of their last place: the GPU copies them bit for bit, so
they compare equal), with the validation layer on and no message allowed.

Runs anywhere Vulkan does (lavapipe in CI). GPU tensors are not part of this
file: they need an NVIDIA GPU.
"""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import vkcuda

DTYPES = [np.uint8, np.float16, np.float32]
SHAPES = ["hw", "hw1", "hw3", "hw4", "chw3"]
STRIDES = ["contiguous", "every-other", "transposed"]


def make(dtype, shape, strides, height=37, width=53, seed=0):
    """An array of `shape` kind with `strides` kind, and its expected RGBA frame."""
    rng = np.random.default_rng(seed)
    channels = {"hw": 1, "hw1": 1, "hw3": 3, "hw4": 4, "chw3": 3}[shape]
    # Drawn larger when a view picks every other element.
    scale = 2 if strides == "every-other" else 1
    full = (height * scale, width * scale, channels)
    if dtype == np.uint8:
        base = rng.integers(0, 256, size=full, dtype=np.uint8)
    else:
        base = rng.uniform(-2.0, 4.0, size=full).astype(dtype)
    if strides == "every-other":
        base = base[::2, ::2]
    elif strides == "transposed":
        # The same values held column-major: strides that are not C order.
        base = np.asfortranarray(base)
    hwc = base
    one = np.array(255 if dtype == np.uint8 else 1.0, dtype=dtype)
    rgb = np.repeat(hwc, 3, axis=2) if channels == 1 else hwc[:, :, :3]
    alpha = hwc[:, :, 3:4] if channels == 4 else np.broadcast_to(one, (height, width, 1))
    expected = np.concatenate([rgb, alpha], axis=2)
    if shape == "hw":
        x = hwc[:, :, 0]
    elif shape == "chw3":
        x = hwc.transpose(2, 0, 1)  # a view: channel planes with the array's own strides
    else:
        x = hwc
    return x, expected


def frames(folder):
    return sorted(f for f in os.listdir(folder) if f.startswith("frame_"))


def clean(v):
    s = v.stats()
    assert (s["validation_errors"], s["validation_warnings"]) == (0, 0), s
    return s


@pytest.mark.parametrize("strides", STRIDES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_shown_frames_are_written_as_the_array(tmp_path, dtype, shape, strides):
    x, expected = make(dtype, shape, strides)
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        v.show(x, channels_first=shape.startswith("chw"))
        v.flush()
        s = clean(v)
    assert (s["shown"], s["consumed"], s["written"], s["replaced"]) == (1, 1, 1, 0), s
    [name] = frames(tmp_path)
    assert name == ("frame_000000.png" if dtype == np.uint8 else "frame_000000.exr")
    got = vkcuda.read_frame(tmp_path / name, np.dtype(dtype).name)
    assert got.shape == expected.shape
    if dtype == np.uint8:
        assert np.array_equal(got, expected), f"{np.count_nonzero(got != expected)} values differ"
    else:
        # Half a unit of the last place: the copy is exact, so this is equality.
        assert np.allclose(got, expected, rtol=np.finfo(dtype).eps / 2, atol=0), np.abs(got - expected).max()


def test_a_host_array_with_a_stream_named_is_shown_from_the_host(tmp_path):
    # With a stream named, show() asks __dlpack__ for the capsule without __dlpack_device__:
    # NumPy's capsule says host memory, and the array goes through the host.
    x, expected = make(np.uint8, "hw4", "contiguous")
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        v.show(x, stream=1)
        v.flush()
        s = clean(v)
    assert (s["shown"], s["written"]) == (1, 1), s
    assert np.array_equal(vkcuda.read_frame(tmp_path / "frame_000000.png"), expected)


class HostDlpack:
    """A host tensor known only through DLPack, as a PyTorch CPU tensor is:
    no __array_interface__ (NumPy's capsule stands in for the producer's)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@pytest.mark.parametrize("stream", [None, 1], ids=["no-stream", "stream"])
@pytest.mark.parametrize("shape, strides", [("hw4", "contiguous"), ("hw3", "transposed"), ("hw", "every-other")])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_host_dlpack_tensor_is_shown(tmp_path, dtype, shape, strides, stream):
    x, expected = make(dtype, shape, strides)
    host = HostDlpack(x)
    assert not hasattr(host, "__array_interface__")
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        v.show(host, stream=stream)
        v.flush()
        s = clean(v)
    assert (s["shown"], s["written"]) == (1, 1), s
    [name] = frames(tmp_path)
    got = vkcuda.read_frame(tmp_path / name, np.dtype(dtype).name)
    assert np.array_equal(got, expected), f"{np.count_nonzero(got != expected)} values differ"


def test_an_exporter_that_refuses_raises_its_own_error():
    # show() calls again on the tensor's device only for a PyTorch CUDA tensor on another
    # device than PyTorch's current one (test_gpu.py); any other BufferError is the caller's.
    class Refusing:
        def __dlpack__(self, **kwargs):
            raise BufferError("no export today")

    with vkcuda.Viewer(validate=True) as v:
        with pytest.raises(BufferError, match="no export today"):
            v.show(Refusing(), stream=1)  # with a stream named, __dlpack__ is the first call
        s = clean(v)
    assert s["shown"] == 0, s


def test_a_new_size_or_dtype_between_calls_is_followed(tmp_path):
    sizes = [(1, 1), (3, 5), (64, 33), (3, 5)]
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        for i, (h, w) in enumerate(sizes):
            v.show(np.full((h, w, 4), i, np.uint8))
        v.show(np.full((2, 2), 0.25, np.float32))
        v.flush()
        s = clean(v)
    assert s["written"] == len(sizes) + 1, s
    names = frames(tmp_path)
    assert names[-1] == f"frame_{len(sizes):06}.exr", names
    for i, (h, w) in enumerate(sizes):
        got = vkcuda.read_frame(tmp_path / names[i])
        assert got.shape == (h, w, 4) and (got == i).all(), (names[i], got.shape)


def test_every_frame_of_a_dump_is_kept(tmp_path):
    n = 60
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        for i in range(n):
            v.show(np.full((17, 29), i, np.uint8))
    s = clean(v)
    assert (s["shown"], s["written"], s["replaced"]) == (n, n, 0), s
    for i, name in enumerate(frames(tmp_path)):
        assert (vkcuda.read_frame(tmp_path / name)[:, :, 0] == i).all(), name


def wait_for_stats(v, done, timeout=60):
    """`v.stats()` once `done(stats)` holds, checking on the way that no count runs ahead
    of the one before it (written <= consumed <= shown); fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        s = v.stats()
        assert s["written"] <= s["consumed"] <= s["shown"], s
        if done(s):
            return s
        assert time.monotonic() < deadline, f"stats() never got there: {s}"
        time.sleep(0.005)  # the consumer thread (lavapipe) needs the CPU


def test_stats_count_the_run_in_progress_and_add_up_over_runs(tmp_path):
    """The run in progress counts in stats() while it goes on (no flush(): its consumer
    and writers are still at work); each new size ends a run, whose counts then count
    once, in the totals, beside the next run's."""
    runs = [(5, (16, 16)), (3, (8, 12)), (4, (16, 16))]
    shown = 0
    with vkcuda.Viewer(out=tmp_path, validate=True) as v:
        for n, (h, w) in runs:
            for i in range(n):
                v.show(np.full((h, w, 4), i, np.uint8))
            shown += n
            s = wait_for_stats(v, lambda s: s["written"] == shown)
            assert (s["shown"], s["consumed"], s["written"], s["replaced"]) == (shown, shown, shown, 0), s
            assert s["producer"] == "fed", s  # host arrays: the fed producer, in this process
            assert len(frames(tmp_path)) == shown  # each one counted once its file is there
        v.flush()
        assert v.stats()["written"] == shown
    s = clean(v)
    assert (s["shown"], s["consumed"], s["written"]) == (shown, shown, shown), s


def test_newest_wins_and_counts_the_frames_it_replaced():
    n = 400
    with vkcuda.Viewer(headless=True, validate=True) as v:
        for i in range(n):
            v.show(np.full((256, 256, 4), i % 256, np.uint8))
    s = clean(v)
    assert s["shown"] == n
    # Every frame shown was consumed or replaced by a newer one, never both, never neither.
    assert s["consumed"] + s["replaced"] == n, s
    assert s["consumed"] >= 1, s


def test_the_caller_may_overwrite_the_array_right_after_show(tmp_path):
    x = np.zeros((9, 11), np.uint8)
    with vkcuda.Viewer(out=tmp_path) as v:
        for i in range(20):
            x[:] = i
            v.show(x)
            x[:] = 255  # after show returns: must not reach frame i
    for i, name in enumerate(frames(tmp_path)):
        assert (vkcuda.read_frame(tmp_path / name)[:, :, 0] == i).all(), name


@pytest.mark.parametrize(
    "x, error, words",
    [
        (np.zeros((4, 4), np.int64), TypeError, ["int64", "uint8, float16 or float32"]),
        (np.zeros((4, 4), np.float64), TypeError, ["float64"]),
        (np.zeros((4, 4, 2), np.uint8), ValueError, ["[4, 4, 2]", "HxWx3"]),
        (np.zeros((4,), np.uint8), ValueError, ["[4]"]),
        (np.zeros((2, 4, 4, 3), np.uint8), ValueError, ["[2, 4, 4, 3]"]),
        (np.zeros((0, 4), np.uint8), ValueError, ["no pixels"]),
        ([[1, 2], [3, 4]], TypeError, ["list", "__array_interface__", "__dlpack__"]),
        ("pixels", TypeError, ["str"]),
    ],
    ids=["int64", "float64", "two-channels", "1d", "4d", "empty", "list", "str"],
)
def test_bad_input_says_what_was_given_and_what_is_accepted(x, error, words):
    with vkcuda.Viewer(headless=True, validate=True) as v:
        with pytest.raises(error) as e:
            v.show(x)
        message = str(e.value)
        assert "\n" not in message and all(w in message for w in words), message
        # The viewer still works after a refusal.
        v.show(np.zeros((2, 2), np.uint8))
        clean(v)


def test_channels_first_is_asked_for():
    with vkcuda.Viewer(headless=True) as v:
        with pytest.raises(ValueError, match="CxHxW"):
            v.show(np.zeros((5, 4, 4), np.uint8), channels_first=True)


def test_a_frame_larger_than_the_device_allows_is_refused():
    with vkcuda.Viewer(headless=True) as v:
        big = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=(1, 1 << 20), strides=(0, 0))
        with pytest.raises(ValueError, match="larger than this device"):
            v.show(big)


def test_a_closed_viewer_refuses_and_closes_again_quietly():
    v = vkcuda.Viewer(headless=True)
    v.show(np.zeros((2, 2), np.uint8))
    v.close()
    assert v.closed
    v.close()
    with pytest.raises(RuntimeError, match="closed"):
        v.show(np.zeros((2, 2), np.uint8))


def test_garbage_collection_writes_what_was_shown(tmp_path):
    v = vkcuda.Viewer(out=tmp_path)
    for i in range(5):
        v.show(np.full((3, 3), i, np.uint8))
    del v
    gc.collect()
    assert len(frames(tmp_path)) == 5


def run_python(script, timeout=120, extra_env=None, args=()):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_interpreter_exit_writes_what_was_shown(tmp_path):
    done = run_python(
        f"""
        import numpy as np, vkcuda
        v = vkcuda.Viewer(out={str(tmp_path)!r}, validate=True)
        for i in range(7):
            v.show(np.full((5, 6, 3), i, np.uint8))
        print("left without close")
        """
    )
    assert done.returncode == 0, done.stderr
    assert len(frames(tmp_path)) == 7, (frames(tmp_path), done.stderr)


def test_ctrl_c_in_the_users_loop_stops_cleanly(tmp_path):
    # SIGINT arrives while the loop shows frames: KeyboardInterrupt in the
    # user's code, and every frame shown before it is written at exit. Python
    # raises KeyboardInterrupt only where SIGINT was not ignored when it
    # started (a job started with & or nohup ignores it): the script puts
    # Python's handler back, as an interactive session has it, whatever this
    # process was started with (CI runs this test once with SIGINT ignored).
    done = run_python(
        f"""
        import os, signal, numpy as np
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import vkcuda
        v = vkcuda.Viewer(out={str(tmp_path)!r}, validate=True)
        shown = 0
        try:
            for i in range(100000):
                v.show(np.full((64, 64, 4), i % 256, np.uint8))
                shown += 1
                if i == 30:
                    os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            print("interrupted after", shown)
            v.close()
            s = v.stats()
            print("written", s["written"], "errors", s["validation_errors"], "warnings", s["validation_warnings"])
        """
    )
    assert done.returncode == 0, done.stderr
    shown = int(done.stdout.split("interrupted after ")[1].split()[0])
    assert 31 <= shown <= 40, done.stdout
    assert f"written {shown} errors 0 warnings 0" in done.stdout, done.stdout
    assert len(frames(tmp_path)) == shown


def test_a_missing_vulkan_is_reported_when_a_viewer_is_made():
    done = run_python(
        """
        import vkcuda
        try:
            vkcuda.Viewer(headless=True)
        except RuntimeError as e:
            print("RuntimeError:", e)
        """,
        extra_env={"VKCUDA_LIBVULKAN": "/nonexistent/libvulkan.so.1"},
    )
    assert done.returncode == 0, done.stderr
    assert "RuntimeError: vkcuda:" in done.stdout and "libvulkan" in done.stdout, done.stdout


def test_import_needs_no_gpu():
    # No device is touched until a viewer is made: not even a Vulkan loader is needed.
    done = run_python("import vkcuda; print(vkcuda.__version__)", extra_env={"VKCUDA_LIBVULKAN": "/nonexistent"})
    assert done.returncode == 0 and done.stdout.strip() == vkcuda.__version__, done.stderr


def test_signal_module_is_untouched():
    # vkcuda installs no signal handler of its own: whatever handles SIGINT and
    # SIGTERM before it is imported and runs a viewer (Python's handler, or
    # SIG_IGN in a job started with & or nohup) still does after it closes.
    done = run_python(
        """
        import signal, numpy as np
        before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
        import vkcuda
        with vkcuda.Viewer(headless=True) as v:
            v.show(np.zeros((4, 4), np.uint8))
            during = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
        after = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
        print("SIGINT", before[0], "same:", before == during == after)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "same: True" in done.stdout, done.stdout


def test_frame_in_place_needs_a_cuda_device():
    with vkcuda.Viewer(headless=True) as v:
        if "NVIDIA" in v.stats()["device"]:
            pytest.skip("skipped: this test is for a machine without CUDA (test_gpu.py writes frames in place)")
        with pytest.raises(RuntimeError, match="no CUDA device matches"):
            with v.frame(4, 4):
                pass
        with pytest.raises(TypeError, match="int16"):
            with v.frame(4, 4, "int16"):
                pass


class FarCudaArray:
    """An array in CUDA memory, as the CUDA array interface says it."""

    __cuda_array_interface__ = {"shape": (4, 4, 4), "typestr": "|u1", "data": (1 << 40, False), "version": 3}


def test_a_cuda_array_where_cuda_cannot_be_loaded_is_an_error_that_says_so():
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("skipped: CUDA's driver library is here (test_gpu.py shows CUDA arrays)")
    except OSError:
        pass
    with vkcuda.Viewer(headless=True) as v:
        with pytest.raises(RuntimeError, match="an array in CUDA memory, and .*libcuda.so") as raised:
            v.show(FarCudaArray())
        assert "internal error" not in str(raised.value), raised.value
        v.show(np.zeros((4, 4, 4), np.uint8))  # a host array still goes through
        v.flush()
        assert v.stats()["consumed"] == 1


def test_no_message_names_a_cli_flag():
    # The run layer names a run's fields as types, and the module words them (gpu=...);
    # tests/architecture.rs checks the sources for flags, this reads the messages the user
    # gets, from the paths this machine can reach (test_window.py: no display).
    with pytest.raises(RuntimeError) as no_device:
        vkcuda.Viewer(headless=True, gpu="99")
    messages = [str(no_device.value)]
    with vkcuda.Viewer(headless=True) as v:
        if "NVIDIA" not in v.stats()["device"]:  # with CUDA, frame() works (test_gpu.py)
            with pytest.raises(RuntimeError) as no_cuda:
                with v.frame(4, 4):
                    pass
            messages.append(str(no_cuda.value))
    assert 'gpu="99" names no device' in messages[0], messages[0]
    for m in messages:
        assert m.startswith("vkcuda:") and "--" not in m, m
