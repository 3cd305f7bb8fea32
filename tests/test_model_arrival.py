"""Arrival-ordered priorities (spec §6.2, ``CREDITS.arrival_prio``), checked from
their definitions on the golden model: conforming heads of a marked priority
are selected oldest first; the delay and guaranteed-rate bounds of spec §7
that arrival order gives, measured against their formulas; and what stays in
WF2Q+ order (unmarked priorities, the burst class)."""

import random
from fractions import Fraction

import pytest

import oracles
from kvfabric.spec import FabricParams
from kvfabric.model.channel import BURST, GUARANTEED
from kvfabric.model.harness import Backlogged, ClosedLoop, Greedy
from kvfabric.model.registers import FabricConfig, TenantConfig

MAX16 = 0xFFFF
#: Buckets that always cover a head: every head of the tenant conforms.
ALWAYS = dict(rate=MAX16, capacity=(1 << 28) - 1, peak_rate=MAX16)


def _heads_at(records, t):
    """Records that are the head of their queue at cycle t (selection reads these)."""
    return [r for r in records if r.head is not None and r.head <= t and (r.selected is None or r.selected >= t)]


def _oldest_first_violations(loop, tenants):
    """Selections of a record of ``tenants`` while an older head of ``tenants`` waited."""
    bad = []
    mine = [r for r in loop.records if r.tenant in tenants]
    for r in mine:
        if r.selected is None:
            continue
        older = [h for h in _heads_at(mine, r.selected) if h is not r and h.accepted < r.accepted]
        if older:
            bad.append((r.selected, r.tenant, [h.tenant for h in older]))
    return bad


def _weights_config(prios, inv_weights, arrival_prio, **extra):
    return FabricConfig([TenantConfig(**ALWAYS, inv_weight=w, priority=p, enable=1)
                         for p, w in zip(prios, inv_weights)], arrival_prio=arrival_prio, **extra)


@pytest.mark.parametrize("arrival_prio", [0b0010, 0b1111])
def test_conforming_heads_of_a_marked_priority_are_served_oldest_first(seed, arrival_prio):
    """Four conforming backlogged tenants at priority 1, weights 1:1:8:64:
    marked, every selection among them takes the oldest head; unmarked (the
    same run with arrival_prio 0) WF2Q+ passes older heads of the light
    tenants over, so the check can fail."""
    rng = random.Random(seed)
    p = FabricParams(tenants=4)
    inv = [256 * 64, 256 * 64, 256 * 8, 256]
    sizes = [64, 256, 1024, 4096]
    for mask, marked in ((arrival_prio, True), (0, False)):
        sources = {i: Backlogged(sizes, random.Random(rng.random())) for i in range(4)}
        loop = ClosedLoop(p, _weights_config([1] * 4, inv, mask), sources, Fraction(128)).run(3000)
        selected = [r for r in loop.records if r.selected is not None]
        assert len(selected) > 100 and {r.kind for r in selected} == {GUARANTEED}
        bad = _oldest_first_violations(loop, range(4))
        if marked:
            assert not bad, f"older heads passed over: {bad[:5]}"
        else:
            assert len(bad) > 10, "WF2Q+ order coincided with arrival order: the scenario shows nothing"


def test_unmarked_priorities_and_the_burst_class_keep_wf2q_order(seed):
    """Priority 1 marked, priority 2 not: with the only priority-1 tenant in the
    burst class (its buckets never cover a head), every selection is the one
    of the unmarked run: arrival order applies to conforming heads of a marked
    priority only, not to the burst class nor to other priorities."""
    rng = random.Random(seed)
    p = FabricParams(tenants=4)
    inv = [256 * 16, 256, 256 * 16, 256]
    # Priority 2: committed rates below what they ask, so they are in the burst class at times too.
    paced = dict(rate=rng.choice([32, 64]), capacity=p.pcap, peak_rate=MAX16, priority=2, enable=1)
    burst_only = TenantConfig(rate=0, capacity=0, peak_rate=MAX16, inv_weight=256 * 16, priority=1, enable=1)
    runs = []
    bpc = Fraction(rng.choice([64, 128]))
    for mask in (0b0010, 0):
        cfg = _weights_config([2, 2, 1, 1], inv, mask)
        cfg.tenants[0] = TenantConfig(**paced, inv_weight=inv[0])
        cfg.tenants[1] = TenantConfig(**paced, inv_weight=inv[1])
        cfg.tenants[2] = burst_only
        streams = random.Random(seed)
        sources = {i: Backlogged([64, 512, 4096], random.Random(streams.random())) for i in (0, 1, 2)}
        loop = ClosedLoop(p, cfg, sources, bpc).run(4000)
        runs.append([(r.tenant, r.selected, r.kind) for r in loop.records if r.selected is not None])
    assert runs[0] == runs[1]
    assert {k for _, _, k in runs[0]} == {GUARANTEED, BURST}


