"""Spec §7's guarantees judged by the independent oracles of ``tests/oracles.py``,
on scenarios built to make each one bite (issue #16).

Each scenario states why weaker behaviour would fail it: WFQ and SFQ order
break the fairness bound on one heavy tenant against many light ones; buckets
start full so the envelopes are reached, not just respected; the guaranteed
rate is far above the tenant's weighted share, so only the committed bucket
can deliver it; the delay bound is tight to within a maximum request. The
same oracles judge the RTL's grant logs in ``tests/test_oracles_rtl.py``.
"""

import random
from fractions import Fraction

import pytest

import oracles
from kvfabric.model.harness import Backlogged, ClosedLoop, Greedy
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.spec import FabricParams

MAX16 = (1 << 16) - 1
LMAX = 4096


def exact_inv(weights):
    """INV_WEIGHT = 256·Σw / w_i, asserted exact so Σφ = 1 and no cost rounds."""
    total = sum(weights)
    assert all(256 * total % w == 0 for w in weights)
    return [256 * total // w for w in weights]


def heavy_light(heavy_index, n=8):
    """One tenant with weight n-1 (half the channel) and n-1 with weight 1."""
    weights = [1] * n
    weights[heavy_index] = n - 1
    return weights


def run_backlogged(weights, size, bpc=64, cycles=40000, inv=None):
    n = len(weights)
    p = FabricParams(channels=1, tenants=n)
    inv = exact_inv(weights) if inv is None else inv
    cfg = FabricConfig([TenantConfig(rate=0, capacity=0, peak_rate=MAX16, inv_weight=inv[i], enable=1)
                        for i in range(n)])
    sources = {i: Backlogged([size], random.Random(i)) for i in range(n)}
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
    loop.hold_grants_until = n * p.queue_depth + 4  # every queue full before the first transfer
    loop.run(cycles)
    return p, inv, loop


# ---- fairness: WF2Q+ against WFQ and SFQ ---------------------------------------------------

def wfq_order(weights, size, grants):
    """Reference WFQ (smallest finish tag, no eligibility) for equal requests, all backlogged."""
    n, total = len(weights), sum(weights)
    finish = [Fraction(0)] * n
    out = []
    for _ in range(grants):
        nxt = [finish[i] + Fraction(size * total, weights[i]) for i in range(n)]
        w = min(range(n), key=lambda i: (nxt[i], i))
        finish[w] = nxt[w]
        out.append(oracles.Event(w, size))
    return out


def sfq_order(weights, size, grants):
    """Reference SFQ (smallest start tag) for equal requests, all backlogged."""
    n, total = len(weights), sum(weights)
    start = [Fraction(0)] * n
    out = []
    for _ in range(grants):
        w = min(range(n), key=lambda i: (start[i], i))
        start[w] += Fraction(size * total, weights[w])
        out.append(oracles.Event(w, size))
    return out


@pytest.mark.parametrize("order", [wfq_order, sfq_order])
def test_fairness_oracle_rejects_wfq_and_sfq(order):
    """The bound separates the disciplines: reference WFQ and SFQ schedules of the
    scenario below exceed 2·LMAX + TAG_UNIT·N (by 1.5-1.75 LMAX)."""
    weights = heavy_light(0)
    schedule = order(weights, LMAX, 200)
    lag = oracles.gps_lag_exact(schedule, [Fraction(w, sum(weights)) for w in weights])
    assert lag > 2 * LMAX + 32 * len(weights), f"{order.__name__}: lag {float(lag)} B would pass"


@pytest.mark.parametrize("heavy_index", [0, 3, 7])
def test_wf2q_heavy_against_light(heavy_index):
    """One heavy tenant (half the channel) against seven light ones, all backlogged,
    equal maximum requests: the model stays within 2·LMAX + TAG_UNIT·N of GPS at
    every grant (no cost rounds here, so no rounding allowance), which WFQ
    (3.5·LMAX) and SFQ (3·LMAX) orders do not."""
    weights = heavy_light(heavy_index)
    p, inv, loop = run_backlogged(weights, LMAX)
    events = oracles.from_records(loop.records)
    assert len(events) > 500
    lag = oracles.gps_lag_exact(events, [Fraction(w, sum(weights)) for w in weights])
    bound = 2 * LMAX + p.tag_unit * p.tenants
    assert lag <= bound, f"GPS lag {float(lag)} B > {bound} B"
    verdict = oracles.gps_fairness(events, inv, lmax=LMAX)
    assert verdict.ok, str(verdict)


@pytest.mark.parametrize("heavy_index", [0, 7])
def test_wf2q_heavy_against_light_underloaded(heavy_index):
    """The same with Σφ = 8/9 (every inverse weight 9/8 of exact, so costs still
    do not round): tags then run ahead of the work term, and only V's jump to the
    smallest start tag (§6.4) keeps a head eligible; without it the order decays
    to WFQ's (3.5·LMAX). Inside the fairness claim's 3/4 <= Σφ <= 1 (spec §7)."""
    weights = heavy_light(heavy_index)
    inv = [x * 9 // 8 for x in exact_inv(weights)]
    assert all(x * 8 % 9 == 0 for x in inv)
    p, _, loop = run_backlogged(weights, LMAX, inv=inv)
    events = oracles.from_records(loop.records)
    assert len(events) > 500
    assert sum(Fraction(256, x) for x in inv) == Fraction(8, 9)
    lag = oracles.gps_lag_exact(events, [Fraction(w, sum(weights)) for w in weights])
    bound = 2 * LMAX + p.tag_unit * p.tenants
    assert lag <= bound, f"GPS lag {float(lag)} B > {bound} B"


# ---- envelopes with buckets at capacity ------------------------------------------------------

def bucket_scenario(seed):
    """Tenant 0: committed bucket full (20 maximum requests), uncapped peak, so it
    can take its whole capacity at channel speed. Tenant 1: as full, but a peak
    rate of 20 B/cycle, so only the peak bucket holds it back. Tenant 2: a small
    committed rate and capacity with an uncapped peak, served mostly by burst.
    Tenant 3 floods at equal priority. All start after their buckets have filled."""
    rng = random.Random(seed)
    p = FabricParams(channels=1, tenants=4)
    cap = 20 * p.pcap
    start = 1 + cap // 80  # every bucket is full by then
    tenants = [
        dict(rate=80, capacity=cap, peak_rate=MAX16, inv_weight=1024),
        dict(rate=80, capacity=cap, peak_rate=160, inv_weight=1024),
        dict(rate=8 * rng.randint(1, 4), capacity=p.pcap, peak_rate=MAX16, inv_weight=1024),
        dict(rate=0, capacity=0, peak_rate=MAX16, inv_weight=1024),
    ]
    cfg = FabricConfig([TenantConfig(enable=1, priority=0, **t) for t in tenants])
    sizes = [512, 1024, 4096]
    sources = {i: Backlogged(sizes, random.Random(rng.random())) for i in range(4)}
    loop = ClosedLoop(p, cfg, sources, Fraction(256))
    loop.hold_grants_until = start
    for src in sources.values():  # nothing arrives before `start`
        src.keep, keep = 0, src.keep
    loop.run(start - 20)
    for src in sources.values():
        src.keep = 8
    loop.run(12000)
    return p, tenants, oracles.from_records(loop.records, every=True)


def test_envelopes_reached_and_respected(seed):
    p, tenants, events = bucket_scenario(seed)
    done = [e for e in events if e.transferred is not None]
    for i, t in enumerate(tenants[:3]):
        for verdict in oracles.envelope(done, i, pcap=p.pcap, **{k: t[k] for k in ("rate", "capacity",
                                                                                 "peak_rate")}):
            assert verdict.ok, str(verdict)
    # The envelopes bite: tenant 0 took (almost) its whole committed capacity in
    # one window, tenant 1 (almost) its whole peak bucket plus its peak rate.
    committed = oracles.envelope(done, 0, pcap=p.pcap, rate=80, capacity=tenants[0]["capacity"],
                                 peak_rate=MAX16)[1]
    assert committed.worst >= committed.allowed - 2 * LMAX, str(committed)
    peak = oracles.envelope(done, 1, pcap=p.pcap, rate=80, capacity=tenants[1]["capacity"],
                            peak_rate=160)[0]
    assert peak.worst >= peak.allowed - LMAX, str(peak)
    # A burst grant spends the committed bucket (spec §6.3).
    after = oracles.committed_after_burst(events, 2, rate=tenants[2]["rate"])
    assert after.ok, str(after)
    assert any(e.kind == "burst" for e in done if e.tenant == 2)


def test_queue_never_holds_more_than_depth(seed):
    p, _, events = bucket_scenario(seed)
    for i in range(4):
        occ = oracles.max_occupancy(events, i)
        assert occ <= p.queue_depth, f"tenant {i}: {occ} requests queued, depth {p.queue_depth}"
    assert max(oracles.max_occupancy(events, i) for i in range(4)) == p.queue_depth, "queues never filled"


# ---- guaranteed rate decoupled from weight -------------------------------------------------

def test_guaranteed_rate_beyond_weighted_share(seed):
    """Tenant 0 is promised 40 % of the channel with 1/64 of the weight; three
    tenants with the rest of the weight flood at equal priority through the burst
    path. Weighted sharing alone would give tenant 0 about 1.6 %, so only the
    committed bucket can meet the bound."""
    rng = random.Random(seed)
    p = FabricParams(channels=1, tenants=4)
    bpc = 64
    rate = int(0.4 * bpc * 8)  # UQ13.3
    cap = 4 * p.pcap
    inv0 = 64 * 256
    cfg = FabricConfig([TenantConfig(rate=rate, capacity=cap, peak_rate=MAX16, inv_weight=inv0, enable=1)]
                       + [TenantConfig(rate=0, capacity=0, peak_rate=MAX16, inv_weight=260, enable=1)
                          for _ in range(3)])
    size = rng.choice([256, 512])
    sources = {0: Backlogged([size], random.Random(0))}
    sources.update({i: Backlogged([1024, 4096], random.Random(rng.random())) for i in (1, 2, 3)})
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
    cycles = 12000
    loop.run(cycles)
    events = oracles.from_records(loop.records)
    share_by_weight = Fraction(256, inv0) * bpc
    assert Fraction(rate, 8) > 10 * share_by_weight  # the scenario is not met by weights
    verdict = oracles.guaranteed_rate(events, 0, rate=rate, capacity=cap, lmax=LMAX, start=0,
                                      end=loop.cycle - 2 * LMAX // bpc)
    assert verdict.ok, str(verdict)


# ---- delay bound, tight ---------------------------------------------------------------------

def test_delay_bound_tight(seed):
    """A tenant whose traffic conforms to (capacity, rate) - a full capacity burst
    at once, then the rate - with its peak rate equal to its committed rate, so its
    own peak bucket paces the burst: the worst wait comes within a maximum request
    of the bound, and a flood at lower priority cannot push it over."""
    rng = random.Random(seed)
    p = FabricParams(channels=1, tenants=4)
    rate = 8 * rng.choice([4, 8, 16])  # 4..16 B/cycle
    cap = 8 * p.pcap
    bpc = Fraction(128)
    cfg = FabricConfig([TenantConfig(rate=rate, capacity=cap, peak_rate=rate, inv_weight=1024,
                                     priority=0, enable=1)]
                       + [TenantConfig(rate=0, capacity=0, peak_rate=MAX16, inv_weight=1024 // 3 + 1,
                                       priority=1, enable=1) for _ in range(3)])
    start = cap // rate + 10  # both buckets full when the burst arrives
    sources = {0: Greedy(512, Fraction(cap, 8), Fraction(rate, 8), start=start)}
    sources.update({i: Backlogged([256, 4096], random.Random(rng.random())) for i in (1, 2, 3)})
    loop = ClosedLoop(p, cfg, sources, bpc)
    loop.run(start + 3 * cap // rate)
    bound = oracles.delay_bound(rate=rate, capacity=cap, lmax=LMAX, bytes_per_cycle=bpc)
    verdict = oracles.delays(oracles.from_records(loop.records), 0, bound)
    assert verdict.ok, str(verdict)
    assert verdict.worst >= bound - 2 * Fraction(LMAX * 8, rate), f"not tight: {verdict}"


# ---- starvation with several urgent heads ----------------------------------------------------

def test_starvation_bound_with_urgent_competitors(seed):
    """Three conforming tenants at priority 0 use 99 % of the channel with a small
    starve_limit, so their own heads turn urgent too; the victim (priority 3, the
    smallest weight) must still be selected within the bound, which needs urgent
    heads served oldest first."""
    rng = random.Random(seed)
    n = 4
    p = FabricParams(channels=1, tenants=n)
    bpc = 256
    H = rng.choice([40, 80, 160])
    flood = int(bpc * 8 * 0.33)
    tenants = [TenantConfig(rate=flood, capacity=16 * p.pcap, peak_rate=MAX16, inv_weight=300, priority=0,
                            enable=1) for _ in range(n - 1)]
    small = rng.randint(4, 16)
    tenants.append(TenantConfig(rate=small, capacity=p.pcap, peak_rate=small, inv_weight=65535,
                                priority=3, enable=1))
    cfg = FabricConfig(tenants, starve_limit=H)
    sources = {i: Backlogged([4096], random.Random(rng.random())) for i in range(n - 1)}
    sources[n - 1] = Backlogged([rng.choice([64, 1024])], random.Random(0))
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
    loop.run(40000)
    events = oracles.from_records(loop.records)
    for i in range(n):  # the bound of each tenant uses its own rate (T_fill)
        bound = oracles.starvation_bound(starve_limit=H, rate=tenants[i].rate, tenants=n,
                                         queue_depth=p.queue_depth, lmax=LMAX, bytes_per_cycle=Fraction(bpc))
        verdict = oracles.head_waits(events, i, bound)
        assert verdict.ok, str(verdict)
    assert sum(1 for e in events if e.tenant == n - 1) >= 3


def test_starvation_bound_all_urgent(seed):
    """Eight conforming tenants of equal priority share 99 % of the channel with a
    starve_limit of 8 cycles, so nearly every head is urgent and the urgent order
    alone decides: oldest first meets the bound with about half of it to spare,
    youngest first exceeds it (measured: 700-800 cycles against 579)."""
    rng = random.Random(seed)
    n, bpc, H = 8, 256, 8
    p = FabricParams(channels=1, tenants=n)
    rate = int(bpc * 8 * 0.99 / n)
    cfg = FabricConfig([TenantConfig(rate=rate, capacity=4 * p.pcap, peak_rate=MAX16, inv_weight=256 * n,
                                     priority=0, enable=1) for _ in range(n)], starve_limit=H)
    sources = {i: Backlogged([64, 4096], random.Random(rng.random())) for i in range(n)}
    loop = ClosedLoop(p, cfg, sources, Fraction(bpc))
    loop.run(20000)
    bound = oracles.starvation_bound(starve_limit=H, rate=rate, tenants=n, queue_depth=p.queue_depth,
                                     lmax=LMAX, bytes_per_cycle=Fraction(bpc))
    events = oracles.from_records(loop.records)
    assert sum(1 for e in events if e.kind == "urgent") > len(events) // 2
    for i in range(n):
        verdict = oracles.head_waits(events, i, bound)
        assert verdict.ok, str(verdict)


def test_equal_keys_go_to_the_lower_index():
    """Spec §6.2 rule 3, from its words: four tenants of equal weight, priority and
    request size queue one request each, in reverse index order, while their peak
    buckets (full after the enabling cycle 0, spec §6.3, then emptied here;
    refilling 25.6 B/cycle) cannot cover a request yet. At cycle 11 all four
    buckets cover it at once, every tag and V are still 0, so class,
    eligibility and finish tag are equal and the grants go out in index order."""
    from kvfabric.model.channel import ChannelModel, Request  # the model under test, not an oracle

    p = FabricParams(channels=1, tenants=4)
    cfg = FabricConfig([TenantConfig(rate=0, capacity=0, peak_rate=205, inv_weight=1024, enable=1)
                        for _ in range(4)])
    ch = ChannelModel(p, cfg)
    ch.step(0, None, True)
    ch.peak = [0] * 4
    order = []
    offers = [Request(t, 256, t) for t in (3, 2, 1, 0)]
    for cycle in range(1, 30):
        res = ch.step(cycle, offers[0] if offers else None, True)
        if res.accepted:
            offers.pop(0)
        if res.transferred is not None:
            order.append((res.transferred.tenant, cycle))
    assert [t for t, _ in order[:4]] == [0, 1, 2, 3], order
    assert order[0][1] == 12, order  # selected at 11 (10 * 205 = 2050 >= 2048), transferred at 12


def test_charged_service_with_small_requests():
    """Spec §3 rounds cost up per request, and the tags order tenants by that
    charged service. A heavy tenant (inv_weight 300, φ = 0.85) sending 32-byte
    requests is charged 2 tag units for 1.17 units of work, so it must get well
    under its byte share, and exactly its share of the charged service (step (1)
    of §7's fairness derivation, checked with §3's formula, no allowance)."""
    inv = [300, 1792]
    p = FabricParams(channels=1, tenants=2)
    cfg = FabricConfig([TenantConfig(rate=0, capacity=0, peak_rate=MAX16, inv_weight=x, enable=1) for x in inv])
    sources = {0: Backlogged([32], random.Random(0)), 1: Backlogged([4096], random.Random(1))}
    loop = ClosedLoop(p, cfg, sources, Fraction(16))
    loop.hold_grants_until = 12
    loop.run(40000)
    events = oracles.from_records(loop.records)
    verdict = oracles.gps_charged_fairness(events, inv, lmax=LMAX)
    assert verdict.ok, str(verdict)
    got = sum(e.bytes for e in events if e.tenant == 0) / sum(e.bytes for e in events)
    # charged 2 units per 32 B against 896 per 4096 B: a byte share of 448*32 / (448*32 + 4096)
    assert abs(got - 14336 / (14336 + 4096)) < 0.01, got


# ---- virtual time and tags, every cycle ------------------------------------------------------

@pytest.mark.parametrize("tag_bits, lmax", [(20, 4096), (12, 256)])
def test_virtual_time_and_tags_follow_6_4_every_cycle(seed, tag_bits, lmax):
    """Random traffic (sizes not multiples of TAG_UNIT, idle gaps, a refusing
    memory side, mixed priorities, buckets and a starvation guard): every
    cycle's selection equals §6.2's (``oracles.expected_winner``, eligibility
    against the V this test saw one cycle earlier) and its V, served, vmin and
    tags equal §6.4's update (``oracles.expected_tag_state``), both computed
    from the previous cycle's registers; costs from §3's formula."""
    from kvfabric.model.channel import ChannelModel, Request  # the model under test

    rng = random.Random(seed)
    p = FabricParams(channels=1, tenants=5, max_request_bytes=lmax, tag_bits=tag_bits)
    inv = [rng.choice([256, 300, 777, 1024, 4000]) for _ in range(p.tenants)]
    cfg = FabricConfig([TenantConfig(rate=rng.choice([0, 40]), capacity=2 * p.pcap,
                                     peak_rate=rng.choice([MAX16, 200]), inv_weight=inv[i],
                                     priority=rng.randrange(2), enable=1) for i in range(p.tenants)],
                       starve_limit=rng.choice([0, 50]))
    ch = ChannelModel(p, cfg)
    sizes = [1, 31, 33, 64, 100, lmax // 2 + 1, lmax]
    checked = 0
    v_prev = 0  # V in cycle t - 1 (0 before cycle 0)
    for t in range(6000):
        busy = (t // 500) % 4 != 3  # idle phases let queues drain and tenants return
        req = Request(rng.randrange(p.tenants), rng.choice(sizes), t & 0xFFFF) if busy and rng.random() < 0.8 \
            else None
        ready = rng.random() < 0.6
        pre = dict(tags=list(ch.tag), vt=ch.vt, served=ch.served, vmin=ch.vmin, vmin_valid=ch.vmin_valid,
                   nonempty=[bool(q) for q in ch.fifo])
        heads = [q[0] if q else None for q in ch.fifo]
        load = ch.grant is None or ready
        expect = oracles.expected_winner(
            heads=[(h.bytes, h.ts, oracles.spec_cost(h.bytes, inv[i])) if h else None for i, h in enumerate(heads)],
            levels=list(ch.level), peaks=list(ch.peak), tags=pre["tags"], v_prev=v_prev, now=t & ((1 << p.ts_bits) - 1),
            tenants=cfg.tenants, starve_limit=cfg.starve_limit, fcfs=False, tag_bits=tag_bits, ts_bits=p.ts_bits)
        ch.step(t, req, ready)
        v_prev = pre["vt"]
        winner = ch.grant.tenant if (load and ch.grant is not None) else None
        if load:
            got_kind = oracles.KIND_BY_CODE[ch.grant.kind] if winner is not None else None
            assert expect == (None if winner is None else (winner, got_kind)), \
                f"cycle {t}: model selected {winner}, §6.2 selects {expect}"
        head = heads[winner] if winner is not None else None
        want = oracles.expected_tag_state(
            **pre, winner=winner, winner_bytes=head.bytes if head else 0,
            winner_cost=oracles.spec_cost(head.bytes, inv[winner]) if head else 0, fabric=True,
            tag_bits=tag_bits, tag_shift=p.tag_shift, lag_window=p.lag_window)
        got = (list(ch.tag), ch.vt, ch.served, ch.vmin, ch.vmin_valid)
        assert got == tuple(want), f"cycle {t}: model {got} != spec {want} (winner {winner})"
        checked += winner is not None
    assert checked > 1000


def test_ready_counts_the_ingress_register():
    """Spec §4: occupancy includes a request held in the ingress register, and an
    upstream may present a request while queue_full is set. Tenant 0's heads never
    compete (peak rate 0, its full start bucket emptied after cycle 0), so its
    queue only fills: offers in cycles 1..5 see occupancy 0, 1, 2, 3 and 4
    (three in the FIFO, one in ingress): the fifth is refused, and again in
    cycle 6 (four in the FIFO)."""
    from kvfabric.model.channel import ChannelModel, Request  # the model under test

    p = FabricParams(channels=1, tenants=2)
    cfg = FabricConfig([TenantConfig(peak_rate=0, inv_weight=512, enable=1),
                        TenantConfig(peak_rate=MAX16, inv_weight=512, enable=1)])
    ch = ChannelModel(p, cfg)
    ch.step(0, None, True)
    ch.peak[0] = 0
    accepted = [ch.step(t, Request(0, 64, t), True).accepted for t in range(1, 7)]
    assert accepted == [True, True, True, True, False, False], accepted


@pytest.mark.parametrize("nbytes, valid", [(0, False), (1, True), (LMAX, True), (LMAX + 1, False),
                                           ((1 << 13) - 1, False)])
def test_request_size_validity(nbytes, valid):
    """Spec §4: bytes = 0 or bytes > LMAX is invalid: accepted, counted as dropped,
    never queued; 1..LMAX is queued."""
    from kvfabric.model.channel import ChannelModel, Request  # the model under test

    p = FabricParams(channels=1, tenants=2)
    cfg = FabricConfig([TenantConfig(peak_rate=0, inv_weight=512, enable=1) for _ in range(2)])
    ch = ChannelModel(p, cfg)
    res = ch.step(0, Request(1, nbytes, 7), True)
    assert res.accepted and res.dropped == (not valid)
    ch.step(1, None, True)
    assert len(ch.fifo[1]) == (1 if valid else 0)
