"""System-level tests: address mapping, tenants, policies and the fabric adapter."""

import os
import random
from fractions import Fraction

from collections import deque
from types import SimpleNamespace

import pytest

from kvfabric.model.channel import ChannelModel
from kvfabric.sim.dram import NEVER
from kvfabric.sim.fabric import FabricPolicy, FabricQosPolicy, QosKnobs, contract_doc, grant_axqos, grant_class
from kvfabric.sim.hbm3 import HBM3_GEOMETRY as G
from kvfabric.sim.hbm3 import ns_to_cycles
from kvfabric.sim.mapping import AddressMap, ChannelMap
from kvfabric.sim.policies import FcfsPolicy, FrFcfsPolicy, PriorityFrFcfsPolicy, StaticPartitionPolicy, ThrottlePolicy
from kvfabric.sim.fabric import FABRIC_MHZ
from kvfabric.sim.hbm3 import CHANNEL_GBPS
from kvfabric.sim.system import CxlLink, System
from kvfabric.sim.tenants import DecodeTenant, GreedyTenant, PrefillTenant


# -- address mapping -------------------------------------------------------------
def test_coloring_gives_disjoint_bank_sets_spanning_every_bank_group(seed):
    amap = AddressMap(4, coloring=True)
    sets = [set(amap.banks_of(t)) for t in range(4)]
    assert all(len(s) == G.banks // 4 for s in sets)
    assert set().union(*sets) == set(range(G.banks))
    for s in sets:
        groups = {G.split_bank_id(b)[2] for b in s}
        assert groups == set(range(G.bank_groups))
    rng = random.Random(seed)
    for t in range(4):
        for _ in range(500):
            bank, row = amap.locate(t, rng.randrange(amap.capacity(t)))
            assert bank in sets[t] and 0 <= row < G.rows


def test_uncolored_tenants_share_banks_but_not_rows():
    amap = AddressMap(4)
    rows = [{amap.locate(t, i)[1] for i in range(0, amap.capacity(t), 4099)} for t in range(4)]
    assert all(not (rows[a] & rows[b]) for a in range(4) for b in range(a + 1, 4))
    banks = {amap.locate(0, i)[0] for i in range(4096)}
    assert banks == set(range(G.banks))


def test_stream_alternates_pseudo_channels_and_stays_in_a_row():
    amap = AddressMap(1)
    located = [amap.locate(0, i) for i in range(8)]
    assert [G.split_bank_id(b)[0] for b, _ in located] == [0, 1] * 4
    assert located[0] == located[2] and located[1] == located[3]


# -- tenants ------------------------------------------------------------------------
def test_decode_step_latency_is_time_to_last_read_and_loop_is_closed(seed):
    tenant = DecodeTenant(0, step_bytes=4096, think=2000, seed=seed)
    system = System([tenant], FrFcfsPolicy())
    finished = []
    complete = tenant.complete

    def spy(txn, now):
        finished.append((tenant._step_start, now))
        complete(txn, now)

    tenant.complete = spy
    system.run(30_000)
    assert len(tenant.steps) >= 5
    for start, latency in tenant.steps:
        ends = [end for s, end in finished if s == start]
        assert len(ends) == 4096 // 128 and max(ends) - start == latency
    for (s1, l1), (s2, _) in zip(tenant.steps, tenant.steps[1:]):
        assert s2 - (s1 + l1) >= 2000 * 3 // 4  # think time, jitter 25%


def test_prefill_moves_exactly_its_bytes_within_its_window():
    tenant = PrefillTenant(0, job_bytes=64 * 1024, period=NEVER // 2, window=20, chunks=4)
    system = System([tenant], FrFcfsPolicy())
    peak = 0
    issue = system.submit

    def spy(txn, now):
        nonlocal peak
        issue(txn, now)
        peak = max(peak, tenant.in_flight)

    system.submit = spy
    system.run(20_000)
    assert len(tenant.jobs) == 1
    assert system.channel.stats.bytes[0] == 64 * 1024
    assert peak == 20


def test_cxl_reads_pay_the_link_latency_and_skip_hbm(seed):
    latency = ns_to_cycles(320)
    tenant = DecodeTenant(0, step_bytes=1024, think=1000, cxl_fraction=1.0, seed=seed)
    system = System([tenant], FrFcfsPolicy(), cxl=CxlLink(latency=latency, cycles_per_access=3))
    system.run(20_000)
    assert tenant.steps and system.channel.stats.accesses[0] == 0
    # Eight 128 B transactions, 4 accesses each, 3 cycles per access on the link.
    assert all(lat == latency + 8 * 4 * 3 for _, lat in tenant.steps)


# -- policies -------------------------------------------------------------------------
def _record_enqueued(system, what):
    """``what(txn)`` of every transaction the front end hands the channel, in order."""
    seen = []
    enqueue = system.enqueue

    def spy(txn, now):
        seen.append(what(txn))
        enqueue(txn, now)

    system.enqueue = spy
    return seen


def test_fcfs_front_end_admits_in_arrival_order(seed):
    tenants = [GreedyTenant(i, window=40, pattern="random", seed=seed) for i in range(3)]
    system = System(tenants, FcfsPolicy())
    admitted = _record_enqueued(system, lambda txn: txn.seq)
    system.run(10_000)
    assert admitted == sorted(admitted) and len(admitted) > 100


def test_priority_frfcfs_admits_the_best_waiting_priority_first(seed):
    """The reference controller's front end: whenever it admits a transaction,
    no tenant of a better (lower) priority has a head waiting that fits."""
    priorities = {0: 2, 1: 1, 2: 3}
    # Windows small enough that the better priorities leave room (strict
    # priority starves a worse one otherwise).
    tenants = [GreedyTenant(i, window=w, pattern="random", seed=seed + i) for i, w in enumerate((6, 6, 40))]
    system = System(tenants, PriorityFrFcfsPolicy(priorities))
    admitted, passed_over = [], []
    enqueue = system.enqueue

    def spy(txn, now):
        better = [q[0].tenant for q in system.sources
                  if q and q[0] is not txn and system.room_for(q[0]) and priorities[q[0].tenant] < priorities[txn.tenant]]
        passed_over.extend(better)
        admitted.append(txn.tenant)
        enqueue(txn, now)

    system.enqueue = spy
    system.run(20_000)
    assert not passed_over
    assert {0, 1, 2} <= set(admitted) and len(admitted) > 300  # every priority was admitted at some point


def test_priority_frfcfs_ranks_every_access_of_a_better_priority_first(seed):
    """In the banks an access ranks by its tenant's priority, then arrival:
    every access of the decode (priority 1) ranks below every access of a
    streaming writer of priority 2, and its steps finish sooner than under
    FR-FCFS's arrival order (the writer's drains and row hits within the cap
    still delay it)."""
    results, ranks = {}, {}
    for name in ("frfcfs", "prio"):
        tenants = [GreedyTenant(0, window=300, pattern="stream", write_share=4),
                   DecodeTenant(1, seed=seed, step_bytes=4096, think=3000)]
        policy = PriorityFrFcfsPolicy({0: 2, 1: 1}) if name == "prio" else FrFcfsPolicy()
        system = System(tenants, policy)
        seen = _record_enqueued(system, lambda txn: (txn.tenant, [a.rank for a in txn.accesses]))
        system.run(60_000)
        ranks[name] = seen
        steps = sorted(lat for _, lat in tenants[1].steps)
        results[name] = sum(steps) / len(steps)
    by_tenant = {t: [r for tid, rs in ranks["prio"] if tid == t for r in rs] for t in (0, 1)}
    assert by_tenant[0] and by_tenant[1]
    assert max(by_tenant[1]) < min(by_tenant[0])
    assert results["prio"] < results["frfcfs"], results


def test_priority_frfcfs_names_what_it_lacks():
    from kvfabric.sim.front_ends import make_front_end
    with pytest.raises(ValueError, match="prio-frfcfs.*needs a contract"):
        make_front_end("prio-frfcfs")
    with pytest.raises(ValueError, match="tenant 3: priority must be an integer 0-15, not 16"):
        PriorityFrFcfsPolicy({3: 16})
    policy = make_front_end("prio-frfcfs", _contract([_tenant(0, priority=2), _tenant(1, priority=0)]))
    assert policy.priorities == {0: 2, 1: 0}
    with pytest.raises(ValueError, match=r"tenants \[2\] have no priority in the contract \(it gives tenants \[0, 1\]\)"):
        System([GreedyTenant(i, window=4) for i in range(3)], policy).run(10)


class _ReversedBankSet(set):
    """A bank set that hands its banks out highest first: CPython's set order
    of small ints is roughly ascending, PyPy's is insertion order."""

    def __iter__(self):
        return iter(sorted(set.__iter__(self), reverse=True))


@pytest.mark.parametrize("make_policy", [FrFcfsPolicy, FcfsPolicy])
def test_the_schedule_does_not_depend_on_the_order_banks_are_looked_at(seed, make_policy):
    """Every access has its own rank (a transaction's in address order), so the
    channel's choice among banks never falls to the order in which it visits
    them, which a Python set leaves to the interpreter."""
    def run(reverse):
        tenants = [GreedyTenant(i, window=48, pattern="random", seed=seed) for i in range(3)]
        system = System(tenants, make_policy())
        ranks = _record_enqueued(system, lambda txn: [a.rank for a in txn.accesses])
        if reverse:
            system.channel.active = _ReversedBankSet(system.channel.active)
        system.run(20_000)
        st = system.channel.stats
        return ranks, (list(st.bytes), list(st.hits), st.acts)

    ranks, forward = run(False)
    flat = [r for txn in ranks for r in txn]
    assert len(flat) > 400 and len(set(flat)) == len(flat)
    assert all(txn == sorted(txn) for txn in ranks)
    assert run(True)[1] == forward


def test_static_partition_keeps_each_tenant_in_its_slice():
    tenants = [GreedyTenant(i, window=200, pattern="stream") for i in range(4)]
    policy = StaticPartitionPolicy()
    system = System(tenants, policy)
    worst = [0] * 4
    tick = system.channel.tick

    def spy(now, horizon=NEVER):
        for t in range(4):
            worst[t] = max(worst[t], system.channel.tenant_occupancy[t])
        return tick(now, horizon)

    system.channel.tick = spy
    system.run(10_000)
    assert max(worst) <= policy.slots and min(worst) > 0
    banks = {t: set(system.address_map.banks_of(t)) for t in range(4)}
    assert all(not (banks[a] & banks[b]) for a in range(4) for b in range(a + 1, 4))


def test_software_throttle_caps_the_average_but_not_the_burst():
    period = 4000
    tenant = PrefillTenant(0, job_bytes=1 << 24, period=NEVER // 2, window=300)
    system = System([tenant], ThrottlePolicy(share=Fraction(1, 4), period=period),
                    timeline_window=period // 4)
    system.run(10 * period)
    moved = system.channel.stats.bytes[0]
    assert moved <= Fraction(1, 4) * 32 * 10 * period + 300 * 128
    windows = [sum(r) for _, r in sorted(system.channel.stats.timeline.items())]
    assert max(windows) > 2 * Fraction(1, 4) * 32 * period // 4, "a throttled burst runs at full speed"


# -- the fabric adapter ---------------------------------------------------------------
def _contract(tenants):
    return contract_doc(tenants, channel_gbps=CHANNEL_GBPS, clock_mhz=FABRIC_MHZ)


def _tenant(i, **kw):
    t = dict(id=i, name=f"t{i}", guaranteed_gbps=0, burst_gbps=CHANNEL_GBPS, burst_duration_ms=0.1,
             priority=1, latency_slo_us=25, weight=1)
    t.update(kw)
    return t


def test_fabric_drives_the_golden_model_and_loses_nothing(seed):
    tenants = [GreedyTenant(0, window=64, pattern="stream"),
               GreedyTenant(1, window=16, pattern="random", seed=seed)]
    policy = FabricPolicy(_contract([_tenant(0), _tenant(1)]))
    system = System(tenants, policy)
    system.run(20_000)
    assert isinstance(policy.model, ChannelModel)
    # Every transaction the tenants issued is waiting upstream, inside the
    # arbiter, or was granted exactly once into the controller.
    assert system._seq == system.waiting + len(policy.in_fabric) + sum(policy.grants)
    # Each grant put four accesses in the controller; they are counted as
    # served when their column command issues.
    assert sum(policy.grants) * 4 == sum(system.channel.stats.accesses) + system.channel.occupancy
    assert all(g > 0 for g in policy.grants)


def test_fabric_never_presents_an_outstanding_id(seed):
    """A request's id is its issue order's low ID_WIDTH bits. With ids of
    two bits and 80 transactions outstanding, issue orders four apart meet
    in the fabric: upstream holds a transaction whose id is still
    outstanding on the channel (a grant names its transaction by id), so
    every grant finds its own and nothing is lost."""
    tenants = [GreedyTenant(0, window=64, pattern="stream"),
               GreedyTenant(1, window=16, pattern="random", seed=seed)]
    policy = FabricPolicy(_contract([_tenant(0), _tenant(1)]))
    policy.id_mask = 3
    system = System(tenants, policy)
    system.run(20_000)
    assert system._seq == system.waiting + len(policy.in_fabric) + sum(policy.grants)
    assert all(g > 0 for g in policy.grants)


class _Upstream:
    """A system stand-in for the fabric's front end alone: per tenant a source
    queue of waiting reads, a memory side that is never ready (grants stay
    in the grant register), and what the front end took, in order."""

    def __init__(self, queues):
        self.sources = [deque(SimpleNamespace(tenant=t, seq=seq, nbytes=128, is_write=False) for seq in seqs)
                        for t, seqs in enumerate(queues)]
        self.waiting = sum(len(q) for q in self.sources)
        self.taken = []
        self.channel = SimpleNamespace(has_room=lambda *args: False)

    def take(self, txn):
        self.sources[txn.tenant].popleft()
        self.waiting -= 1
        self.taken.append(txn.tenant)


def _presented(doc, queues, clocks):
    """Run the front end ``clocks`` fabric clocks; return, per clock, the
    arbiter queues' occupancy it saw, the heads waiting and the tenant taken."""
    policy = FabricPolicy(doc)
    up = _Upstream(queues)
    policy.prepare([None] * len(queues), up)
    seen = []
    for cycle in range(clocks):
        occ = list(policy.model.occupancy())
        heads = [(q[0].tenant, q[0].seq) for q in up.sources if q]
        before = len(up.taken)
        policy._clock(4 * cycle, cycle)
        seen.append((occ, heads, up.taken[before] if len(up.taken) > before else None))
    return seen


def test_fabric_presents_a_latency_bound_tenant_before_a_bulk_one_of_equal_queue():
    """Upstream presents the emptiest arbiter queue with room; of equally
    empty ones a tenant whose priority is not bulk (spec §6.6) before a bulk
    one, then the oldest head (issue #41), so a bulk tenant whose queue is
    emptier still goes first."""
    doc = _contract([_tenant(0, priority=2, guaranteed_gbps=10), _tenant(1, priority=1, guaranteed_gbps=2)])
    doc["fabric"]["bulk_priorities"] = [2]
    # Tenant 0 (bulk) issued first: its heads are always the older.
    seen = _presented(doc, [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]], 8)
    assert seen[0] == ([0, 0], [(0, 0), (1, 1)], 1)    # both empty: the latency-bound tenant
    depth = doc["fabric"]["queue_depth"]
    bulk = {0: 1, 1: 0}
    for occ, heads, taken in seen:
        room = [(2 * occ[t] + bulk[t], seq, t) for t, seq in heads if occ[t] < depth]
        assert taken == (min(room)[2] if room else None), seen
    assert {taken for _, _, taken in seen} == {0, 1}
    assert any(occ[0] < occ[1] and taken == 0 for occ, _, taken in seen), seen  # the emptier bulk queue first
    # Without bulk priorities the older head wins the tie, as before.
    doc["fabric"].pop("bulk_priorities")
    assert _presented(doc, [[0, 2], [1, 3]], 1)[0] == ([0, 0], [(0, 0), (1, 1)], 0)


def test_fabric_equal_weights_split_a_saturated_channel_evenly(seed):
    tenants = [GreedyTenant(0, window=300, pattern="stream"),
               GreedyTenant(1, window=40, pattern="random", block=2, seed=seed)]
    system = System(tenants, FabricPolicy(_contract([_tenant(0), _tenant(1)])))
    system.run(60_000)
    b = system.channel.stats.bytes
    assert abs(Fraction(b[0], sum(b)) - Fraction(1, 2)) < Fraction(5, 100)
    fcfs = System([GreedyTenant(0, window=300, pattern="stream"),
                   GreedyTenant(1, window=40, pattern="random", block=2, seed=1)], FcfsPolicy())
    fcfs.run(60_000)
    f = fcfs.channel.stats.bytes
    assert Fraction(f[0], sum(f)) > Fraction(7, 10), "without the fabric the deep window wins"


def test_fabric_priority_protects_decode_from_a_backlogged_prefill():
    """The arbiter admits the decode's transactions almost at once; the
    controller then decides how much of that survives (kind-aware or not).

    The prefill's burst is 10 us (100 KB): its bucket starts full (spec §6.3),
    and what it holds is guaranteed traffic by contract, which a kind-aware
    controller cannot tell from the decode's; with the 0.1 ms default that
    start burst (1 MB) would fill half of this 60,000-cycle run."""
    prio = _contract([_tenant(0, priority=2, guaranteed_gbps=10, burst_duration_ms=0.01),
                      _tenant(1, priority=1, guaranteed_gbps=2, burst_duration_ms=1)])
    results = {}
    for name, policy in (("fabric", FabricPolicy(prio)), ("kind-aware", FabricPolicy(prio, kind_aware=True)),
                         ("fcfs", FcfsPolicy())):
        waits = []
        tenants = [GreedyTenant(0, window=300, pattern="stream"),
                   DecodeTenant(1, seed=3, step_bytes=4096, think=3000)]
        complete = tenants[1].complete

        def spy(txn, now, complete=complete, waits=waits):
            waits.append(txn.admitted - txn.arrival)
            complete(txn, now)

        tenants[1].complete = spy
        System(tenants, policy).run(60_000)
        steps = [lat for _, lat in tenants[1].steps]
        results[name] = (sum(waits) / len(waits), sum(steps) / len(steps))
    assert results["fabric"][0] * 4 < results["fcfs"][0], results
    assert results["kind-aware"][1] * 2 < results["fcfs"][1], results


def test_fabric_reconfigure_lowers_a_burst_cap():
    tenants = [GreedyTenant(0, window=300, pattern="stream")]
    policy = FabricPolicy(_contract([_tenant(0)]))
    system = System(tenants, policy)
    system.run(20_000)
    before = system.channel.stats.bytes[0]
    policy.reconfigure(_contract([_tenant(0, burst_gbps=CHANNEL_GBPS / 4)]))
    system.run(40_000)
    capped = system.channel.stats.bytes[0] - before
    assert capped <= Fraction(1, 4) * 32 * 20_000 + 8 * 1024
    assert before > Fraction(8, 10) * 32 * 20_000


# -- fabric-qos: grant kinds as controller classes, per-class credits ------------------
def test_grant_kinds_map_onto_classes_and_axqos_as_spec_6_6_defines():
    from kvfabric import spec
    urgent = getattr(spec, "URGENT", 3)
    assert [grant_class(k) for k in (urgent, spec.GUARANTEED, spec.BURST, spec.FCFS)] == [0, 1, 2, 2]
    assert [grant_axqos(spec.GUARANTEED, p) for p in range(4)] == [11, 10, 9, 8]
    assert (grant_axqos(urgent, 2), grant_axqos(spec.BURST, 0), grant_axqos(spec.FCFS, 0)) == (15, 4, 0)
    # Burst grants of an arrival-ordered priority not marked bulk: guaranteed
    # class, AxQOS 5; of a bulk or unmarked one: burst class, AxQOS 4.
    arrival, bulk = 0b0010, 0b0100
    assert [grant_class(spec.BURST, p, bulk, arrival) for p in range(4)] == [2, 1, 2, 2]
    assert grant_class(spec.BURST, 1, 0b0010, 0b0010) == 2
    assert grant_class(spec.GUARANTEED, 1, bulk, arrival) == 1
    assert grant_axqos(spec.BURST, 1, 1) == 5 and grant_axqos(spec.BURST, 1, 2) == 4


class _CountingQosPolicy(FabricQosPolicy):
    """Fabric-QoS with the memory side's own count of credits in use: +1 per
    grant selected into the grant register (by its class, spec §6.6), -1 per
    credit returned."""

    def prepare(self, tenants, system):
        super().prepare(tenants, system)
        self.inflight = [0, 0, 0]
        self.selected = 0   # grants selected into the grant register
        give_back = self.credit_return.step

        def counted(channel, now):
            ret = give_back(channel, now)
            for k, bit in enumerate(ret):
                self.inflight[k] -= bit
            return ret
        self.credit_return.step = counted

    def _step(self, now, fabric_now, request, ready):
        held = self.model.grant
        result = super()._step(now, fabric_now, request, ready)
        if self.model.grant is not None and self.model.grant is not held:
            self.inflight[self._class(self.model.grant)] += 1
            self.selected += 1
        return result


def test_fabric_qos_never_overfills_a_class_and_returns_every_credit(seed):
    knobs = QosKnobs(entries=(8, 16, 24))
    prio = _contract([_tenant(0, priority=2, guaranteed_gbps=10),
                      _tenant(1, priority=1, guaranteed_gbps=4, burst_duration_ms=1)])
    policy = _CountingQosPolicy(prio, knobs=knobs)
    tenants = [GreedyTenant(0, window=300, pattern="stream", write_share=4),
               DecodeTenant(1, seed=seed, step_bytes=4096, think=2000)]
    system = System(tenants, policy)
    ch = system.channel
    peak = [0, 0, 0]
    original = ch.enqueue

    def watch(req, now):
        original(req, now)
        for k in range(3):
            peak[k] = max(peak[k], ch.class_queued[k])

    ch.enqueue = watch
    system.run(30_000)
    assert all(p <= e for p, e in zip(peak, knobs.entries)), (peak, knobs.entries)
    assert peak[1] > 0 and peak[2] == knobs.entries[2], "both classes used, burst filled up"
    assert sum(policy.class_grants) == sum(policy.grants)
    # The golden model enforces the credits (spec §6.6) and counts exactly as the memory side does.
    assert tuple(policy.model.config.credits) == (2, 4, 6)  # the knobs' entries / 4
    assert list(policy.model.inflight) == policy.inflight
    # Tenant 0's priority 2 is a bulk priority (QosKnobs' default): its
    # guaranteed grants use burst credits and entries, none the guaranteed class.
    assert policy.bulk_in_use and policy.model.config.bulk_prio == 0b1100
    assert policy.grants[0] - policy.burst_grants[0] > 0
    assert policy.class_grants[1] <= policy.grants[1] - policy.burst_grants[1]
    # Credits in use never exceed the limits and account for every queued entry.
    for k in range(3):
        assert 0 <= policy.inflight[k] <= (2, 4, 6)[k]
        assert ch.class_queued[k] <= 4 * policy.inflight[k]
    # Nothing lost: upstream, in the arbiter, or granted exactly once.
    assert system._seq == system.waiting + len(policy.in_fabric) + sum(policy.grants)


def test_fabric_qos_takes_credits_from_the_contract_when_it_gives_them(seed):
    """Spec §12: the contract's CREDITS (limits, bulk priorities) program the
    arbiter and size the controller's classes (four 32-byte entries per
    128-byte credit); a class the contract leaves at 0 is unchecked and keeps
    the knobs' entries; without credit keys the knobs decide."""
    tenants = [_tenant(0, priority=2, guaranteed_gbps=10), _tenant(1, priority=1, guaranteed_gbps=4)]
    knobs = QosKnobs(entries=(8, 16, 24))
    plain = FabricQosPolicy(_contract(tenants), knobs=knobs)
    assert (plain.limits, plain.bulk_prio, plain.class_entries()) == ((2, 4, 6), 0b1100, (8, 16, 24))
    doc = _contract(tenants)
    doc["fabric"].update(credit_urgent=1, credit_guaranteed=0, credit_burst=3, bulk_priorities=[])
    policy = FabricQosPolicy(doc, knobs=knobs)
    # Priority 2 is no longer bulk: the contract's empty list wins over the knobs' (2, 3).
    assert (policy.limits, policy.bulk_prio, policy.bulk_in_use) == ((1, 0, 3), 0, False)
    assert policy.class_entries() == (4, 16, 12)
    system = System([GreedyTenant(0, window=300, pattern="stream", write_share=4),
                     DecodeTenant(1, seed=seed, step_bytes=4096, think=2000)], policy)
    system.run(10_000)
    assert (policy.model.config.credits, policy.model.config.bulk_prio) == ((1, 0, 3), 0)
    assert sum(policy.grants) > 0 and policy.model.inflight[0] <= 1 and policy.model.inflight[2] <= 3
    # The prefill's guaranteed grants now take the guaranteed class (1), not burst.
    assert policy.class_grants[1] > 0
    # The plain fabric's memory side returns no credits: its arbiter runs without limits.
    fabric = FabricPolicy(doc)
    System([GreedyTenant(0, window=64, pattern="stream")] + [GreedyTenant(1, window=16, pattern="stream")],
           fabric).run(5_000)
    assert fabric.model.config.credits == (0, 0, 0) and sum(fabric.grants) > 0


class _Pieces:
    """A port stand-in for :meth:`FabricPolicy._piece`: one tenant's source
    queue of transactions, each (channel-local index, is_write, to_cxl)."""

    def __init__(self, txns):
        self.sources = [deque(SimpleNamespace(tenant=0, seq=i, nbytes=128, local=local, is_write=w, to_cxl=x)
                              for i, (local, w, x) in enumerate(txns))]


def _piece_sizes(txns, request_bytes=256, unit=None):
    """The requests a queue of transactions becomes, taken head by head, as
    lists of their channel-local indices."""
    policy = FabricPolicy(_contract([_tenant(0)]), request_bytes=request_bytes)
    port = _Pieces(txns)
    policy.system, policy.piece = port, request_bytes // 128
    policy.unit = unit or policy.piece
    out = []
    while port.sources[0]:
        group = policy._piece(port.sources[0][0])
        for _ in group:
            port.sources[0].popleft()
        out.append([t.local for t in group])
    return out


def test_fabric_requests_of_256_bytes_join_a_transaction_with_the_next_contiguous_one():
    """At request_bytes 256 a request carries the head and the transaction
    queued right behind it when that one is the next 128 B of the same
    aligned 256 B on the channel, in the same direction and to the same
    memory (HBM or CXL), inside one interleave unit: the AXI front end's
    pieces (spec §14.2)."""
    reads = [(i, False, False) for i in range(6)]
    assert _piece_sizes(reads) == [[0, 1], [2, 3], [4, 5]]
    assert _piece_sizes(reads, request_bytes=128) == [[i] for i in range(6)]
    # Unaligned heads go alone, and so does a head whose follower is not the next 128 B.
    assert _piece_sizes([(1, False, False), (2, False, False), (3, False, False)]) == [[1], [2, 3]]
    assert _piece_sizes([(0, False, False), (2, False, False), (3, False, False)]) == [[0], [2, 3]]
    assert _piece_sizes([(4, False, False), (5, False, False), (0, False, False), (1, False, False)]) == \
        [[4, 5], [0, 1]]
    # A write never joins a read, nor a CXL access an HBM one.
    assert _piece_sizes([(0, False, False), (1, True, False), (2, True, False), (3, True, False)]) == \
        [[0], [1], [2, 3]]
    assert _piece_sizes([(0, False, True), (1, False, False)]) == [[0], [1]]
    # An interleave unit of one transaction (128 B) holds no 256 B request.
    assert _piece_sizes(reads, unit=1) == [[i] for i in range(6)]
    with pytest.raises(ValueError, match="request_bytes"):
        FabricPolicy(_contract([_tenant(0)]), request_bytes=512)
    small = _contract([_tenant(0)])
    small["fabric"]["max_request_bytes"] = 128
    with pytest.raises(ValueError, match="exceeds the contract's max_request_bytes"):
        FabricPolicy(small, request_bytes=256)


@pytest.mark.parametrize("channels", [1, 2])
def test_fabric_qos_with_256_byte_requests_loses_nothing_and_returns_a_credit_per_grant(seed, channels):
    """Requests of 256 B: every transaction is upstream, in the arbiter or
    granted once; a grant holds one credit for up to 8 entries of its class
    (the knobs' entries / 8), no class ever holds more than its entries, and
    fewer grants than transactions reached the controller (pieces were
    formed)."""
    knobs = QosKnobs(entries=(16, 32, 48))
    doc = _contract([_tenant(0, priority=2, guaranteed_gbps=10),
                     _tenant(1, priority=1, guaranteed_gbps=4, burst_duration_ms=1)])
    doc["fabric"]["channels"] = channels
    policies = [_CountingQosPolicy(doc, knobs=knobs, request_bytes=256) for _ in range(channels)]
    tenants = [GreedyTenant(0, window=300, pattern="stream", write_share=4),
               DecodeTenant(1, seed=seed, step_bytes=4096, think=2000)]
    system = System(tenants, policies if channels > 1 else policies[0],
                    channel_map=ChannelMap.spread(channels, 2, 1024) if channels > 1 else None)
    peak = [[0, 0, 0] for _ in range(channels)]
    for c, port in enumerate(system.ports):
        ch, original = port.channel, port.channel.enqueue

        def watch(req, now, ch=ch, original=original, c=c):
            original(req, now)
            peak[c] = [max(p, q) for p, q in zip(peak[c], ch.class_queued)]
        ch.enqueue = watch
    system.run(30_000)
    taken = 0
    for policy, p in zip(policies, peak):
        assert policy.limits == (2, 4, 6) and policy.class_entries() == (16, 32, 48)
        assert all(x <= e for x, e in zip(p, knobs.entries)), (p, knobs.entries)
        assert all(0 <= policy.inflight[k] <= policy.limits[k] for k in range(3))
        assert list(policy.model.inflight) == policy.inflight
        taken += sum(len(g) for g in policy.in_fabric.values())
    granted = sum(sum(p.grants) for p in policies)          # transactions granted
    selected = sum(p.selected for p in policies)           # grants, one request each
    assert system._seq == system.waiting + taken + granted
    assert 0 < selected < granted, "pieces of two transactions were granted"


def test_fabric_qos_needs_room_for_a_whole_request_in_every_class():
    doc = _contract([_tenant(0), _tenant(1)])
    policy = FabricQosPolicy(doc, knobs=QosKnobs(entries=(4, 16, 16)), request_bytes=256)
    with pytest.raises(ValueError, match="class 0 holds no 256 B request"):
        System([GreedyTenant(0, window=8, pattern="stream"), GreedyTenant(1, window=8, pattern="stream")],
               policy).run(100)


def test_fabric_qos_serves_decode_before_a_backlogged_prefill(seed):
    """With the prefill filling its burst class, decode steps (guaranteed
    class, higher AxQOS) stay close to their unloaded latency."""
    prio = _contract([_tenant(0, priority=2, guaranteed_gbps=10),
                      _tenant(1, priority=1, guaranteed_gbps=2, burst_duration_ms=1)])
    results = {}
    for name, policy in (("alone", None), ("frfcfs", FrFcfsPolicy()), ("qos", FabricQosPolicy(prio))):
        tenants = [GreedyTenant(0, window=300, pattern="stream", write_share=4,
                                start_at=NEVER if name == "alone" else 0),
                   DecodeTenant(1, seed=seed, step_bytes=4096, think=3000)]
        System(tenants, policy or FrFcfsPolicy()).run(60_000)
        steps = sorted(lat for _, lat in tenants[1].steps)
        results[name] = sum(steps) / len(steps)
    assert results["qos"] * 2 < results["frfcfs"], results
    assert results["qos"] < 2 * results["alone"], results


def test_front_ends_are_built_in_one_place():
    """kvfabric system's --policy names are the engine factory's, and a bad
    name or option is an error naming the allowed ones (issue #28)."""
    from kvfabric.sim.front_ends import FRONT_ENDS, make_front_end
    from kvfabric.system import POLICIES
    assert POLICIES == FRONT_ENDS
    with pytest.raises(ValueError, match="policy must be one of fcfs, frfcfs, prio-frfcfs, throttle"):
        make_front_end("fr-fcfs")
    with pytest.raises(ValueError, match="page coloring is an option of frfcfs and fabric"):
        make_front_end("fcfs", coloring=True)
    with pytest.raises(ValueError, match="needs a contract"):
        make_front_end("fabric-qos")
    assert make_front_end("frfcfs", coloring=True).coloring
    assert make_front_end("throttle", throttle_period=1000).name == "SW throttle"


def test_fabric_qos_memory_side_holds_burst_credits_with_the_knobs_budget_and_recuts():
    """The knobs reach the memory side (a typo in the wiring would leave the
    budget at the class's default of 0, the complete hold, and the drain's
    re-cuts at 0)."""
    from kvfabric.sim.controller import YieldingCreditReturn
    prio = _contract([_tenant(0, priority=2, guaranteed_gbps=10),
                      _tenant(1, priority=1, guaranteed_gbps=4, burst_duration_ms=1)])
    for budget, recuts in ((0, 3), (40, 1)):
        policy = FabricQosPolicy(prio, knobs=QosKnobs(yield_budget=budget, preempt_recuts=recuts))
        system = System([GreedyTenant(0, window=8), DecodeTenant(1, seed=1, step_bytes=4096, think=2000)], policy)
        system.run(100)
        assert isinstance(policy.credit_return, YieldingCreditReturn)
        assert policy.credit_return.budget == budget
        assert system.channel.drain.max_recuts == recuts