def test_delay_under_arrival_order_is_bounded_by_the_queues_not_the_rate(seed):
    """Spec §7, delay under arrival order: a tenant of the highest priority in
    use, marked, whose heads always conform, is selected within
    N·D·q(LMAX) + 2 cycles of acceptance, whatever its weight: only requests
    accepted before it (at most N·D - 1) and the grant in flight precede it.
    It holds 1/64 of the weight (the others the rest, Σφ = 1) and the others
    flood at its priority (conforming) and below it; unmarked, WF2Q+ gives it
    its weighted share, below what it sends, and (no starvation limit to
    rescue it) it waits longer than the bound."""
    rng = random.Random(seed)
    n = 4
    p = FabricParams(tenants=n)
    bpc = Fraction(128)
    q_lmax = -(-p.max_request_bytes // 128)
    bound = n * p.queue_depth * q_lmax + 2
    heavy = -(-256 * (n - 1) * 64 // 63)  # the others' inverse weight: (63/64)/(n-1) of the weight each
    prios = [0, 0, 0, rng.choice([0, 2])]
    size, start, starve = rng.choice([512, 4096]), rng.randrange(300), rng.choice([0, 200])
    rate = 16 if size == 4096 else rng.choice([4, 16])  # bytes per cycle: 20 requests or more
    streams = rng.random()
    worst = {}
    for mask in (0b0001, 0):
        tenants = [TenantConfig(**ALWAYS, inv_weight=256 * 64 if i == 0 else heavy, priority=prios[i], enable=1)
                   for i in range(n)]
        # The unmarked run without urgency, which would rescue the light tenant after 200 cycles.
        cfg = FabricConfig(tenants, arrival_prio=mask, starve_limit=starve if mask else 0)
        sources = {0: Greedy(size, Fraction(8192), Fraction(rate), start=start)}
        sources.update({i: Backlogged([256, 4096], random.Random(streams + i)) for i in range(1, n)})
        loop = ClosedLoop(p, cfg, sources, bpc).run(6000)
        mine = [r for r in loop.records if r.tenant == 0 and r.selected is not None]
        assert len(mine) > (20 if mask else 0)
        worst[mask] = max(r.selected - r.accepted for r in mine)
    assert worst[0b0001] <= bound, f"waited {worst[0b0001]} cycles > bound {bound}"
    assert worst[0] > bound, f"WF2Q+ order kept the light tenant within {bound} too: {worst[0]}"


def test_guaranteed_rate_under_arrival_order(seed):
    """Spec §7, guaranteed rate in a marked priority: a backlogged tenant gets
    rate·w - Σ_j capacity_j - LMAX in every window of w cycles (the capacities
    of every tenant of its priority), while the others of its priority flood
    with traffic their buckets cover only in part.  The adversarial case: one
    tenant with most of the rate, three with little rate but large buckets,
    weights drawn apart from the rates."""
    rng = random.Random(seed)
    n = 4
    p = FabricParams(tenants=n)
    bpc = 64
    rates = [rng.randint(250, 400)] + [rng.randint(20, 60) for _ in range(n - 1)]  # UQ13.3 B/cycle
    while sum(rates) > 8 * bpc:
        rates = [r * 9 // 10 for r in rates]
    caps = [rng.randint(p.pcap, 8 * p.pcap) for _ in range(n)]
    cfg = FabricConfig([TenantConfig(rate=rates[i], capacity=caps[i], peak_rate=MAX16,
                                     inv_weight=rng.choice([256, 1024, 8192]), priority=1, enable=1)
                        for i in range(n)], arrival_prio=0b0010)
    sources = {i: Backlogged([64, 256, 1024], random.Random(rng.random())) for i in range(n)}
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc)).run(12000)
    events = oracles.from_records(loop.records)
    allowance = sum(caps)
    for i in range(n):
        verdict = oracles.guaranteed_rate(events, i, rate=rates[i], capacity=allowance, lmax=p.max_request_bytes,
                                          start=0, end=loop.cycle - 2 * p.max_request_bytes // bpc)
        assert verdict.ok, f"tenant {i}: {verdict}"
