"""X and Z on a compared signal are mismatches on Icarus, the one 4-state
simulator (issue #16): the monitor's readers raise instead of reading 0."""

import pytest

from kvfabric.spec import FabricParams
from kvfabric.tb.design import build_for
from kvfabric.tb.runner import run, sims_from_env

pytestmark = pytest.mark.cosim


@pytest.mark.skipif("icarus" not in sims_from_env(), reason="needs Icarus (SIM excludes it)")
def test_undriven_inputs_read_as_x_on_icarus(tmp_path):
    build = build_for(FabricParams(tenants=4, channels=2), "icarus")
    run(build, "kvfabric.tb.tests.xcheck_tests", tmp_path)  # raises if the cocotb test failed
