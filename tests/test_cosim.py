"""Co-simulation of the generated Verilog against the golden model (issue #4).

Each node runs one cocotb scenario of ``tb/tests/cosim_tests.py`` on one
simulator, in its own directory under ``build/cocotb/runs/`` (results, log,
``dump.vcd`` with ``WAVES=1``); the simulator model of each parameter set is
built once and shared (``tb/runner.py``).  ``SIM=icarus`` or
``SIM=verilator`` restricts the simulators; ``KVFABRIC_SEED`` fixes the seed.
A failure message carries the scoreboard's first mismatch: cycle, channel,
field, expected, actual and the seed.
"""

import pytest

from kvfabric.spec import FabricParams
from kvfabric.tb.design import run_cosim
from kvfabric.tb.runner import node_dir, sims_from_env

pytestmark = pytest.mark.cosim

#: 4 tenants on 2 channels: every mechanism, small enough for thousands of
#: checked cycles per second.
SMALL = FabricParams(tenants=4, channels=2)
#: Narrow tags (T = 12) and LMAX = 256, so V and every tag wrap within a few
#: hundred cycles while costs stay far below the half range (spec §6.5).
NARROW = FabricParams(tenants=4, channels=2, max_request_bytes=256, tag_bits=12)
#: The default 8 tenants x 8 channels, whose simulator build test_cosim_full_fabric shares.
FULL = FabricParams()

SCENARIOS = {
    "random_sweep": SMALL,
    "essay_prefill_vs_decode": SMALL,
    "oversubscription_priorities": SMALL,
    "idle_tenant_share": SMALL,
    "starvation_attempt": SMALL,
    "reprogram_under_traffic": SMALL,
    "reset_mid_burst": SMALL,
    "invalid_tags": SMALL,
    "tag_wraparound": NARROW,
    "full_queue_pushback": SMALL,
    "credit_classes": SMALL,
    "coordinator_skew": SMALL,
    "no_guarantee_heavy_light": FULL,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("sim", sims_from_env())
def test_cosim(sim, scenario, seed, request):
    run_cosim(SCENARIOS[scenario], sim, scenario, node_dir(request.node.nodeid), seed=seed)


@pytest.mark.parametrize("sim", sims_from_env())
def test_cosim_full_fabric(sim, seed, request):
    """The default 8 tenants x 8 channels build, random traffic with
    reconfiguration and reset, every cycle checked (the Verilator build takes
    about 3 minutes on 2 loaded cores since tb/runner.py compiles start-up
    code at -O0)."""
    run_cosim(FULL, sim, "random_long", node_dir(request.node.nodeid), seed=seed,
              cycles=3000)


@pytest.mark.soak
@pytest.mark.parametrize("sim", sims_from_env())
def test_cosim_soak(sim, seed, request):
    """``make soak``: one million checked cycles of random traffic per simulator,
    with reconfiguration, FCFS phases and resets (seed printed above)."""
    run_cosim(SMALL, sim, "random_long", node_dir(request.node.nodeid), seed=seed,
              cycles=1_000_000)
