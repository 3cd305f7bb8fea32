"""The memory-side interface on the golden model (spec §6.6): grant kind 3
(urgent), per-class credits and the ``CREDITS`` register's checks.

The oracles here are the definitions, not the model: the tests keep their own
``inflight`` counters from what the channel selects (a new grant register
value) and what they return, and check every cycle that no head of a class
without credit was selected and that the model's counters agree.
"""

import random
from dataclasses import replace

import pytest

from kvfabric.spec import (BURST, CREDIT_BITS, FCFS, GUARANTEED, KIND_NAMES, URGENT, FabricParams,
                           axqos, credit_class)
from kvfabric.model.channel import ChannelModel, QueueEntry, Request
from kvfabric.model.fabric import FabricModel
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.tb.stimulus import random_config

P = FabricParams(tenants=4, channels=1, queue_depth=4)
FULL = dict(rate=8 * 64, capacity=1 << 20, peak_rate=8 * 64, inv_weight=256, enable=1)
# Credit class of each kind, written from spec §6.6's table (not from the code).
CLASS_OF = {URGENT: 0, GUARANTEED: 1, BURST: 2, FCFS: None}


def class_of(kind, priority, bulk_prio, arrival_prio=0):
    """Spec §6.6: a guaranteed grant at a priority marked in bulk_prio counts as
    burst; a burst grant at a priority marked in arrival_prio and not in
    bulk_prio counts as guaranteed."""
    marked_bulk = bulk_prio & (1 << priority)
    if kind == GUARANTEED and marked_bulk:
        return 2
    if kind == BURST and arrival_prio & (1 << priority) and not marked_bulk:
        return 1
    return CLASS_OF[kind]


def test_kind_names_and_credit_classes():
    assert URGENT == 3 and KIND_NAMES[URGENT] == "urgent"
    assert [credit_class(k) for k in (URGENT, GUARANTEED, BURST, FCFS)] == [0, 1, 2, None]
    # bulk_prio moves only guaranteed grants of the marked priorities.
    assert [credit_class(GUARANTEED, p, 0b0100) for p in range(4)] == [1, 1, 2, 1]
    assert [credit_class(k, 2, 0b1111) for k in (URGENT, BURST, FCFS)] == [0, 2, None]
    with pytest.raises(ValueError, match="grant kind"):
        credit_class(4)


def test_axqos_is_spec_6_6s_mapping():
    # Spec §6.6's table: urgent 15, guaranteed 11 - priority, burst 4, fcfs 0.
    assert [axqos(GUARANTEED, p) for p in range(4)] == [11, 10, 9, 8]
    assert [axqos(k, p) for k in (URGENT, BURST, FCFS) for p in (0, 3)] == [15, 15, 4, 4, 0, 0]
    with pytest.raises(ValueError, match=r"priority must be 0\.\.3, not 4"):
        axqos(GUARANTEED, 4)
    with pytest.raises(ValueError, match="grant kind"):
        axqos(5, 0)


@pytest.mark.parametrize("credits, field", [((256, 0, 0), "credit_urgent"),
                                            ((0, -1, 0), "credit_guaranteed"),
                                            ((0, 0, 1 << 8), "credit_burst")])
def test_credits_register_range_names_the_field(credits, field):
    with pytest.raises(ValueError, match=rf"CREDITS register {field} = .*allowed 0\.\.255"):
        FabricConfig([TenantConfig()], credits=credits)


def test_bulk_prio_is_a_4_bit_mask():
    assert FabricConfig([TenantConfig()], bulk_prio=15).bulk_prio == 15
    with pytest.raises(ValueError, match=r"CREDITS register bulk_prio = 16 .*allowed 0\.\.15"):
        FabricConfig([TenantConfig()], bulk_prio=16)


def test_credits_register_needs_three_limits():
    with pytest.raises(ValueError, match="CREDITS register.*3 limits"):
        FabricConfig([TenantConfig()], credits=(1, 2))
    assert FabricConfig([TenantConfig()], credits=[255, 0, 7]).credits == (255, 0, 7)
    assert FabricConfig.reset(2).credits == (0, 0, 0)
    assert CREDIT_BITS == 8


class CreditOracle:
    """``inflight`` per credit class exactly as spec §6.6 words it."""

    def __init__(self):
        self.inflight = [0, 0, 0]

    def has_credit(self, limits):
        return [lim == 0 or held < lim for lim, held in zip(limits, self.inflight)]

    def step(self, selected_class, ret):
        for k in range(3):
            x = min(self.inflight[k] + (selected_class == k), 255)
            self.inflight[k] = x - 1 if (ret[k] and x > 0) else x


