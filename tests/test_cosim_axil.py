"""The AXI4-Lite register file of the generated Verilog under idle cycles and
backpressure on every channel, sub-word (partial strobe, unaligned) accesses and
every response code (spec §9, issue #16), against the golden model on Icarus and
Verilator. One node per pause pattern and simulator (``tb/tests/axil_tests.py``);
``KVFABRIC_SEED`` fixes the seed, ``SIM`` the simulators.
"""

import pytest

from kvfabric.spec import FabricParams
from kvfabric.tb.design import run_cosim
from kvfabric.tb.runner import node_dir, sims_from_env
from kvfabric.tb.tests.axil_tests import STRESS

pytestmark = pytest.mark.cosim

#: tests/test_cosim.py's 4 tenants on 2 channels (the same simulator builds; tenant
#: 4's registers are unmapped addresses).
PARAMS = FabricParams(tenants=4, channels=2)


@pytest.mark.parametrize("pattern", STRESS)
@pytest.mark.parametrize("sim", sims_from_env())
def test_axil_stress(sim, pattern, seed, request):
    run_cosim(PARAMS, sim, f"axil_stress/pattern={pattern}", node_dir(request.node.nodeid),
              seed=seed, module="kvfabric.tb.tests.axil_tests")
