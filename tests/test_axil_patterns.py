"""The AXI pause patterns of the cocotb testbench (tb/axil.py), without a simulator:
reproducible from a seed, pausing as much as their names say, and never in step
across channels (the cocotb runs then check what they did on the bus)."""

import itertools
import random

import pytest

from kvfabric.tb.axil import PAUSE_PATTERNS, pause_pattern


def _take(name, seed, n=4000):
    return list(itertools.islice(pause_pattern(name, random.Random(seed)), n))


@pytest.mark.parametrize("name", PAUSE_PATTERNS)
def test_pattern_reproducible_and_paced(name, seed):
    cycles = _take(name, seed)
    assert cycles == _take(name, seed), "the same seed must give the same pattern"
    share = sum(cycles) / len(cycles)
    low, high = {"none": (0, 0), "random": (0.15, 0.65), "bursts": (0.5, 0.85),
                 "periodic": (0.45, 0.85), "heavy": (0.8, 0.9)}[name]
    assert low <= share <= high, f"{name}: paused {share:.2f} of the cycles"
    if name != "none":
        # Runs of pauses and of free cycles both occur; bursts pause at most 12
        # cycles in a row, periodic at most 5 (a period of 5 and a slip).
        runs = [len(list(g)) for v, g in itertools.groupby(cycles) if v]
        assert runs and not all(cycles)
        assert max(runs) <= {"bursts": 12, "periodic": 5}.get(name, len(cycles))


def test_periodic_channels_come_apart(seed):
    """Two channels drawing the same period must not stay in step (else AW and W
    would always handshake together)."""
    rng = random.Random(seed)
    apart = 0
    for _ in range(20):
        a, b = (pause_pattern("periodic", random.Random(rng.random())) for _ in range(2))
        apart += any(x != y for x, y in itertools.islice(zip(a, b), 400))
    assert apart == 20


def test_unknown_pattern():
    with pytest.raises(ValueError, match=r"pause pattern must be one of .*not 'sometimes'"):
        pause_pattern("sometimes", random.Random(0))
