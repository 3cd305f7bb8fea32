"""Shared pytest configuration: reproducible seeds and the soak option."""

import os
import random

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


@pytest.fixture
def seed(request):
    """A random seed, printed, and taken from KVFABRIC_SEED when set."""
    value = int(os.environ.get("KVFABRIC_SEED", random.randrange(1 << 32)))
    print(f"\n[{request.node.name}] seed={value} (reproduce with KVFABRIC_SEED={value})")
    return value
