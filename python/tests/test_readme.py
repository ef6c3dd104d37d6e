"""The README's Python examples, run as they are written.

Every fenced ```python block of the top-level README.md is compiled, and run
in a fresh interpreter (its own working folder, a timeout) with the module
this suite tests. A block that needs what a machine may lack says so on the
line before its fence, in a comment GitHub does not show:

    <!-- readme-test: needs cuda display -->

`cuda`: an NVIDIA GPU with PyTorch; `display`: a window system ($DISPLAY or
$WAYLAND_DISPLAY). Where one is missing the block is skipped with the reason
(lavapipe in CI has neither), never passed.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent.parent / "README.md"
MARK = re.compile(r"<!--\s*readme-test:\s*needs\s+([a-z ]+?)\s*-->")


def python_blocks(text):
    """(line of the fence, needs, code) of each ```python block of `text`."""
    blocks, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].startswith("```"))
            mark = MARK.search(lines[i - 1]) if i > 0 else None
            needs = mark.group(1).split() if mark else []
            blocks.append((i + 1, needs, "\n".join(lines[start:end]) + "\n"))
            i = end
        i += 1
    return blocks


BLOCKS = python_blocks(README.read_text())
IDS = [f"README.md:{line}" for line, _, _ in BLOCKS]


def cuda_missing():
    """Why a CUDA-with-PyTorch block cannot run here, or None."""
    if importlib.util.find_spec("torch") is None:
        return "needs an NVIDIA GPU with PyTorch: torch is not installed"
    probe = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.stdout.strip() != "True":
        return "needs an NVIDIA GPU with PyTorch: torch.cuda.is_available() is not True"
    return None


def display_missing():
    """Why a block that opens a window cannot run here, or None."""
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    return "needs a display: neither $DISPLAY nor $WAYLAND_DISPLAY is set"


NEEDS = {"cuda": cuda_missing, "display": display_missing}


def test_the_readme_has_python_examples_and_their_needs_are_known():
    assert BLOCKS, f"no ```python block in {README}"
    unknown = [(line, n) for line, needs, _ in BLOCKS for n in needs if n not in NEEDS]
    assert not unknown, f"unknown needs (known: {sorted(NEEDS)}): {unknown}"
    # The reader: a mark is read from the line before the fence only.
    text = "a\n<!-- readme-test: needs cuda display -->\n```python\nx = 1\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == [(3, ["cuda", "display"], "x = 1\n"), (6, [], "y = 2\n")]


@pytest.mark.parametrize("line,needs,code", BLOCKS, ids=IDS)
def test_the_readme_example_compiles(line, needs, code):
    compile(code, f"README.md:{line}", "exec")


@pytest.mark.parametrize("line,needs,code", BLOCKS, ids=IDS)
def test_the_readme_example_runs(line, needs, code, tmp_path):
    missing = [why for why in (NEEDS[need]() for need in needs) if why]
    if missing:
        pytest.skip(f"README.md:{line} " + "; ".join(missing))
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    assert done.returncode == 0, f"README.md:{line} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
