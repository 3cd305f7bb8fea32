"""cocotb scenarios: the generated Verilog of kvfabric against the golden model.

Run inside the simulator by ``tests/test_cosim.py`` (one pytest node per
scenario and simulator).  Every scenario runs the lockstep scoreboard of
:mod:`tb.scoreboard` on every cycle and ends with :meth:`tb.env.TB.end_checks`
(all queues drained, every accepted request granted exactly once, telemetry
counters read over AXI equal to the model's).  Scenario-specific checks of the
spec's bounds (§7) come on top, computed from the grant log.

Environment: ``KVF_PARAMS`` (JSON of FabricParams), ``KVF_SEED``, and
``KVF_CYCLES`` to scale the random scenario (the soak run).
"""

from __future__ import annotations

import os
import random
import tomllib
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import cocotb

from kvfabric.model.contract import compile_contract
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.model.scenario import (HEAVY_LIGHT_BYTES_PER_CYCLE, HEAVY_LIGHT_REQUEST_BYTES, essay_trace,
                                     heavy_light_contract)
from kvfabric.tb.design import params_from_json
from kvfabric.examples import example_path
from kvfabric.tb.env import TB, seed_from_env
from kvfabric.tb.stimulus import random_config, random_credits, random_requests, random_size
from kvfabric.tb.axil import CREDITS, credits_word
from kvfabric.spec import BURST, COORD_LATENCY, COORD_MIN_EPOCH, URGENT



def _params():
    return params_from_json(os.environ["KVF_PARAMS"])


def _cycles(default: int) -> int:
    return int(os.environ.get("KVF_CYCLES", default))


def random_traffic(tb: TB, rng: random.Random, count: int, *, start: int, span: int,
                   invalid: float = 0.02) -> None:
    """Queue :func:`kvfabric.tb.stimulus.random_requests` on ``tb``'s drivers."""
    tb.add(sorted(random_requests(tb.params, rng, count, start=start, span=span, invalid=invalid),
                  key=lambda r: r[0]))


def grant_records(tb: TB):
    """(request, grant_cycle, kind) for every grant, joining the scoreboard's log with
    the stimulus (the request's arrival cycle is the stimulus cycle)."""
    issued = tb.issued
    out = []
    for cyc, ch, tenant, nbytes, rid, kind in tb.scoreboard.grant_log:
        out.append((issued[(ch, rid)], cyc, kind))
    return out


