"""The AXI4 top (spec §14) under cocotbext-axi on Icarus and Verilator
(``tb/tests/axi_tests.py``): random bursts from every tenant port into an
``AxiRam`` per channel, with idle cycles and backpressure on every channel of
every bus model, unsupported bursts, a disabled tenant, W beats with a wrong
WLAST, a memory error on
one piece of a split burst, and reset in the middle of traffic. ``KVFABRIC_SEED``
fixes the seed, ``SIM`` the simulators, ``KVFABRIC_AXI_OPS`` the operations
per worker of the random traffic (8 here; ``make regress`` runs 150).
"""

import dataclasses
import os

import pytest

from kvfabric.axi import AxiParams
from kvfabric.spec import FabricParams
from kvfabric.tb.axi_design import run_axi_cosim
from kvfabric.tb.runner import node_dir, sims_from_env

pytestmark = pytest.mark.cosim

#: Small enough to simulate quickly, large enough to split: 3 tenants, 2
#: channels, 32-bit data, 64 B interleave, 4-beat entries (a 256-beat burst
#: becomes many sub-bursts on both channels).
PARAMS = FabricParams(tenants=3, channels=2)
AXI = AxiParams(addr_width=16, data_width=32, id_width=4, interleave_bytes=64, frag_beats=4,
                read_entries=4, write_entries=4)
#: The same with the manager ports on a clock of their own (spec §14.8).
AXI_MEM_CLOCK = dataclasses.replace(AXI, mem_clock=True)
#: The same with one tenant port shared by the tenants (spec §14.9).
AXI_SHARED = dataclasses.replace(AXI, shared_port=True)


@pytest.mark.parametrize("pause", ["none", "idle", "backpressure", "random"])
@pytest.mark.parametrize("sim", sims_from_env())
def test_axi_random_traffic(sim, pause, seed, request):
    run_axi_cosim(PARAMS, AXI, sim, "random_traffic", node_dir(request.node.nodeid), seed=seed,
                  pause=pause, ops=int(os.environ.get("KVFABRIC_AXI_OPS", "8")), workers=2)


@pytest.mark.parametrize("scenario", ["unsupported_bursts", "disabled_tenant", "wrong_wlast", "memory_errors",
                                      "reset_mid_traffic"])
@pytest.mark.parametrize("sim", sims_from_env())
def test_axi_error_paths(sim, scenario, seed, request):
    run_axi_cosim(PARAMS, AXI, sim, scenario, node_dir(request.node.nodeid), seed=seed)


@pytest.mark.parametrize("sim", sims_from_env())
def test_axi_shared_port(sim, seed, request):
    """One tenant port shared by the tenants, the tenant in AxUSER (spec §14.9):
    random traffic from every tenant through one AxiMaster with random pauses
    (IDs drawn from 16, so tenants reuse each other's IDs and the same-ID
    ordering rule is exercised), then bursts naming no tenant."""
    d = node_dir(request.node.nodeid)
    run_axi_cosim(PARAMS, AXI_SHARED, sim, "random_traffic", d / "traffic", seed=seed, pause="random",
                  ops=int(os.environ.get("KVFABRIC_AXI_OPS", "8")), workers=2)
    run_axi_cosim(PARAMS, AXI_SHARED, sim, "shared_port_bad_tenant", d / "bad_tenant", seed=seed)


@pytest.mark.parametrize("mem_period_ns", [7, 23], ids=["faster_memory", "slower_memory"])
@pytest.mark.parametrize("sim", sims_from_env())
def test_axi_memory_clock(sim, mem_period_ns, seed, request):
    """Random traffic with pauses everywhere across the clock crossing, memory
    clock faster and slower than the fabric's 10 ns, then a reset of both
    domains in the middle of traffic."""
    d = node_dir(request.node.nodeid)
    run_axi_cosim(PARAMS, AXI_MEM_CLOCK, sim, "random_traffic", d / "traffic", seed=seed, pause="random",
                  ops=int(os.environ.get("KVFABRIC_AXI_OPS", "6")), workers=2, mem_period_ns=mem_period_ns)
    run_axi_cosim(PARAMS, AXI_MEM_CLOCK, sim, "reset_mid_traffic", d / "reset", seed=seed,
                  mem_period_ns=mem_period_ns)
