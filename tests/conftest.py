"""Shared pytest configuration: reproducible seeds and the soak option."""

import os
import zlib

import pytest


def pytest_addoption(parser):
    parser.addoption("--run-soak", action="store_true", default=False,
                     help="run the long soak tests (make soak)")


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: long random co-simulation, run by `make soak`")


def pytest_collection_modifyitems(config, items):
    # Soak tests are deselected (not skipped) unless asked for, so a normal run
    # never reports them as passed or skipped.
    if config.getoption("--run-soak"):
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("soak") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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
