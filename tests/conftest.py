"""Shared pytest configuration: reproducible seeds, the soak option, and
what keeps the suite short on two cores (Verilator's build level, the
order tests start in, and test bodies on a thread whose frame stack never
maps a new chunk)."""

import fnmatch
import functools
import inspect
import os
import zlib

import pytest

from support.frame_stack import call_with_room


def pytest_addoption(parser):
    parser.addoption("--run-soak", action="store_true", default=False,
                     help="run the long soak tests (make soak)")


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: long random co-simulation, run by `make soak`")
    # The suite's co-simulations run a few thousand cycles each, and building
    # the simulators is most of their time: build Verilator's per-cycle code at
    # -O0 (the default 8 x 8 fabric builds in 59 instead of 93 s). The soak
    # runs millions of cycles and keeps the faster code. A level set by the
    # caller is kept (tb/runner.py, verilator_opt).
    if not config.getoption("--run-soak"):
        os.environ.setdefault("KVFABRIC_VERILATOR_OPT", "-O0")


#: Node ids (fnmatch patterns) of the tests that take half a minute or more
#: from a fresh clone, longest first: they start first, alternating between the
#: two workers (with the Makefile's --maxschedchunk 1), so that the suite does
#: not end with one worker on a long test and the other idle. The second is not one that reads the 8 x 8 Verilog,
#: which the first generates (the other worker would wait for it). From
#: `pytest -n 2 --durations=100 tests` on an idle two-core machine at 1dc4d07
#: (seconds, each including any build it waited for; the Amaranth cases before
#: their cycles were cut). Only the order depends on this list; a missing name
#: costs time, never a test.
LONG_FIRST = [
    "tests/test_cosim.py::test_cosim[[]verilator-no_guarantee_heavy_light[]]",   # 157: 8 x 8 Verilog + build
    "tests/test_cosim_extremes.py::test_cosim_extremes[[]verilator-deep_queues[]]",  # 64: 2 x 16, 64 deep
    "tests/test_trace_cosim.py::test_differential_engines",                   # 65
    "tests/test_hw_fabric.py::test_fabric_vs_model[[]2x16[]]",                 # 114 at 1,500 cycles
    "tests/test_state_budget.py::test_default_fabric",                        # 67: Yosys on the 8 x 8
    "tests/test_cosim_replay.py::test_replay_and_vcd_check[[]verilator[]]",    # 59
    "tests/test_cosim.py::test_cosim_full_fabric[[]icarus[]]",                 # 46
    "tests/test_cosim_axi.py::test_axi_shared_port[[]verilator[]]",            # 42
    "tests/test_hw_channel.py::test_channel_matches_model[[]*",               # 11-49 each
    "tests/test_cosim.py::test_cosim[[]icarus-random_sweep[]]",                # 34
    "tests/test_cosim_replay.py::test_replay_trace_tb_equals_model[[]verilator[]]",  # 33
    "tests/test_cosim_axi.py::test_axi_memory_clock[[]icarus-faster_memory[]]",  # 32
]


def _start_rank(nodeid: str) -> int:
    for rank, pattern in enumerate(LONG_FIRST):
        if fnmatch.fnmatchcase(nodeid, pattern):
            return rank
    return len(LONG_FIRST)


def pytest_collection_modifyitems(config, items):
    # Soak tests are deselected (not skipped) unless asked for, so a normal run
    # never reports them as passed or skipped.
    if not config.getoption("--run-soak"):
        keep, drop = [], []
        for item in items:
            (drop if item.get_closest_marker("soak") else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    # Long tests first (a stable sort: everything else keeps its order).
    items.sort(key=lambda item: _start_rank(item.nodeid))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """Every test body runs through :func:`support.frame_stack.call_with_room`:
    on a thread whose frames never map or unmap a stack chunk, so that a
    test's speed does not depend on how deep pytest and xdist call it (the
    Amaranth simulations ran up to 7 times slower in an xdist worker)."""
    original = pyfuncitem.obj
    if not inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        def in_room(**kwargs):
            return call_with_room(lambda: original(**kwargs))
        pyfuncitem.obj = in_room
    try:
        return (yield)
    finally:
        pyfuncitem.obj = original


def node_seed(nodeid: str) -> int:
    """The seed of one test node: ``KVFABRIC_SEED`` when set (for the whole
    suite), else a fixed function of the node's id, so every run of CI draws
    the same cases and a failure reproduces without any variable."""
    override = os.environ.get("KVFABRIC_SEED", "").strip()
    if override:
        return int(override)
    return zlib.crc32(nodeid.encode())


@pytest.fixture
def seed(request):
    """This node's seed (:func:`node_seed`), printed so a failure names it."""
    value = node_seed(request.node.nodeid)
    print(f"\n[{request.node.nodeid}] seed={value} (run every test with another: KVFABRIC_SEED=<n>)")
    return value