def drive(ch, rng, cycles, *, p_ready=0.7, p_return=0.3, limits=None, on_cycle=None):
    """Random requests, ready and credit returns; yields per cycle
    (has_credit before, selected kind or None, its credit class, transferred grant)."""
    oracle = CreditOracle()
    for t in range(cycles):
        req = None
        if rng.random() < 0.8:
            tenant = rng.randrange(P.tenants)
            req = Request(tenant, rng.choice([32, 64, 256, 1024, 4096]), t & 0xFFFF)
        ready = rng.random() < p_ready
        ret = tuple(int(rng.random() < p_return) for _ in range(3))
        before = oracle.has_credit(ch.config.credits)
        assert list(ch.has_credit()) == before, (t, ch.inflight, oracle.inflight)
        prev = ch.grant
        res = ch.step(t & ((1 << P.ts_bits) - 1), req, ready, ret)
        selected = ch.grant.kind if (ch.grant is not None and ch.grant is not prev) else None
        k = None
        if selected is not None:
            cfg = ch.config
            k = class_of(selected, cfg.tenants[ch.grant.tenant].priority, cfg.bulk_prio, cfg.arrival_prio)
        oracle.step(k, ret)
        assert ch.inflight == oracle.inflight, (t, ch.inflight, oracle.inflight)
        yield t, before, selected, k, res


def test_no_class_wins_without_credit(seed):
    """A class whose in-flight count is at its limit never wins, and with
    limits set from reset no count ever exceeds its limit."""
    rng = random.Random(seed)
    seen = {URGENT: 0, GUARANTEED: 0, BURST: 0, "bulk": 0, "latency burst": 0}
    blocked = 0
    for trial in range(12):
        credits = tuple(rng.choice([0, 1, 2, 3, 8]) for _ in range(3))
        bulk_prio = rng.choice([0, 0, 0b0100, 0b1100, 0b0011])
        arrival_prio = rng.choice([0, 0b0001, 0b0011, 0b1111])
        ch = ChannelModel(P, replace(random_config(P, rng, enable=1, starve=(0, 0, 20, 60), epoch=(0,)), credits=credits,
                                    bulk_prio=bulk_prio, arrival_prio=arrival_prio))
        for t, before, selected, k, _ in drive(ch, rng, 600, p_return=rng.choice([0.05, 0.3, 0.9])):
            if selected is not None:
                assert before[k], (trial, t, KIND_NAMES[selected], credits, bulk_prio)
                seen[selected] += 1
                seen["bulk"] += selected == GUARANTEED and k == 2
                seen["latency burst"] += selected == BURST and k == 1
            for k in range(3):
                if credits[k]:
                    assert ch.inflight[k] <= credits[k]
            blocked += not all(before)
    # The random runs exercised every class and the blocked case.
    assert min(seen.values()) > 0 and blocked > 0, (seen, blocked)


def test_zero_limits_change_nothing(seed):
    """Limits 0: any credit returns give the same grants, cycle by cycle, as a
    channel stepped without the credit input (the behaviour before credits)."""
    rng = random.Random(seed)
    for trial in range(6):
        cfg = random_config(P, rng, enable=1, starve=(0, 0, 20, 60), epoch=(0,), fcfs=int(trial == 5))
        a, b = ChannelModel(P, cfg), ChannelModel(P, cfg)
        run = random.Random(rng.random())
        for t in range(800):
            tenant = run.randrange(P.tenants)
            req = Request(tenant, run.choice([32, 64, 512, 4096]), t) if run.random() < 0.8 else None
            ready = run.random() < 0.6
            ret = tuple(int(run.random() < 0.5) for _ in range(3))
            ra = a.step(t, req, ready, ret)
            rb = b.step(t, req, ready)
            assert ra == rb and a.grant == b.grant, (trial, t)


def backlog(ch, tenant, n, nbytes=64, ts=0):
    for j in range(n):
        ch.fifo[tenant].append(QueueEntry(bytes=nbytes, id=j, ts=ts, cost=2))


