"""The parameter extremes of spec §1 co-simulated against the golden model on Icarus and
Verilator (issue #16): 64-entry queues filled to D, and a 16-channel fabric
(``tb/tests/extremes_tests.py``). The Amaranth-simulator counterparts are
tests/test_hw_channel.py (deep_queues) and tests/test_hw_fabric.py (2x16).
"""

import pytest

from kvfabric.spec import FabricParams
from kvfabric.tb.design import run_cosim
from kvfabric.tb.runner import node_dir, sims_from_env

pytestmark = pytest.mark.cosim

#: C = 16, the most channels, and D = 64, the deepest queues, in one build per simulator
#: (each Verilator build of it takes minutes); 2 tenants keep it small.
EXTREME = FabricParams(tenants=2, channels=16, queue_depth=64)


@pytest.mark.parametrize("scenario", ["deep_queues", "wide_fabric"])
@pytest.mark.parametrize("sim", sims_from_env())
def test_cosim_extremes(sim, scenario, seed, request):
    run_cosim(EXTREME, sim, scenario, node_dir(request.node.nodeid), seed=seed,
              module="kvfabric.tb.tests.extremes_tests")
