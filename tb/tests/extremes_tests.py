"""cocotb: the parameter extremes of spec §1 in the generated Verilog against the golden
model, cycle by cycle: 64-entry queues filled to the brim, and 16 channels.

Run inside the simulator by ``tests/test_cosim_extremes.py``; the lockstep
scoreboard (:mod:`tb.scoreboard`) compares every port and the internal state of
every channel every cycle, and :meth:`tb.env.TB.end_checks` drains and reads
every telemetry register (all 16 ``DROPPED`` words on the wide build).

Environment: ``KVF_PARAMS`` (JSON of FabricParams), ``KVF_SEED``, ``KVF_CYCLES``.
"""

from __future__ import annotations

import random

import cocotb

from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.tb.env import TB, seed_from_env
from kvfabric.tb.stimulus import random_config
from kvfabric.tb.tests.cosim_tests import _cycles, _params, random_traffic


@cocotb.test()
async def deep_queues(dut):
    """A flood that ignores ``queue_full`` for every tenant on two channels, drained
    at 8 B/cycle: every tenant's queue must reach D (the
    telemetry's ``QUEUE_HWM`` read over AXI equals D for every tenant), ready
    must drop, and then everything drains, checked against the model."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=8, honour_queue_full=False, backpressure=0.2)
    await tb.reset()
    # Equal contracts: service alternates, so no tenant drains far ahead of the others.
    await tb.program(FabricConfig([TenantConfig(rate=32, capacity=p.pcap, peak_rate=128,
                                                inv_weight=256, priority=0, enable=1,
                                                slo_cycles=100) for i in range(p.tenants)]))
    t0 = tb.cycle
    # Per channel and tenant D + 24 requests, all tenants interleaved, arriving far faster
    # than 8 B/cycle drains them (a grant per 12 cycles per channel on average).
    # Two channels are enough to fill every tenant's queue; the others stay idle.
    reqs = [(t0 + k // 2, c, i, rng.choice([64, 128]))
            for k in range(p.queue_depth + 24) for c in range(min(2, p.channels))
            for i in range(p.tenants)]
    tb.add(sorted(reqs, key=lambda r: r[0]))
    await tb.run(_cycles(300))
    occupancy = [max(len(q) for q in ch.fifo) for ch in tb.scoreboard.model.channels]
    counters = await tb.end_checks()
    hwm = [t["queue_hwm"] for t in counters["tenants"]]
    tb.log.info("deep queues: high-water marks %s, %d stalled cycles, occupancy at cycle %d: %s",
                hwm, tb.stalls, t0 + _cycles(300), occupancy)
    assert hwm == [p.queue_depth] * p.tenants, f"QUEUE_HWM {hwm}, expected D = {p.queue_depth} each"
    assert tb.stalls > 0, "ready never went low: no queue was full"


@cocotb.test()
async def wide_fabric(dut):
    """Random contracts and traffic on every channel (idle at the drivers,
    backpressure and credit returns at the memory side), reprogrammed mid-traffic
    and with a reset; every channel must have granted requests and dropped
    invalid ones, and the 16 ``DROPPED`` registers must read the model's counts."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=64, idle=0.3, backpressure=0.3, credit_return=0.3)
    await tb.reset()
    span = _cycles(600)
    await tb.program(random_config(p, rng, credits=True))
    random_traffic(tb, rng, count=span, start=tb.cycle, span=span, invalid=0.05)
    await tb.run(span // 2)
    await tb.reset()  # mid-traffic: the model and the RTL both flush
    await tb.program(random_config(p, rng, fcfs=0))
    start = tb.cycle
    random_traffic(tb, rng, count=span, start=start, span=span, invalid=0.05)
    for c in range(p.channels):  # one invalid tenant tag per channel at least (spec §4)
        tb.request(start + span + c, c, 15, 64)
    await tb.run(span // 3)
    await tb.program(random_config(p, rng, fcfs=1))  # reprogrammed under traffic
    counters = await tb.end_checks()
    granted = {c for _, c, *_ in tb.scoreboard.grant_log}
    assert granted == set(range(p.channels)), f"channels that never granted: {set(range(p.channels)) - granted}"
    assert all(counters["dropped"]), f"a channel dropped nothing: DROPPED {counters['dropped']}"
