"""The module is typed: the wheel carries ``py.typed`` and the native half's
stubs, mypy's stubtest finds the stubs true to the compiled module (every
name, every parameter), the package type-checks, and ``help(vkcuda.Viewer)``
documents every argument. Needs mypy (scripts/python-test.sh installs it)."""

import inspect
import os
import subprocess
import sys

import pytest

import vkcuda

mypy = pytest.importorskip("mypy", reason="mypy is not installed")


def run_mypy(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


def test_the_wheel_carries_its_types():
    folder = os.path.dirname(vkcuda.__file__)
    assert os.path.isfile(os.path.join(folder, "py.typed"))
    assert os.path.isfile(os.path.join(folder, "_native.pyi"))


def test_the_stubs_are_true_to_the_compiled_module():
    result = run_mypy("mypy.stubtest", "vkcuda._native")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


def test_the_package_type_checks():
    result = run_mypy("mypy", "--no-incremental", "-p", "vkcuda")
    assert result.returncode == 0, result.stdout + result.stderr


def test_help_documents_every_argument():
    doc = inspect.getdoc(vkcuda.Viewer) or ""
    for name in inspect.signature(vkcuda.Viewer).parameters:
        assert f"{name}:" in doc, f"Viewer's docstring does not document {name}"
    for method in ["show", "frame", "flush", "stats", "close", "pointer", "keys"]:
        assert inspect.getdoc(getattr(vkcuda.Viewer, method)), f"Viewer.{method} has no docstring"
