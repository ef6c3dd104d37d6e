"""The ``vkcuda`` command the wheel brings: the CLI binary inside the package
(``vkcuda/_bin/vkcuda``, built for the same glibc as the module), run in this
process's place, so signals, exit codes and the terminal are its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

BINARY = Path(__file__).resolve().with_name("_bin") / "vkcuda"


def main() -> None:
    if not os.access(BINARY, os.X_OK):
        sys.exit(
            f"vkcuda: this installation has no vkcuda command ({BINARY} is not there): the wheel "
            "(bash scripts/wheel.sh) brings it; a module built from source (pip install ./python) has "
            "none: cargo build --release -p vkcuda-cli builds it. `python -m vkcuda doctor` works either way."
        )
    # argv[0] "vkcuda": the name the command's help and messages use.
    os.execv(BINARY, ["vkcuda", *sys.argv[1:]])
