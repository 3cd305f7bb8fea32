"""The bounds of spec §7, checked on the golden model with closed-loop traffic.

Each test builds register-level configurations (UQ13.3 rates, UQ25.3
capacities, UQ8.8 inverse weights), drives one channel and compares what was
served against a bound computed here from the spec's formulas.
"""

import random
from dataclasses import replace
from fractions import Fraction

import pytest

import oracles

from kvfabric.model.contract import compile_contract
from kvfabric.model.scenario import HEAVY_LIGHT_BYTES_PER_CYCLE, HEAVY_LIGHT_REQUEST_BYTES, heavy_light_contract
from kvfabric.spec import FabricParams
from kvfabric.model.channel import BURST, GUARANTEED
from kvfabric.spec import URGENT
from kvfabric.model.harness import Backlogged, ClosedLoop, Greedy, Paced
from kvfabric.model.registers import FabricConfig, TenantConfig

ONE = 8  # 1 << FRAC
MAX16 = (1 << 16) - 1


def params(**kw):
    return FabricParams(channels=1, **kw)


def inv_weights(weights):
    """What the contract compiler does: inv_i = ceil(256 * sum(w) / w_i)."""
    total = sum(weights)
    return [-(-256 * total // w) for w in weights]


def config(tenants, **kw):
    return FabricConfig([TenantConfig(**t) for t in tenants], **kw)


def per_tenant(records, tenant):
    return [r for r in records if r.tenant == tenant and r.selected is not None]


# Seeds 59, 67 and 157 broke the old bound (2*LMAX + TAG_UNIT*N without the
# cost-rounding term, issue #16). On this list the byte check reaches at most
# 86 % of its bound (seed 4) and the charged-service check 96.5 % (seed 59).
# CI runs this fixed list; the node-seeded variant below runs KVFABRIC_SEED's.
GPS_SEEDS = (59, 67, 157, 4, 22, 101, 202, 303, 404, 505, 606, 707)


def _gps_trials(seed):
    """Four random all-backlogged channels: (weights, inverse weights, events)."""
    rng = random.Random(seed)
    for _ in range(4):
        n = rng.randint(2, 8)
        p = params(tenants=n)
        weights = [rng.randint(1, 16) for _ in range(n)]
        inv = inv_weights(weights)
        cfg = config([dict(rate=0, capacity=0, peak_rate=MAX16, inv_weight=inv[i], enable=1)
                      for i in range(n)])
        sizes = [32 * k for k in range(1, 129)]  # multiples of TAG_UNIT (spec §7's condition)
        sources = {i: Backlogged(sizes, random.Random(rng.random())) for i in range(n)}
        bpc = rng.choice([32, 64, 400])
        loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
        loop.hold_grants_until = n * p.queue_depth + 4  # start with every queue full
        loop.run(120 * p.max_request_bytes // min(bpc, 64) + 200)
        yield p, weights, inv, oracles.from_records(loop.records)


@pytest.mark.parametrize("gps_seed", GPS_SEEDS)
def test_gps_lag_bound(gps_seed):
    """Equal priorities, zero committed rates, uncapped peaks, all backlogged: every
    tenant stays within spec §7's fairness bound of its fluid GPS share at every
    grant (2*LMAX + TAG_UNIT*N plus the accumulated cost rounding)."""
    for trial, (p, weights, inv, events) in enumerate(_gps_trials(gps_seed)):
        assert sum(e.bytes for e in events) > 30 * p.max_request_bytes, "too little traffic"
        verdict = oracles.gps_fairness(events, inv, lmax=p.max_request_bytes, tag_unit=p.tag_unit)
        assert verdict.ok, f"seed {gps_seed} trial {trial} (weights {weights}): {verdict}"
        verdict = oracles.gps_charged_fairness(events, inv, lmax=p.max_request_bytes, tag_unit=p.tag_unit)
        assert verdict.ok, f"seed {gps_seed} trial {trial} (weights {weights}): {verdict}"


def test_gps_lag_bound_node_seed(seed):
    """The same check on this node's seed (KVFABRIC_SEED explores others)."""
    test_gps_lag_bound(seed)


@pytest.mark.parametrize("bucket", ["compiled", "full"])
@pytest.mark.parametrize("heavy", [0, 7])
def test_no_guarantee_is_wf2q_from_cycle_0(heavy, bucket):
    """Issue #43: one tenant of weight 7 against seven of weight 1, none with a
    guarantee, every one backlogged with 2 KiB requests from cycle 0 on (the
    queues fill one request a cycle). A tenant whose rate is 0 has no
    guaranteed tokens (spec §6.2), so every grant is of kind burst, and from
    the first grant on every tenant's bytes stay within §7's fairness bound
    (2·LMAX + TAG_UNIT·N; these costs do not round) of its fluid GPS share,
    ``weight / Σ weight`` of all bytes served. ``compiled``: the contract
    compiler's registers (CAPACITY 0, §12); ``full``: the same with CAPACITY
    = PCAP, a bucket full at enable (§6.3) that covers nothing at rate 0.
    With PCAP and no rule (the compiler's capacity before) the first 16
    grants were two guaranteed ones per tenant and the heavy tenant trailed
    its share by 12,288 B (six requests) after the 16th."""
    compiled = compile_contract(heavy_light_contract(heavy=heavy))
    p, cfg = compiled.params, compiled.config
    if bucket == "full":
        cfg = replace(cfg, tenants=[replace(t, capacity=p.pcap) for t in cfg.tenants])
    weights = [p.tenants - 1 if i == heavy else 1 for i in range(p.tenants)]
    sources = {i: Backlogged([HEAVY_LIGHT_REQUEST_BYTES], random.Random(i)) for i in range(p.tenants)}
    loop = ClosedLoop(p, cfg, sources, Fraction(HEAVY_LIGHT_BYTES_PER_CYCLE))
    loop.run(20000)
    events = oracles.from_records(loop.records)
    assert len(events) > 500
    assert {e.kind for e in events} == {"burst"}, "a tenant without a guarantee got a guaranteed grant"
    lag = oracles.gps_lag_exact(events, [Fraction(w, sum(weights)) for w in weights])
    bound = 2 * p.max_request_bytes + p.tag_unit * p.tenants
    assert lag <= bound, f"GPS lag {float(lag)} B > {bound} B"
    verdict = oracles.gps_fairness(events, [t.inv_weight for t in cfg.tenants], lmax=p.max_request_bytes,
                                   tag_unit=p.tag_unit)
    assert verdict.ok, str(verdict)


def test_work_conserving_when_uncapped(seed):
    """With uncapped peaks, the grant register is refilled in every cycle in which
    it is free and some queue holds a request."""
    rng = random.Random(seed)
    n = 6
    p = params(tenants=n)
    inv = inv_weights([rng.randint(1, 8) for _ in range(n)])
    cfg = config([dict(rate=rng.choice([0, 8, 40]), capacity=rng.choice([0, 1 << 16]),
                       peak_rate=MAX16, inv_weight=inv[i], priority=rng.randrange(4), enable=1)
                  for i in range(n)])
    sources = {i: Paced(rng.choice([64, 256, 1024]), Fraction(rng.randint(5, 60)), rng.randrange(100))
               for i in range(n)}
    expect = {}
    violations = []

    def check(t, ch, ready):
        if expect.get("grant") and ch.grant is None:
            violations.append(t - 1)
        load = ch.grant is None or ready
        expect["grant"] = load and any(ch.fifo)

    loop = ClosedLoop(p, cfg, sources, Fraction(rng.choice([64, 128])), on_cycle=check)
    loop.run(5000)
    assert len(loop.served()) > 500
    assert violations == [], f"idle grant slot with queued requests at cycles {violations[:10]}"


def _max_excess(events, rate_bytes_per_cycle):
    """max over windows [a, b] of bytes(a..b) - rate*(b - a + 1); events = (cycle, bytes) sorted."""
    worst = -10**18
    best_start = None  # max over a of (rate*a - bytes before a)
    prefix = 0
    for cycle, nbytes in events:
        start_val = rate_bytes_per_cycle * cycle - prefix
        best_start = start_val if best_start is None else max(best_start, start_val)
        prefix += nbytes
        worst = max(worst, prefix - rate_bytes_per_cycle * (cycle + 1) + best_start)
    return worst


def test_burst_envelope(seed):
    """Selected bytes over any window stay within PCAP + w*peak_rate, and the
    guaranteed-kind bytes within capacity + w*rate."""
    rng = random.Random(seed)
    n = 5
    p = params(tenants=n)
    inv = inv_weights([rng.randint(1, 8) for _ in range(n)])
    tenants = []
    for i in range(n):
        rate = rng.randint(1, 200)
        tenants.append(dict(rate=rate, capacity=rng.randint(p.pcap, 40 * p.pcap),
                            peak_rate=rng.randint(rate, 600), inv_weight=inv[i],
                            priority=rng.randrange(4), enable=1))
    cfg = config(tenants, starve_limit=rng.choice([0, 500]))
    sources = {}
    for i in range(n):
        kind = rng.randrange(3)
        if kind == 0:
            sources[i] = Backlogged([64, 512, 4096], random.Random(rng.random()))
        elif kind == 1:
            sources[i] = Paced(rng.choice([64, 1024]), Fraction(rng.randint(10, 200)))
        else:
            sources[i] = Greedy(256, Fraction(rng.randint(0, 50000)), Fraction(rng.randint(1, 100)))
    loop = ClosedLoop(p, cfg, sources, Fraction(256))
    loop.run(6000)
    for i, t in enumerate(tenants):
        mine = sorted(per_tenant(loop.records, i), key=lambda r: r.selected)
        assert mine, f"tenant {i} was never served"
        every = [(r.selected, r.bytes) for r in mine]
        guaranteed = [(r.selected, r.bytes) for r in mine if r.kind == GUARANTEED]
        excess = _max_excess(every, Fraction(t["peak_rate"], ONE))
        assert excess <= p.pcap // ONE, f"tenant {i}: {excess} B above the peak envelope"
        if guaranteed:
            excess = _max_excess(guaranteed, Fraction(t["rate"], ONE))
            assert excess <= t["capacity"] // ONE, f"tenant {i}: {excess} B above the committed envelope"


def test_guaranteed_rate_under_flood(seed):
    """A backlogged tenant gets rate*w - capacity - LMAX in every window while
    equal-priority tenants flood with burst traffic."""
    rng = random.Random(seed)
    n = 4
    p = params(tenants=n)
    bpc = 64  # 64-byte requests, one per cycle: the effective capacity is exactly 64 B/cycle
    rates = [rng.randint(40, 120) for _ in range(n)]  # UQ13.3: 5..15 B/cycle each
    inv = inv_weights(rates)
    cap = 4 * p.pcap
    cfg = config([dict(rate=rates[i], capacity=cap, peak_rate=MAX16, inv_weight=inv[i], enable=1)
                  for i in range(n)])
    sources = {i: Backlogged([64], random.Random(i)) for i in range(n)}
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
    loop.run(8000)
    for i in range(n):
        events = [(-r.transferred, r.bytes) for r in loop.served() if r.tenant == i]
        # Shortfall = rate*w - served over the worst window, via excess of the time-reversed deficit.
        served = sorted((r.transferred, r.bytes) for r in loop.served() if r.tenant == i)
        assert served
        cum = 0
        worst = 0
        peak = None  # max over a of (cum_before_a - rate*a)
        rate = Fraction(rates[i], ONE)
        points = [(0, 0)] + [(c, b) for c, b in served]
        for cycle, nbytes in points:
            val = cum - rate * cycle
            peak = val if peak is None else max(peak, val)
            cum += nbytes
            worst = max(worst, peak - (cum - rate * cycle))
        end_val = cum - rate * loop.cycle
        worst = max(worst, peak - end_val)
        assert worst <= cap // ONE + p.max_request_bytes, (
            f"tenant {i}: shortfall {float(worst):.0f} B against its rate {float(rate)} B/cycle")
        del events


def test_delay_bound_for_conforming_tenant(seed):
    """Traffic that conforms to (capacity, rate) waits at most
    capacity/rate + LMAX/rate + q(LMAX) + 3 cycles at the top priority."""
    rng = random.Random(seed)
    n = 4
    p = params(tenants=n)
    rates = [rng.randint(40, 160) for _ in range(n)]
    inv = inv_weights(rates)
    caps = [rng.randint(p.pcap, 8 * p.pcap) for _ in range(n)]
    prios = [0] + [rng.randrange(4) for _ in range(n - 1)]
    cfg = config([dict(rate=rates[i], capacity=caps[i], peak_rate=rates[i] * 4, inv_weight=inv[i],
                       priority=prios[i], enable=1) for i in range(n)])
    size = 512
    bpc = Fraction(128)
    sources = {0: Greedy(size, Fraction(caps[0], ONE), Fraction(rates[0], ONE), start=rng.randrange(500))}
    for i in range(1, n):
        sources[i] = Backlogged([256, 1024, 4096], random.Random(rng.random()))
    loop = ClosedLoop(p, cfg, sources, bpc)
    loop.run(8000)
    q_lmax = -(-p.max_request_bytes // 128)
    bound = Fraction(caps[0], rates[0]) + Fraction(p.max_request_bytes * ONE, rates[0]) + q_lmax + 3
    mine = [r for r in loop.served() if r.tenant == 0]
    assert len(mine) > 20
    worst = max(r.transferred - r.arrival for r in mine)
    assert worst <= bound, f"conforming tenant waited {worst} cycles > bound {float(bound):.0f}"


def test_priority_decides_under_oversubscription(seed):
    """Committed rates summing to 150% of capacity: priority 0 gets its full rate,
    priority 1 most of the rest, priority 3 only what the starvation guard gives."""
    rng = random.Random(seed)
    p = params(tenants=3)
    bpc = 64
    rate = 32 * ONE  # each tenant: half the channel
    cfg = config([dict(rate=rate, capacity=4 * p.pcap, peak_rate=rate, inv_weight=768,
                       priority=prio, enable=1) for prio in (0, 1, 3)], starve_limit=2000)
    # 256-byte requests take 4 cycles each, so the single ingress port has slack
    # and every queue stays full: only the arbiter decides who is served.
    sources = {i: Backlogged([256], random.Random(rng.random())) for i in range(3)}
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
    cycles = 20000
    loop.run(cycles)
    got = [sum(r.bytes for r in loop.served() if r.tenant == i) for i in range(3)]
    assert got[0] >= 32 * cycles - 4 * p.pcap // ONE - 4096, got
    assert got[1] > 10 * got[2], got
    assert 0 < got[2] < 0.05 * sum(got), got


def test_max_min_fair_share(seed):
    """Uneven demand: tenants asking less than an equal share get all of it; the
    backlogged ones split the rest equally."""
    rng = random.Random(seed)
    p = params(tenants=4)
    cfg = config([dict(rate=0, capacity=0, peak_rate=MAX16, inv_weight=1024, enable=1) for _ in range(4)])
    bpc = 64
    demand = [Fraction(6), Fraction(13)]  # B/cycle, below the fair share of 16
    sources = {0: Paced(64, demand[0]), 1: Paced(64, demand[1]),
               2: Backlogged([64], random.Random(rng.random())),
               3: Backlogged([64], random.Random(rng.random()))}
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
    cycles = 20000
    loop.run(cycles)
    got = [sum(r.bytes for r in loop.served() if r.tenant == i) / cycles for i in range(4)]
    for i in (0, 1):
        assert abs(got[i] - demand[i]) < 0.2, f"tenant {i} asked {demand[i]} B/cycle, got {got[i]:.2f}"
    rest = (bpc - float(sum(demand))) / 2
    for i in (2, 3):
        assert abs(got[i] - rest) < 0.5, f"tenant {i}: {got[i]:.2f} B/cycle, max-min share {rest:.2f}"


def test_starvation_bound(seed):
    """The smallest-weight, lowest-priority tenant behind a flood of oversubscribed
    priority-0 tenants is selected within the spec's bound after becoming head."""
    rng = random.Random(seed)
    n = 5
    p = params(tenants=n)
    bpc = 256
    H = rng.choice([300, 1000, 3000])
    big = 200 * ONE  # priority-0 tenants: 4 x 200 B/cycle = 3x oversubscribed
    small_rate = rng.randint(1, 16)
    tenants = [dict(rate=big, capacity=8 * p.pcap, peak_rate=big, inv_weight=300, priority=0, enable=1)
               for _ in range(n - 1)]
    tenants.append(dict(rate=small_rate, capacity=p.pcap, peak_rate=small_rate, inv_weight=65535,
                        priority=3, enable=1))
    cfg = config(tenants, starve_limit=H)
    sources = {i: Backlogged([4096], random.Random(rng.random())) for i in range(n - 1)}
    sources[n - 1] = Backlogged([rng.choice([64, 4096])], random.Random(0))
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
    loop.run(60000)
    q_lmax = -(-p.max_request_bytes // bpc)
    t_fill = -(-(p.max_request_bytes << p.frac) // small_rate)
    bound = max(H, t_fill) + (n - 1) * p.queue_depth * q_lmax + 1
    mine = [r for r in loop.records if r.tenant == n - 1 and r.selected is not None]
    assert len(mine) >= 2, "the starving tenant was never served"
    worst = max(r.selected - r.head for r in mine)
    assert worst <= bound, f"head waited {worst} cycles > starvation bound {bound}"
    # It is really being starved by priority, not served for free (fcfs), and
    # the guard is what serves it: some grants are urgent (kind 3, spec §6.2).
    assert all(r.kind in (URGENT, GUARANTEED, BURST) for r in mine)
    assert any(r.kind == URGENT for r in mine)
