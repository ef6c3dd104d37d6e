#!/usr/bin/env bash
# Builds the Python package (python/, maturin) into a wheel and runs its tests
# (python/tests, pytest, NumPy arrays) against that wheel, installed into a
# folder of its own under target/. Installs maturin, pytest, NumPy, and
# ipykernel with jupyter_client (the window test in a Jupyter kernel), websocket-client (serve=),
# mypy (the stubs), anywidget, jupyterlab and notebook (the notebook widget) and
# jupyter-server-proxy (the browser view behind JupyterHub's proxy) with pip when
# missing. Prints pytest's summary line ("N passed ...").
#   PYTHON=python3.12 bash scripts/python-test.sh   another interpreter (3.10 or newer)
#   bash scripts/python-test.sh python/tests/test_headless.py [-k NAME]   one file
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
tools=target/python-tools
site=target/python-site
wheels=target/wheels
pip_install() {
    "$python" -m pip install -q --disable-pip-version-check "$@" ||
        "$python" -m pip install -q --disable-pip-version-check --break-system-packages "$@"
}
if ! PYTHONPATH=$tools "$python" -c 'import pytest, numpy, ipykernel, jupyter_client, websocket, mypy, anywidget, jupyterlab, notebook, jupyter_server_proxy' 2>/dev/null ||
    ! { [ -x "$tools/bin/maturin" ] || command -v maturin >/dev/null; }; then
    echo "vkcuda: installing maturin, pytest, numpy, ipykernel, jupyter_client, jupyterlab, notebook and jupyter-server-proxy (from PyPI) into $tools" >&2
    # Afresh: pip --target skips folders that exist (share/jupyter would miss the new front ends' files).
    rm -rf "$tools"
    pip_install --target "$tools" 'maturin>=1.5,<2' pytest numpy ipykernel jupyter_client websocket-client mypy anywidget jupyterlab notebook jupyter-server-proxy
fi
export PYTHONPATH=$tools
maturin=$tools/bin/maturin
[ -x "$maturin" ] || maturin=$(command -v maturin)
rm -rf "$wheels" "$site"
# The README's install command builds the same wheel: pip install ./python
"$maturin" build --release --quiet --manifest-path python/Cargo.toml --interpreter "$python" -o "$wheels"
pip_install --no-deps --target "$site" "$wheels"/vkcuda-*.whl
# The installed wheel, not the source folder: pytest runs from the top, where no vkcuda/ folder shadows it.
# Test files or folders given first run instead of all of python/tests; other arguments go to pytest.
tests=(python/tests)
[ $# -gt 0 ] && [ -e "$1" ] && tests=()
PYTHONPATH=$site:$tools "$python" -m pytest -q -p no:cacheprovider "${tests[@]}" "$@"
