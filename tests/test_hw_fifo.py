"""HeadQueue against a Python deque, every cycle (Amaranth simulator).

Random pushes and pops at depths 1 to 16. Checks the head,
the head after a pop (``pop_data``, from which the channel precomputes the next
cycle's key), the ring's oldest entry (``ring_data``), ``r_rdy`` and ``level``. The seed is random, printed, and
taken from ``KVFABRIC_SEED`` when set (the ``seed`` fixture).
"""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from kvfabric.hw.fifo import HeadQueue


@pytest.mark.parametrize("depth", [1, 2, 4, 8, 16])
def test_head_queue_matches_deque(depth, seed):
    rng = random.Random(seed)
    dut = HeadQueue(16, depth)
    ref = deque()
    counts = {"push_pop": 0, "full": 0}

    async def testbench(ctx):
        for cycle in range(1500):
            where = f"cycle {cycle}, reference {list(ref)}"
            assert ctx.get(dut.level) == len(ref), where
            assert ctx.get(dut.r_rdy) == (len(ref) > 0), where
            if ref:
                assert ctx.get(dut.r_data) == ref[0], where
            # Bias towards a full queue half of the time, an empty one otherwise.
            p_push = 0.7 if (cycle // 200) % 2 else 0.35
            push = len(ref) < depth and rng.random() < p_push
            pop = len(ref) > 0 and rng.random() < 0.5
            data = rng.randrange(1 << 16)
            ctx.set(dut.w_en, push)
            ctx.set(dut.w_data, data)
            ctx.set(dut.r_en, pop)
            if len(ref) >= 2 or push:
                after_pop = ref[1] if len(ref) >= 2 else data
                assert ctx.get(dut.pop_data) == after_pop, f"{where}: pop_data"
            if len(ref) >= 2:
                assert ctx.get(dut.ring_data) == ref[1], f"{where}: ring_data"
            counts["push_pop"] += push and pop
            counts["full"] += len(ref) == depth
            if pop:
                ref.popleft()
            if push:
                ref.append(data)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    print(counts)
    # A queue of one entry never pushes and pops in one cycle (push needs room).
    assert counts["full"] > 50 and (depth == 1 or counts["push_pop"] > 50), counts