def test_a_return_frees_exactly_one():
    """Guaranteed limit 2: two selections, then none until a return, then
    exactly one per return."""
    cfg = FabricConfig([TenantConfig(**FULL) for _ in range(2)], credits=(0, 2, 0))
    ch = ChannelModel(FabricParams(tenants=2, channels=1, queue_depth=16), cfg)
    for i in range(2):
        ch.level[i] = ch.peak[i] = P.pcap
        backlog(ch, i, 12)
    now = 0

    def cycle(ret=(0, 0, 0)):
        nonlocal now
        prev = ch.grant
        ch.step(now, None, True, ret)
        now += 1
        return ch.grant is not None and ch.grant is not prev

    assert [cycle(), cycle()] == [True, True]
    assert ch.inflight == [0, 2, 0] and ch.has_credit() == (True, False, True)
    assert [cycle() for _ in range(5)] == [False] * 5
    assert ch.grant is None  # the register emptied: nothing was selected
    assert cycle((0, 1, 0)) is False  # the return counts from the next cycle
    assert ch.inflight == [0, 1, 0]
    assert [cycle(), cycle(), cycle()] == [True, False, False]
    # A return of another class frees nothing for guaranteed heads.
    assert [cycle((1, 0, 1)), cycle()] == [False, False]
    assert ch.inflight == [0, 2, 0]
    # A return in the cycle of a selection: the count goes +1 -1.
    cycle((0, 1, 0))
    assert [cycle((0, 1, 0)), ch.inflight] == [True, [0, 1, 0]]


def test_head_without_credit_is_not_demoted():
    """A conforming head whose guaranteed class has no credit does not compete
    as burst, even with burst credit; a burst head of another tenant wins."""
    p = FabricParams(tenants=2, channels=1)
    cfg = FabricConfig([TenantConfig(**FULL) for _ in range(2)], credits=(0, 1, 0))
    ch = ChannelModel(p, cfg)
    ch.inflight = [0, 1, 0]
    ch.level[0] = ch.peak[0] = p.pcap  # tenant 0 conforms: guaranteed class
    backlog(ch, 0, 1)
    assert ch.select(5) is None
    ch.peak[1] = p.pcap  # tenant 1: peak only, burst class
    backlog(ch, 1, 1)
    assert ch.select(5) == (1, BURST)
    ch.inflight = [0, 0, 0]
    assert ch.select(5) == (0, GUARANTEED)


def urgent_channel(credits):
    """Tenant 0 has an old conforming head (urgent with starve_limit 10),
    tenant 1 a new conforming one at the same priority."""
    p = FabricParams(tenants=2, channels=1)
    cfg = FabricConfig([TenantConfig(**FULL) for _ in range(2)], starve_limit=10, credits=credits)
    ch = ChannelModel(p, cfg)
    # Enabled before the cycles below, so their first step is no enabling
    # edge (spec §6.3's start fill would set the level to the capacity).
    ch.enable_prev = [1, 1]
    for i in range(2):
        ch.level[i] = ch.peak[i] = 4 * p.pcap
    backlog(ch, 0, 1, ts=0)
    backlog(ch, 1, 1, ts=95)
    return ch


def test_bulk_priority_uses_burst_credits():
    """bulk_prio = {2}: tenant 0 (priority 2) conforms but its guaranteed head
    needs burst credit, so with the guaranteed class exhausted it still wins,
    is counted as burst, and is reported as guaranteed; with the burst class
    exhausted instead it waits while tenant 1 (priority 3, which it would
    beat) wins on guaranteed credit."""
    p = FabricParams(tenants=2, channels=1)
    tenants = [TenantConfig(**FULL, priority=2), TenantConfig(**FULL, priority=3)]
    ch = ChannelModel(p, FabricConfig(tenants, credits=(0, 1, 1), bulk_prio=0b0100))
    for i in range(2):
        ch.level[i] = ch.peak[i] = p.pcap
    backlog(ch, 0, 2)
    ch.inflight = [0, 1, 0]
    ch.step(0, None, True)
    assert (ch.grant.tenant, ch.grant.kind, ch.inflight) == (0, GUARANTEED, [0, 1, 1])
    backlog(ch, 1, 1)
    ch.inflight = [0, 0, 1]
    ch.step(1, None, True)
    assert (ch.grant.tenant, ch.grant.kind, ch.inflight) == (1, GUARANTEED, [0, 1, 1])