# ---------------------------------------------------------------------------------------------
@cocotb.test()
@cocotb.parametrize(credit_return=[0.05, 0.4])
async def credit_classes(dut, credit_return):
    """Spec §6.6: small random ``CREDITS`` limits, random ``credit_return`` bits
    (often with nothing in flight), the limits rewritten over AXI mid-traffic
    and a starvation limit that makes urgent (kind 3) grants. The scoreboard
    compares grants and every ``inflight[k]`` every cycle."""
    p = _params()
    seed = seed_from_env() ^ int(credit_return * 100) << 12
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=rng.choice([32, 64]), idle=0.2,
            backpressure=0.2, credit_return=credit_return)
    blocked = [0]

    def count_blocked(tb):
        blocked[0] += any(not all(ch.has_credit()) and any(ch.fifo)
                          for ch in tb.scoreboard.model.channels)
    tb.on_cycle = count_blocked
    await tb.reset()
    cfg = replace(random_config(p, rng, credits=True), starve_limit=rng.choice([16, 40, 100]),
                  credits=(rng.choice([1, 2]), rng.choice([1, 2]), rng.choice([1, 3])))
    await tb.program(cfg)
    cycles = _cycles(1500)
    random_traffic(tb, rng, count=cycles // 2, start=tb.cycle, span=cycles)
    for _ in range(3):
        await tb.run(cycles // 4)
        await tb.run_task(tb.axil.write_dword(CREDITS, credits_word(random_credits(rng), rng.randrange(16),
                                                                    rng.randrange(16))))
    await tb.end_checks()
    kinds = [k for *_, k in tb.scoreboard.grant_log]
    tb.log.info("credit_classes: %d cycles with a backlogged class out of credit, kinds %s",
                blocked[0], {k: kinds.count(k) for k in set(kinds)})
    assert blocked[0] > 0, "no head ever waited for credit"
    assert URGENT in kinds, "no urgent grant"


@cocotb.test()
@cocotb.parametrize(idle=[0.0, 0.6], backpressure=[0.0, 0.5])
async def random_sweep(dut, idle, backpressure):
    """Constrained-random configuration and traffic, swept over idle insertion at the
    drivers and extra backpressure at the memory side."""
    p = _params()
    seed = seed_from_env() ^ (int(idle * 10) << 8) ^ int(backpressure * 10)
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=rng.choice([32, 64, 100]),
            idle=idle, backpressure=backpressure)
    await tb.reset()
    await tb.program(random_config(p, rng))
    cycles = _cycles(500)
    random_traffic(tb, rng, count=cycles // 5, start=tb.cycle, span=cycles)
    await tb.end_checks()


@cocotb.test()
async def random_long(dut):
    """The soak: ``KVF_CYCLES`` cycles of random traffic, reconfigured, reset and
    switched to FCFS now and then, the coordinator on in some phases, checked
    every cycle."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    total = _cycles(3000)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=64, idle=0.3, backpressure=0.2)
    await tb.reset()
    phase = coordinated = 0
    while tb.total_cycles < total:
        fcfs = int(rng.random() < 0.15)
        tb.drivers_config(idle=rng.choice([0.0, 0.3, 0.7]))
        tb.memory.backpressure = rng.choice([0.0, 0.2, 0.6])
        tb.memory.credit_return = rng.choice([0.0, 0.1, 0.5])
        credits = bool(tb.memory.credit_return) and rng.random() < 0.5
        # The coordinator (spec §13) in some phases: long enough for epochs to end.
        span = min(20000, max(500, total - tb.total_cycles))
        coordinator = span > 2 * COORD_MIN_EPOCH and rng.random() < 0.4
        arrival = rng.random() < 0.3  # arrival-ordered priorities (spec §6.2) in some phases
        bulk_run = rng.random() < 0.3  # the bulk run (spec §6.2) in some phases
        await tb.program(random_config(p, rng, fcfs=fcfs, credits=credits, coordinator=coordinator,
                                       arrival=arrival, bulk_run=bulk_run))
        coordinated += coordinator
        random_traffic(tb, rng, count=span // rng.choice([2, 4, 8]), start=tb.cycle, span=span)
        if rng.random() < 0.2:
            await tb.run(rng.randrange(span))
            await tb.reset()  # mid-traffic
        else:
            await tb.drain()
        phase += 1
    tb.log.info("soak: %d phases (%d with the coordinator), %d cycles, seed %d", phase, coordinated,
                tb.total_cycles, seed)
    await tb.end_checks()


# ---------------------------------------------------------------------------------------------
def _essay_contract(p):
    """examples/essay.toml scaled to this build's tenants and channels."""
    doc = tomllib.loads(example_path("essay.toml").read_text())
    # Same per-channel contract as the essay's 8 channels: scale the totals.
    scale = p.channels / doc["fabric"]["channels"]
    for t in doc["tenant"]:
        t["guaranteed_gbps"] *= scale
        t["burst_gbps"] *= scale
    doc["fabric"]["channels"] = p.channels
    doc["fabric"]["tenants"] = p.tenants
    doc["fabric"]["queue_depth"] = p.queue_depth
    doc["fabric"]["max_request_bytes"] = p.max_request_bytes
    # The essay's 10 ms epoch is 10^7 cycles; take snapshots within the test.
    doc["fabric"]["epoch_ms"] = 0.0005
    return compile_contract(doc, source="essay (scaled)")


@cocotb.test()
async def essay_prefill_vs_decode(dut):
    """The essay's scenario: one prefill tenant floods 4 KiB reads while three decode
    tenants issue steady 256 B steps (model/scenario.py, scaled down)."""
    p = _params()
    seed = seed_from_env()
    compiled = _essay_contract(p)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=compiled.bytes_per_cycle)
    await tb.reset()
    await tb.program(compiled.config)
    t0 = tb.cycle
    rows = essay_trace(p.channels, prefill_bytes=256 << 10, prefill_start=300,
                       prefill_issue_per_cycle=2, decode_step_bytes=4 << 10, step_cycles=400,
                       cycles=_cycles(2400), seed=seed)
    tb.add((t0 + r.cycle, r.channel, r.tenant, r.bytes) for r in rows)
    await tb.end_checks()
    recs = grant_records(tb)
    waits = {t: sorted(g - r.cycle for r, g, _ in recs if r.tenant == t) for t in range(4)}
    assert all(waits[t] for t in range(4)), "every tenant of the essay is served"
    # The prefill is a flood far beyond its guaranteed rate; the decodes conform.
    # The fabric keeps decode waits short while the prefill queue waits long.
    decode_p99 = max(w[int(0.99 * (len(w) - 1))] for t, w in waits.items() if t)
    prefill_p50 = waits[0][len(waits[0]) // 2]
    tb.log.info("essay: decode p99 wait %d cycles, prefill p50 wait %d cycles", decode_p99, prefill_p50)
    assert decode_p99 < prefill_p50, (decode_p99, prefill_p50, seed)


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def oversubscription_priorities(dut):
    """All tenants flood one channel with committed rates that add up to twice the
    memory side's bandwidth, at four priorities.  Checks the burst envelope of §7
    (guaranteed bytes <= capacity/8 + w*rate/8) and that priority 0 gets its rate."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    B = 32
    tb = TB(dut, p, seed=seed, bytes_per_cycle=B, backpressure=0.1)
    await tb.reset()
    n = p.tenants
    share = 2 * 8 * B // n  # sum of rates = 2 * B (UQ13.3)
    cfg = FabricConfig([TenantConfig(rate=share, capacity=2 * p.pcap, peak_rate=8 * 4 * B,
                                     inv_weight=256 * n, priority=i % 4, enable=1, slo_cycles=100)
                        for i in range(n)], starve_limit=0)
    await tb.program(cfg)
    t0 = tb.cycle
    span = _cycles(1500)
    # Every tenant has far more queued upstream than the window can serve: all stay
    # backlogged.  At the end of the window upstream withdraws what was not accepted.
    reqs = []
    for i in range(n):
        for k in range(2 * B * span // 600 // n + p.queue_depth + 2):
            reqs.append((t0 + k % 8, 0, i, rng.choice([256, 512, 1024])))
    reqs.sort(key=lambda r: r[0])
    tb.add(reqs)
    await tb.run(span)
    tb.withdraw()
    await tb.end_checks()
    recs = grant_records(tb)
    end = max(g for _, g, _ in recs)
    for i in range(n):
        guaranteed = sum(r.bytes for r, g, k in recs if r.tenant == i and k == 0)
        bound = cfg.tenants[i].capacity / 8 + (end - t0 + 1) * cfg.tenants[i].rate / 8 + p.max_request_bytes
        assert guaranteed <= bound, f"tenant {i}: {guaranteed} guaranteed bytes > envelope {bound} (seed {seed})"
    # Priority 0 is always first among conforming heads: it is served at its rate.
    got = sum(r.bytes for r, g, k in recs if r.tenant == 0 and g < t0 + span)
    want = cfg.tenants[0].rate / 8 * span - cfg.tenants[0].capacity / 8 - p.max_request_bytes
    tb.log.info("oversubscription: priority-0 tenant got %d bytes in %d cycles (rate bound %d)",
                got, span, want)
    assert got >= want, f"priority-0 tenant got {got} bytes < {want} (seed {seed})"


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def idle_tenant_share(dut):
    """Pure burst path, equal priority and weights 1:2:4:..: while the last tenant is
    idle its share flows to the others in proportion to their weights (WF2Q+ bound
    of §7: |served_i - phi_i/sum(phi) * total| <= 2 LMAX + TAG_UNIT*N at every
    grant); when it wakes up it gets its own share back."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=64)
    await tb.reset()
    n = p.tenants
    weights = [1 << min(i, 3) for i in range(n)]
    cfg = FabricConfig([TenantConfig(rate=0, capacity=0, peak_rate=8 * p.max_request_bytes,
                                     inv_weight=min(65535, 256 * sum(weights) // w), priority=0,
                                     enable=1, slo_cycles=0) for w in weights])
    await tb.program(cfg)
    t0 = tb.cycle
    span = _cycles(1200)
    idle = n - 1
    wake = t0 + span // 2
    # More queued upstream than the channel drains in the window: every active
    # tenant stays backlogged; upstream withdraws the rest at the end.
    reqs = []
    for i in range(n):
        first = wake if i == idle else t0
        for k in range(64 * span // 128 + 8):
            reqs.append((first + k % 4, 0, i, rng.choice([64, 128, 192])))
    reqs.sort(key=lambda r: r[0])
    tb.add(reqs)
    await tb.run(span)
    tb.withdraw()
    await tb.end_checks()
    recs = [(r, g) for r, g, _ in grant_records(tb) if r.channel == 0]
    recs.sort(key=lambda x: x[1])
    bound = 2 * p.max_request_bytes + p.tag_unit * n
    phi = [1 / c.inv_weight for c in cfg.tenants]

    def check_window(lo, hi, active):
        served = {i: 0 for i in active}
        total = 0
        worst = 0
        for r, g in recs:
            if not lo <= g < hi:
                continue
            assert r.tenant in active, (r, lo, hi)
            served[r.tenant] += r.bytes
            total += r.bytes
            sphi = sum(phi[i] for i in active)
            for i in active:
                dev = abs(served[i] - phi[i] / sphi * total)
                worst = max(worst, dev)
                assert dev <= bound, (f"tenant {i} at cycle {g}: served {served[i]} vs fluid share "
                                      f"{phi[i] / sphi * total:.0f} (bound {bound}, seed {seed})")
        return worst, total, served
    # Before the wake-up only the others are backlogged (from the first grant on).
    first = min(g for _, g in recs)
    w1, tot1, _ = check_window(first, wake, list(range(n - 1)))
    tb.log.info("idle tenant: %d bytes shared by %d tenants, worst deviation from the fluid "
                "share %.0f bytes (bound %d)", tot1, n - 1, w1, bound)
    # After it wakes up (its first grant) it gets its own share back, within the bound.
    back = min(g for r, g in recs if r.tenant == idle)
    w2, tot2, served = check_window(back, t0 + span, list(range(n)))
    tb.log.info("after wake-up: tenant %d got %d of %d bytes, worst deviation %.0f",
                idle, served[idle], tot2, w2)
    assert back - wake < 16, f"woken tenant first served {back - wake} cycles after its request"


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def no_guarantee_heavy_light(dut):
    """Issue #43 on every channel: one tenant of weight N-1 (half the channel)
    against N-1 of weight 1, none with a guarantee (model/scenario.py's
    contract), every one backlogged with 2 KiB requests from the cycle after
    programming. The compiler gives them CAPACITY 0 (spec §12); the light
    tenants are given CAPACITY = PCAP instead (what it gave before), so their
    buckets start full (§6.3) and only §6.2's rule (rate 0: no head conforms)
    keeps them from guaranteed grants. Lockstep against the model every
    cycle; then, from the grants: none of kind guaranteed, and on every
    channel every tenant within §7's fairness bound (2·LMAX + TAG_UNIT·N;
    these costs do not round) of its fluid GPS share, ``weight / Σ weight`` of
    the channel's bytes, at every grant while all are backlogged. The memory
    side drains 4 x the contract's 64 B a cycle (8 cycles a grant) to keep
    the run and its drain short; the bound is in bytes."""
    p = _params()
    seed = seed_from_env()
    heavy = random.Random(seed).randrange(p.tenants)
    doc = heavy_light_contract(p.channels, p.tenants, heavy, bytes_per_cycle=4 * HEAVY_LIGHT_BYTES_PER_CYCLE,
                               queue_depth=p.queue_depth, max_request_bytes=p.max_request_bytes)
    compiled = compile_contract(doc, source="heavy/light")
    assert all((t.rate, t.capacity) == (0, 0) for t in compiled.config.tenants)
    cfg = replace(compiled.config, tenants=[t if i == heavy else replace(t, capacity=p.pcap)
                                            for i, t in enumerate(compiled.config.tenants)])
    tb = TB(dut, p, seed=seed, bytes_per_cycle=compiled.bytes_per_cycle)
    await tb.reset()
    await tb.program(cfg)
    t0 = tb.cycle
    span = _cycles(400)
    size = HEAVY_LIGHT_REQUEST_BYTES
    # More than a channel serves in the window: every tenant stays backlogged;
    # upstream withdraws the rest at its end.
    per_tenant = int(span * compiled.bytes_per_cycle) // size + p.queue_depth + 2
    tb.add((t0, c, i, size) for _ in range(per_tenant) for c in range(p.channels) for i in range(p.tenants))
    await tb.run(span)
    tb.withdraw()
    await tb.end_checks()
    log = tb.scoreboard.grant_log
    kinds = {kind for *_, kind in log}
    assert kinds == {BURST}, f"grant kinds {sorted(kinds)}: a tenant without a guarantee got another (seed {seed})"
    weights = [p.tenants - 1 if i == heavy else 1 for i in range(p.tenants)]
    bound = 2 * p.max_request_bytes + p.tag_unit * p.tenants
    for c in range(p.channels):
        served, total, worst = [0] * p.tenants, 0, 0
        for cyc, _, tenant, nbytes, _, _ in (g for g in log if g[1] == c and g[0] < t0 + span):
            served[tenant] += nbytes
            total += nbytes
            lag = max(abs(Fraction(served[i]) - Fraction(weights[i], sum(weights)) * total) for i in range(p.tenants))
            worst = max(worst, lag)
            assert lag <= bound, (f"channel {c} cycle {cyc}: served {served}, {total} B in all: "
                                  f"{float(lag)} B from the GPS shares > {bound} B (heavy {heavy}, seed {seed})")
        assert total >= span * compiled.bytes_per_cycle // 2, f"channel {c}: {total} B"
        tb.log.info("no guarantee, channel %d: heavy tenant %d, %d B, worst GPS lag %.0f B (bound %d)",
                    c, heavy, total, worst, bound)


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def starvation_attempt(dut):
    """The smallest weight at the lowest priority behind a flood of high-priority
    tenants: with the starvation guard each of its heads is selected within
    max(H, T_fill) + (N-1)*D*q(LMAX) + 1 cycles of becoming head (spec §7)."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    B = 64
    tb = TB(dut, p, seed=seed, bytes_per_cycle=B)
    await tb.reset()
    n = p.tenants
    victim = n - 1
    H = 150
    tenants = [TenantConfig(rate=8 * B, capacity=8 * p.pcap, peak_rate=8 * B * 2, inv_weight=256,
                            priority=0, enable=1, slo_cycles=50) for _ in range(n - 1)]
    tenants.append(TenantConfig(rate=64, capacity=p.pcap, peak_rate=64, inv_weight=65535,
                                priority=3, enable=1, slo_cycles=50))
    cfg = FabricConfig(tenants, starve_limit=H)
    await tb.program(cfg)
    t0 = tb.cycle
    span = _cycles(2500)
    reqs = []
    # The flood: enough queued upstream to keep the others backlogged all window.
    for k in range(B * span // 2048 + 3 * p.queue_depth):
        reqs.append((t0 + k % 16, 0, rng.randrange(n - 1), rng.choice([1024, p.max_request_bytes])))
    for k in range(span // 300):
        reqs.append((t0 + 100 + 300 * k, 0, victim, rng.choice([256, p.max_request_bytes])))
    reqs.sort(key=lambda r: r[0])
    tb.add(reqs)

    # Watch the victim's head in the (verified) model: when it becomes head, when popped.
    head_since = {}
    waits = []

    def watch(tb_):
        ch = tb_.scoreboard.model.channels[0]
        q = ch.fifo[victim]
        cyc = tb_.scoreboard.cycle  # the model is now at this cycle's registers
        if q:
            head_since.setdefault(q[0].id, cyc)
        for rid in list(head_since):
            if not q or q[0].id != rid:
                waits.append(cyc - 1 - head_since.pop(rid))  # selected in the previous cycle
    tb.on_cycle = watch
    await tb.run(span)
    tb.withdraw()
    await tb.end_checks()
    q = lambda s: -(-s // B)  # noqa: E731
    t_fill = -(-(p.max_request_bytes << p.frac) // cfg.tenants[victim].rate)
    bound = max(H, t_fill) + (n - 1) * p.queue_depth * q(p.max_request_bytes) + 1
    tb.log.info("starvation: victim heads waited at most %d cycles (bound %d), %d heads",
                max(waits), bound, len(waits))
    assert waits and max(waits) <= bound, (max(waits), bound, seed)


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def reprogram_under_traffic(dut):
    """Contracts change while traffic flows: COMMITs of new rates, weights, priorities,
    capacity below the level, disable/enable, FCFS bypass on and off, new starvation
    limit and epoch, snapshots; every configuration register is read back."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=48, idle=0.2, backpressure=0.2)
    await tb.reset()
    cfg = random_config(p, rng)
    await tb.program(cfg)
    span = _cycles(2400)
    random_traffic(tb, rng, count=span // 3, start=tb.cycle, span=span, invalid=0.05)
    from kvfabric.tb import axil as regs
    end = tb.cycle + span
    while tb.cycle < end:
        await tb.run(rng.randrange(20, 200))
        action = rng.randrange(6)
        if action <= 1:
            i = rng.randrange(p.tenants)
            new = random_config(p, rng).tenants[i]
            if action == 1:  # lower the capacity below the current level
                new = TenantConfig(**{**new.__dict__, "capacity": rng.randrange(0, 64), "enable": 1})
            await tb.commit_tenant(i, new)
        elif action == 2:
            fcfs = 1 - tb.scoreboard.mirror.config.fcfs_bypass
            await tb.run_task(tb.axil.write_dword(regs.CTRL, fcfs))
            tb.set_fcfs(bool(fcfs))
        elif action == 3:
            await tb.run_task(tb.axil.write_dword(regs.STARVE_LIMIT, rng.choice([0, 32, 500])))
            await tb.run_task(tb.axil.write_dword(regs.EPOCH_CYCLES, rng.choice([0, 50, 333])))
        elif action == 4:
            await tb.run_task(regs.take_snapshot(tb.axil, tb.scoreboard.mirror.config))
            await tb.run_task(regs.read_telemetry(tb.axil, p))  # checked against the model
        else:
            # Read back configuration registers (checked by the scoreboard), incl. unmapped ones.
            for addr in (regs.CTRL, regs.EPOCH_CYCLES, regs.STARVE_LIMIT,
                         regs.tenant_reg(rng.randrange(p.tenants), rng.choice([r.name for r in regs.TENANT.registers])),
                         regs.tenant_reg(p.tenants, "RATE") if p.tenants < 16 else 0x0FFC, 0x0002, 0x1FFC):
                await tb.run_task(tb.axil.read_dword(addr))
        # Stage a value without committing: reads must still return the active one.
        await tb.run_task(tb.axil.write_dword(regs.tenant_reg(0, "RATE"), rng.randrange(1 << 16)))
        await tb.run_task(tb.axil.read_dword(regs.tenant_reg(0, "RATE")))
    # Make sure everything can drain: every tenant enabled with a peak rate.
    tb.set_fcfs(False)
    await tb.program(random_config(p, rng))
    for i in range(p.tenants):
        await tb.commit_tenant(i, TenantConfig(rate=64, capacity=p.pcap, peak_rate=1024,
                                               inv_weight=256, priority=0, enable=1))
    await tb.end_checks()


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def reset_mid_burst(dut):
    """Reset asserted while every queue is full and grants are in flight: everything
    returns to its reset value (model and RTL compared from the first cycle after),
    and traffic after the reset is served normally."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=32, backpressure=0.3)
    await tb.reset()
    for _ in range(2):
        await tb.program(random_config(p, rng))
        random_traffic(tb, rng, count=400, start=tb.cycle, span=300)
        await tb.run(rng.randrange(150, 400))
        before = tb.scoreboard.in_flight()
        assert before > 0, "the reset must hit a busy fabric"
        await tb.reset(cycles=rng.randrange(1, 4))
        tb.log.info("reset with %d requests in flight", before)
        # Straight after reset the config is 0: everything is disabled and dropped.
        tb.request(tb.cycle + 1, 0, 0, 64)
        await tb.run(8)
    await tb.program(random_config(p, rng))
    random_traffic(tb, rng, count=300, start=tb.cycle, span=600)
    await tb.end_checks()
    assert tb.scoreboard.flushed, "requests were flushed by the resets"


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def invalid_tags(dut):
    """Tenant tags >= N, disabled tenants, 0 bytes and more than LMAX bytes are accepted,
    counted in DROPPED per channel and never granted; valid traffic is unaffected."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=64, idle=0.3)
    await tb.reset()
    cfg = random_config(p, rng)
    off = p.tenants - 1
    tenants = [TenantConfig(**{**t.__dict__, "enable": int(i != off)})
               for i, t in enumerate(cfg.tenants)]
    await tb.program(FabricConfig(tenants, starve_limit=cfg.starve_limit))
    t0 = tb.cycle
    reqs = []
    span = _cycles(1200)
    for k in range(span // 3):
        c = rng.randrange(p.channels)
        kind = rng.randrange(5)
        if kind == 0:
            reqs.append((t0 + 3 * k, c, rng.randrange(p.tenants, 16) if p.tenants < 16 else 0, 64))
        elif kind == 1:
            reqs.append((t0 + 3 * k, c, off, rng.choice([32, 4])))
        elif kind == 2:
            reqs.append((t0 + 3 * k, c, rng.randrange(p.tenants), 0))
        elif kind == 3:
            reqs.append((t0 + 3 * k, c, rng.randrange(p.tenants),
                         rng.randrange(p.max_request_bytes + 1, 1 << p.bytes_bits)))
        else:
            reqs.append((t0 + 3 * k, c, rng.randrange(p.tenants - 1), random_size(p, rng)))
    tb.add(reqs)
    counters = await tb.end_checks()
    invalid = sum(1 for r in reqs if r[2] >= p.tenants - 1 or r[3] == 0 or r[3] > p.max_request_bytes)
    assert sum(counters["dropped"]) == tb.scoreboard.dropped == invalid, (counters["dropped"], invalid)
    assert all(r.tenant < off and 0 < r.bytes <= p.max_request_bytes for r, _, _ in grant_records(tb))


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def tag_wraparound(dut):
    """With a narrow tag (build with tag_bits=12, LMAX=256, so that spec §6.5's
    max_cost < 2^(T-4) holds) V and every tag wrap many times: modular selection,
    eligibility and the lag clamp stay exact (compared with the model every cycle)."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    B = 256
    tb = TB(dut, p, seed=seed, bytes_per_cycle=B)
    await tb.reset()
    n = p.tenants
    cfg = FabricConfig([TenantConfig(rate=8 * 16 * (i + 1), capacity=4 * p.pcap, peak_rate=8 * B,
                                     inv_weight=256 * (i + 1), priority=0, enable=1, slo_cycles=30)
                        for i in range(n)], starve_limit=400)
    await tb.program(cfg)
    t0 = tb.cycle
    span = _cycles(2500)
    reqs = []
    for k in range(span):
        for c in range(p.channels):
            if rng.random() < 0.8:
                reqs.append((t0 + k, c, rng.randrange(n), p.max_request_bytes))
    tb.add(reqs)
    vt_max = [0] * p.channels
    wraps = [0] * p.channels

    def watch(tb_):
        for c, ch in enumerate(tb_.scoreboard.model.channels):
            if ch.vt < vt_max[c] - (1 << (p.tag_bits - 1)):
                wraps[c] += 1
            vt_max[c] = ch.vt
    tb.on_cycle = watch
    await tb.end_checks()
    tb.log.info("tag wrap: V wrapped %s times (T=%d)", wraps, p.tag_bits)
    assert min(wraps) >= 2, (wraps, seed)


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def full_queue_pushback(dut):
    """A naive upstream that ignores queue_full: its flood fills a tenant's queue, ready
    drops, the request is held (valid & ~ready) until room frees up; nothing is lost."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=16, honour_queue_full=False)
    await tb.reset()
    cfg = FabricConfig([TenantConfig(rate=64, capacity=p.pcap, peak_rate=256, inv_weight=256,
                                     priority=0, enable=1, slo_cycles=20) for _ in range(p.tenants)])
    await tb.program(cfg)
    t0 = tb.cycle
    reqs = []
    span = _cycles(1000)
    for k in range(span // 2):
        reqs.append((t0 + 2 * k, rng.randrange(p.channels), rng.choice([0, 0, 0, 1]),
                     rng.choice([256, 1024])))
    tb.add(reqs)
    await tb.run(span)
    tb.withdraw()
    await tb.end_checks()
    assert tb.stalls > 0, "ready never went low: the push-back path was not exercised"
    tb.log.info("push-back: %d cycles with valid & ~ready", tb.stalls)


# ---------------------------------------------------------------------------------------------
@cocotb.test()
async def coordinator_skew(dut):
    """Spec §13: the coordinator on with the shortest epoch (COORD_MIN_EPOCH),
    tenant 0's traffic all on channel 0, the others' spread, for three epochs;
    a COMMIT of tenant 1 inside the first result's window (its result is
    discarded), then the coordinator turned off and on again. Every cycle the
    coordinator's rate and peak rate of every tenant on every channel, the
    buckets and the grants are compared with the model; the epochs had both
    backlogged pairs (an acceptance left the queue full) and light ones
    (spec §13.4), so both kinds of the allocation's terms were exercised."""
    p = _params()
    seed = seed_from_env()
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=64, idle=0.1, backpressure=0.1)
    await tb.reset()
    tenants = [TenantConfig(rate=8 * rng.choice([4, 8, 12]), capacity=2 * p.pcap,
                            peak_rate=8 * rng.choice([16, 24]), inv_weight=256 * (1 + i % 2),
                            priority=i % 2, enable=1, slo_cycles=200) for i in range(p.tenants)]
    cfg = FabricConfig(tenants, starve_limit=500, coord_enable=1, coord_floor=rng.choice([0, 32]),
                       coord_epoch_cycles=0)
    await tb.program(cfg)
    t0 = tb.cycle
    span = _cycles(2 * COORD_MIN_EPOCH + COORD_LATENCY + 400)
    reqs = []
    for k in range(span // 3):
        tenant = rng.randrange(p.tenants)
        channel = 0 if tenant == 0 else rng.randrange(p.channels)
        reqs.append((t0 + 3 * k + rng.randrange(3), channel, tenant, rng.choice([64, 256, 512])))
    tb.add(sorted(reqs, key=lambda r: r[0]))
    split = [False]
    kinds = set()

    def watch(tb_):
        chans = tb_.scoreboard.model.channels
        split[0] |= any(chans[c].config.tenants[0].rate != cfg.tenants[0].rate for c in range(p.channels))
        coord = tb_.scoreboard.model.coordinator
        if coord.epoch_counter == COORD_MIN_EPOCH - 1:   # the epoch's bits, before they restart
            kinds.update(("backlogged" if b else "light") for drow, brow in zip(coord.demand, coord.backlog)
                         for d, b in zip(drow, brow) if d)
    tb.on_cycle = watch
    # Into the first result's window (the first epoch ends COORD_MIN_EPOCH
    # cycles after the COORD write, which program() makes first).
    await tb.run(COORD_MIN_EPOCH + COORD_LATENCY // 2 - (tb.cycle - t0))
    await tb.commit_tenant(1, replace(tenants[1], rate=tenants[1].rate + 8))
    await tb.run(t0 + span - tb.cycle)
    from kvfabric.tb import axil as regs
    await tb.run_task(tb.axil.write_dword(regs.COORD, 0))
    await tb.run(20)
    await tb.run_task(tb.axil.write_dword(regs.COORD, 1 | 64 << 8))
    await tb.end_checks()
    assert split[0], f"tenant 0's rate was never split unevenly (seed {seed})"
    assert kinds == {"backlogged", "light"}, f"pairs seen: {kinds} (seed {seed})"