def test_arrival_ordered_burst_uses_guaranteed_credits():
    """arrival_prio = {1}, bulk_prio = {2}: tenant 0 (priority 1) has an empty
    committed bucket, so its head is a burst head, and it needs guaranteed
    credit: with the burst class exhausted it still wins against tenant 1
    (priority 3, also past its bucket), is counted as guaranteed and reported
    as burst; with the guaranteed class exhausted instead it waits while
    tenant 1 wins on burst credit. Marked bulk as well, priority 1's burst
    head is burst class again."""
    p = FabricParams(tenants=2, channels=1)
    tenants = [TenantConfig(**FULL, priority=1), TenantConfig(**FULL, priority=3)]
    ch = ChannelModel(p, FabricConfig(tenants, credits=(0, 1, 1), bulk_prio=0b0100, arrival_prio=0b0010))
    for i in range(2):
        ch.level[i], ch.peak[i] = 0, p.pcap
    backlog(ch, 0, 2)
    backlog(ch, 1, 1)
    ch.tag[1] = 1 << 10  # tenant 1's finish tag would lose to tenant 0's anyway
    ch.inflight = [0, 0, 1]
    ch.step(0, None, True)
    assert (ch.grant.tenant, ch.grant.kind, ch.inflight) == (0, BURST, [0, 1, 1])
    ch.level[0] = ch.level[1] = 0  # both still past their buckets (a cycle's refill undone)
    ch.inflight = [0, 1, 0]
    ch.step(1, None, True)
    assert (ch.grant.tenant, ch.grant.kind, ch.inflight) == (1, BURST, [0, 1, 1])
    ch = ChannelModel(p, FabricConfig(tenants, credits=(0, 1, 1), bulk_prio=0b0110, arrival_prio=0b0010))
    ch.level[0], ch.peak[0] = 0, p.pcap
    backlog(ch, 0, 1)
    ch.inflight = [0, 0, 1]
    assert ch.select(0) is None  # burst class again: no credit, no winner


def test_urgent_grants_report_kind_3_and_spend_like_guaranteed():
    ch = urgent_channel((0, 0, 0))
    assert ch.select(100) == (0, URGENT)
    level = ch.level[0]
    ch.step(100, None, True)
    assert ch.grant.kind == URGENT and ch.inflight == [1, 0, 0]
    # §6.3: an urgent winner's level is debited, not emptied as a burst's is.
    assert ch.level[0] == min(level - (64 << 3) + FULL["rate"], FULL["capacity"])
    ch.step(101, None, True)
    assert ch.grant.kind == GUARANTEED and ch.grant.tenant == 1 and ch.inflight == [1, 1, 0]


def test_urgent_head_needs_urgent_credit():
    ch = urgent_channel((1, 0, 0))
    ch.inflight = [1, 0, 0]
    # The urgent head waits; the young one competes in its own class.
    assert ch.select(100) == (1, GUARANTEED)


def test_fcfs_counts_nothing_and_returns_still_decrement():
    p = FabricParams(tenants=2, channels=1)
    cfg = FabricConfig([TenantConfig(**FULL) for _ in range(2)], fcfs_bypass=1, credits=(1, 1, 1))
    ch = ChannelModel(p, cfg)
    ch.inflight = [1, 1, 1]  # every class at its limit: fcfs ignores credits
    backlog(ch, 0, 3)
    kinds = []
    for t, ret in enumerate([(0, 0, 0), (1, 0, 0), (1, 0, 1)]):
        ch.step(t, None, True, ret)
        kinds.append(ch.grant.kind)
    assert kinds == [FCFS] * 3 and ch.inflight == [0, 1, 0]


def test_inflight_saturates_at_255():
    """Counting happens whatever the limit: with limit 0, 300 guaranteed
    selections leave 255 in flight; 255 returns empty it, a 256th is ignored."""
    p = FabricParams(tenants=1, channels=1, queue_depth=64)
    ch = ChannelModel(p, FabricConfig([TenantConfig(**FULL)]))
    t = 0
    for _ in range(300):
        if not ch.fifo[0]:
            backlog(ch, 0, 64)
        ch.level[0] = ch.peak[0] = p.pcap
        ch.step(t, None, True)
        t += 1
    assert ch.inflight == [0, 255, 0]
    ch.fifo[0].clear()
    for _ in range(256):
        ch.step(t, None, True, (0, 1, 0))
        t += 1
    assert ch.inflight == [0, 0, 0]


def test_fabric_credit_return_is_per_channel():
    p = FabricParams(tenants=1, channels=2)
    fab = FabricModel(p, FabricConfig([TenantConfig(**FULL)], credits=(0, 0, 0)))
    for ch in fab.channels:
        ch.inflight = [2, 2, 2]
    fab.step([None, None], [True, True], [(1, 0, 0), (0, 1, 1)])
    assert [ch.inflight for ch in fab.channels] == [[1, 2, 2], [2, 1, 1]]
    fab.step([None, None], [True, True])
    assert [ch.inflight for ch in fab.channels] == [[1, 2, 2], [2, 1, 1]]
    with pytest.raises(ValueError, match="one per channel"):
        fab.step([None, None], [True, True], [(0, 0, 0)])
    with pytest.raises(ValueError, match="credit_return must be 3 bits"):
        fab.step([None, None], [True, True], [(0, 0, 2), (0, 0, 0)])
