"""Oracles for the controllers' scheduling rules (issue #30).

Each rule ``sim/controller.py`` claims gets a small scenario that makes it
bite, with the expected outcome worked out from the rule's definition:
FR-FCFS hit-first and its hit cap, the QoS scheduler's class-first ranking
and per-class caps, reserved entries per class, write-drain entry and exit
(watermarks, interval, hold, urgent preemption), the activation guard for
every protected class, and refresh postponement within its limit with
catch-up.  ``test_random_traffic_obeys_every_scheduling_rule`` then checks
the same rules on every command of random multi-class traffic.

Timing figures are literals of the HBM3 preset (pinned in
``test_sim_timing.py``).
"""

import random

import pytest

from kvfabric.sim.controller import (BURST_CLASS, GUARANTEED_CLASS, URGENT_CLASS, FrFcfsScheduler,
                                     PreemptingDrain, QosRefresh, QosScheduler, ReservedEntries,
                                     SharedQueues, WatermarkDrain, qos_rank)
from kvfabric.sim.dram import Channel, Request
from kvfabric.sim.hbm3 import HBM3_GEOMETRY
from kvfabric.sim.policies import FcfsPolicy, FrFcfsPolicy
from kvfabric.sim.system import System
from kvfabric.sim.tenants import GreedyTenant
from test_sim_dram import _QosClassesPolicy, check_command_log

G = HBM3_GEOMETRY
tRTP, tCCD_S, tRRD_S, tFAW, tREFIpb, tRFCpb = 9, 2, 4, 24, 195, 320
AXQOS = {URGENT_CLASS: 15, GUARANTEED_CLASS: 10, BURST_CLASS: 4}


def bank(pc=0, sid=0, bg=0, b=0):
    return G.bank_id(pc, sid, bg, b)


class Feed:
    """Enqueues requests with the next sequence number; ``qos`` ranks them as
    the QoS front end does (class first, then AxQOS, then age)."""

    def __init__(self, ch, qos=False):
        self.ch, self.qos, self.seq = ch, qos, 0

    def put(self, bank_, row, now, write=False, qclass=BURST_CLASS, axqos=None):
        self.seq += 1
        r = Request(0, write, bank_, row, now)
        r.seq, r.qclass = self.seq, qclass
        r.axqos = AXQOS[qclass] if axqos is None else axqos
        r.rank = qos_rank(r.axqos, self.seq, qclass) if self.qos else self.seq
        self.ch.enqueue(r, now)
        return r


def tick_until(ch, t0, t1, each=None):
    """Tick every cycle of [t0, t1); ``each(t)`` runs before each tick."""
    for t in range(t0, t1):
        if each is not None:
            each(t)
        ch.tick(t)
    return t1


def cycles(ch, cmd, b=None):
    return [c for c, k, bb, *_ in ch.log if k == cmd and (b is None or bb == b)]


def qos_channel(caps=(16, 16, 4), guard=False, entries=(16, 64, 64), **kw):
    return Channel(refresh=False, n_tenants=1, log_commands=True, scheduler=QosScheduler(caps, guard),
                   admission=ReservedEntries(entries), **kw)


# -- FR-FCFS: hit first, hit cap ------------------------------------------------------------
@pytest.mark.parametrize("scheduler", ["frfcfs", "fcfs"])
def test_ready_row_hit_goes_before_an_older_conflict_under_frfcfs_only(scheduler):
    """Bank 0 open at row 1; an older read to row 2, then a younger one to row 1.
    FR-FCFS serves the hit at once and precharges tRTP after it; FCFS serves the
    bank in arrival order, so the precharge comes first."""
    ch = Channel(refresh=False, n_tenants=1, log_commands=True, scheduler=scheduler)
    f = Feed(ch)
    f.put(bank(), 1, 0)
    tick_until(ch, 0, 1000)
    older = f.put(bank(), 2, 1000)
    hit = f.put(bank(), 1, 1000)
    tick_until(ch, 1000, 1400)
    if scheduler == "frfcfs":
        assert hit.issued == 1000 and cycles(ch, "PRE") == [1000 + tRTP]
    else:
        assert cycles(ch, "PRE")[0] == 1000 and hit.issued > older.issued
    assert older.done >= 0 and hit.done >= 0


def _bypassing_hits(ch, f, *, conflict_cls=BURST_CLASS, conflict_q=None, hit_cls=BURST_CLASS, hit_q=None, n=30):
    """Row 1 open in bank 0; at 1000 an older conflict (row 2) and ``n`` younger
    hits; how many hits issue before the conflict's precharge."""
    f.put(bank(), 1, 0, qclass=hit_cls, axqos=hit_q)
    tick_until(ch, 0, 1000)
    f.put(bank(), 2, 1000, qclass=conflict_cls, axqos=conflict_q)
    hits = [f.put(bank(), 1, 1000, qclass=hit_cls, axqos=hit_q) for _ in range(n)]
    tick_until(ch, 1000, 2500)
    pre = cycles(ch, "PRE")[0]
    assert all(h.done >= 0 for h in hits)
    return sum(h.issued < pre for h in hits)


@pytest.mark.parametrize("cap", [0, 1, 3, 16])
def test_frfcfs_at_most_the_cap_of_younger_hits_bypass_an_older_request(cap):
    ch = Channel(refresh=False, n_tenants=1, log_commands=True, scheduler=FrFcfsScheduler(cap))
    assert _bypassing_hits(ch, Feed(ch)) == cap


@pytest.mark.parametrize("qclass, cap", [(URGENT_CLASS, 5), (GUARANTEED_CLASS, 9), (BURST_CLASS, 3)])
def test_qos_hit_cap_is_the_hits_class_cap(qclass, cap):
    ch = qos_channel(caps=(5, 9, 3))
    f = Feed(ch, qos=True)
    assert _bypassing_hits(ch, f, conflict_cls=qclass, hit_cls=qclass) == cap


def test_qos_hit_never_bypasses_an_older_request_of_a_higher_axqos():
    """Same class, AxQOS 10 conflict against AxQOS 9 hits: no hit bypasses it
    (FR-FCFS alone would let 16 go)."""
    ch = qos_channel()
    f = Feed(ch, qos=True)
    assert _bypassing_hits(ch, f, conflict_cls=GUARANTEED_CLASS, conflict_q=10,
                           hit_cls=GUARANTEED_CLASS, hit_q=9) == 0


def test_qos_higher_axqos_hits_all_go_before_a_lower_conflict():
    """The hits outrank the older conflict (AxQOS 10 over 9): they are not
    bypassing it, so the cap does not apply and all 30 go first."""
    ch = qos_channel()
    f = Feed(ch, qos=True)
    assert _bypassing_hits(ch, f, conflict_cls=GUARANTEED_CLASS, conflict_q=9,
                           hit_cls=GUARANTEED_CLASS, hit_q=10) == 30


# -- ranking across banks -------------------------------------------------------------------
@pytest.mark.parametrize("older, younger, younger_first", [
    ((BURST_CLASS, 4), (GUARANTEED_CLASS, 10), True),     # class first
    ((GUARANTEED_CLASS, 9), (GUARANTEED_CLASS, 10), True),  # then AxQOS
    ((GUARANTEED_CLASS, 10), (URGENT_CLASS, 15), True),
    ((GUARANTEED_CLASS, 10), (GUARANTEED_CLASS, 10), False),  # then age
    ((URGENT_CLASS, 15), (BURST_CLASS, 4), False),
    # Class even against AxQOS: a bulk priority's guaranteed read (burst
    # class, AxQOS 9) after a decode's burst read in the guaranteed class
    # (AxQOS 5, spec §6.6), whichever is older.
    ((BURST_CLASS, 9), (GUARANTEED_CLASS, 5), True),
    ((GUARANTEED_CLASS, 5), (BURST_CLASS, 9), False),
])
def test_qos_column_commands_class_first_then_axqos_then_age(older, younger, younger_first):
    """Two open rows in two bank groups, both reads ready at 1000: the better
    ranked issues at 1000, the other tCCD_S later."""
    ch = qos_channel()
    f = Feed(ch, qos=True)
    a, b = bank(0, 0, 0, 0), bank(0, 0, 1, 0)
    f.put(a, 1, 0)
    f.put(b, 1, 0)
    tick_until(ch, 0, 1000)
    x = f.put(a, 1, 1000, qclass=older[0], axqos=older[1])
    y = f.put(b, 1, 1000, qclass=younger[0], axqos=younger[1])
    tick_until(ch, 1000, 1100)
    first, second = (y, x) if younger_first else (x, y)
    assert (first.issued, second.issued) == (1000, 1000 + tCCD_S)


def test_frfcfs_column_commands_oldest_first():
    ch = Channel(refresh=False, n_tenants=1, log_commands=True)
    f = Feed(ch)
    a, b = bank(0, 0, 0, 0), bank(0, 0, 1, 0)
    f.put(a, 1, 0)
    f.put(b, 1, 0)
    tick_until(ch, 0, 1000)
    x = f.put(b, 1, 1000)
    y = f.put(a, 1, 1000)
    tick_until(ch, 1000, 1100)
    assert (x.issued, y.issued) == (1000, 1000 + tCCD_S)


def test_qos_activations_class_first():
    """Two closed banks, an older burst read and a younger guaranteed one (guard
    off): the guaranteed ACT at 0, the burst ACT tRRD_S later."""
    ch = qos_channel(guard=False)
    f = Feed(ch, qos=True)
    burst = f.put(bank(0, 0, 0, 0), 1, 0, qclass=BURST_CLASS)
    guaranteed = f.put(bank(0, 0, 1, 0), 1, 0, qclass=GUARANTEED_CLASS)
    tick_until(ch, 0, 200)
    assert cycles(ch, "ACT", guaranteed.bank) == [0] and cycles(ch, "ACT", burst.bank) == [tRRD_S]


# -- admission ------------------------------------------------------------------------------
def test_reserved_entries_per_class_exactly():
    """Each class takes exactly its reserved entries, reads and writes together,
    whatever the other classes hold; a served entry is free again at once."""
    reserved = (2, 3, 5)
    ch = qos_channel(entries=reserved)
    f = Feed(ch, qos=True)
    for k in (BURST_CLASS, URGENT_CLASS, GUARANTEED_CLASS):
        for i in range(reserved[k]):
            assert ch.has_room(1, i % 2 == 1, k)
            assert ch.has_room(reserved[k] - i, False, k) and not ch.has_room(reserved[k] - i + 1, False, k)
            f.put(bank(0, 0, i % 4, k), 1, 0, write=i % 2 == 1, qclass=k)
        assert not ch.has_room(1, False, k) and not ch.has_room(1, True, k)
    assert ch.class_queued == list(reserved)
    t = 0
    while ch.class_queued[BURST_CLASS] == reserved[BURST_CLASS]:
        ch.tick(t)
        t += 1
        assert t < 500
    assert ch.has_room(1, False, BURST_CLASS) and not ch.has_room(2, False, BURST_CLASS)
    assert not ch.has_room(1, False, URGENT_CLASS) or ch.class_queued[URGENT_CLASS] < reserved[URGENT_CLASS]


def test_shared_queues_reads_and_writes_each_their_capacity():
    ch = Channel(refresh=False, n_tenants=1, admission=SharedQueues(3, 2))
    f = Feed(ch)
    for i in range(3):
        assert ch.has_room(1, False)
        f.put(bank(0, 0, 0, i), 1, 0)
    assert not ch.has_room(1, False) and ch.has_room(2, True) and not ch.has_room(3, True)
    for i in range(2):
        f.put(bank(1, 0, 0, i), 1, 0, write=True)
    assert not ch.has_room(1, True)


# -- write drain ----------------------------------------------------------------------------
class DrainRig:
    """Pseudo-channel 0 with ``reads`` reads always queued (a served one is
    replaced at once, rows 1 of banks in stack ID 0: hits) and writes put by
    the test (stack ID 1).  Records every drain's entry cycle, the writes
    queued then, its writes and its exit."""

    def __init__(self, drain, *, reads=2, read_class=BURST_CLASS, qos=False, scheduler=None):
        kw = dict(scheduler=scheduler or QosScheduler(), admission=ReservedEntries((16, 64, 64))) if qos else {}
        self.ch = Channel(refresh=False, n_tenants=1, log_commands=True, drain=drain, **kw)
        self.f = Feed(self.ch, qos=qos)
        self.reads, self.read_class = reads, read_class
        self.t = 0
        self.drains = []   # [entry cycle, writes queued at entry, writes issued, exit cycle or None]
        self.pending = []  # (cycle, write class) to put

    def write(self, at, n=1, qclass=BURST_CLASS):
        self.pending += [(at, qclass)] * n

    def run(self, until):
        ch, f = self.ch, self.f
        k = 0
        while self.t < until:
            t = self.t
            for at, qclass in [p for p in self.pending if p[0] <= t]:
                self.pending.remove((at, qclass))
                f.put(bank(0, 1, k % 4, k % 3), 1, t, write=True, qclass=qclass)
                k += 1
            queued_reads = ch.pc_queued[0] - ch.pc_writes[0]
            for i in range(self.reads - queued_reads):
                f.put(bank(0, 0, (t + i) % 4, 0), 1, t, qclass=self.read_class)
            was, writes = ch.write_mode[0], ch.pc_writes[0]
            ch.tick(t)
            issued = [c for c in ch.log if c[0] == t and c[1] == "WR"]
            if not was and ch.write_mode[0]:
                self.drains.append([t, writes, 0, None])
            if was and not ch.write_mode[0]:
                self.drains[-1][3] = t
            if issued:
                assert ch.write_mode[0], "a write issued outside a drain"
                self.drains[-1][2] += len(issued)
            self.t += 1
        return self.drains


def test_drain_enters_exactly_at_the_high_watermark():
    """Reads always wait; one write every 30 cycles: the drain starts at the
    first tick that sees ``high`` writes queued, not one write earlier."""
    rig = DrainRig(WatermarkDrain(8, 2))
    for i in range(20):
        rig.write(100 + 30 * i)
    drains = rig.run(100 + 30 * 7 + 50)
    assert [d[:2] for d in drains] == [[100 + 30 * 7, 8]]


def test_drain_with_reads_waiting_writes_high_minus_low_then_leaves():
    """14 writes at once: batches of exactly high - low = 6 while more than low
    remain; the 2 left (at low, below high) wait while reads do."""
    rig = DrainRig(WatermarkDrain(8, 2))
    rig.write(100, 14)
    drains = rig.run(1000)
    assert [(d[1], d[2]) for d in drains] == [(14, 6), (8, 6)]
    assert all(d[3] is not None for d in drains) and rig.ch.pc_writes[0] == 2


@pytest.mark.parametrize("read_run", [None, 3])
def test_read_turn_between_drains_is_exactly_read_run_reads(read_run):
    """40 writes at once keep at least ``high`` queued after each batch: every
    drain writes high - low = 6 and leaves with reads waiting, and the next
    starts only once exactly ``read_run`` reads (default high - low) have
    issued; without the turn it would start at once and the reads would wait
    until the writes ran out."""
    rig = DrainRig(WatermarkDrain(8, 2, read_run=read_run))
    rig.write(100, 40)
    drains = rig.run(3000)
    run = 6 if read_run is None else read_run
    assert [d[2] for d in drains[:5]] == [6] * 5
    reads = [c[0] for c in rig.ch.log if c[1] == "RD"]
    for done, following in zip(drains, drains[1:5]):
        assert sum(done[3] <= t < following[0] for t in reads) == run


def test_drains_need_no_read_turn_without_reads():
    """No read queued: drains follow one another with no read between them
    (the writes arrive in two groups of ``high``)."""
    rig = DrainRig(WatermarkDrain(8, 2), reads=0)
    rig.write(100, 8)
    rig.write(400, 8)
    drains = rig.run(1000)
    assert [d[:3] for d in drains] == [[100, 8, 8], [400, 8, 8]]
    assert not [c for c in rig.ch.log if c[1] == "RD"]


def test_read_turn_is_owed_only_when_the_last_drain_left_reads_waiting():
    """The first drain empties the queue with no read waiting, so it owes no
    turn: when reads are waiting again and ``high`` writes are queued at
    400, the next drain starts at once, with no read issued before it."""
    rig = DrainRig(WatermarkDrain(8, 2), reads=0)
    rig.write(100, 8)
    rig.run(400)
    rig.reads = 2
    rig.write(400, 8)
    drains = rig.run(1000)
    assert [d[:2] for d in drains[:2]] == [[100, 8], [400, 8]]
    assert not [c for c in rig.ch.log if c[1] == "RD" and c[0] < 400]


def test_drain_without_reads_runs_until_no_write_is_left():
    rig = DrainRig(WatermarkDrain(8, 2), reads=0)
    rig.write(100, 5)
    drains = rig.run(600)
    assert [d[:3] for d in drains] == [[100, 5, 5]] and drains[0][3] is not None


@pytest.mark.parametrize("interval", [300, 450])
def test_drain_interval_starts_a_drain_exactly_interval_after_the_last_and_leaves_at_low(interval):
    """Reads always wait, 5 writes (above low = 2, below high = 8) queued at 50:
    the first drain is due at ``interval`` (none before: the timer counts from
    0), leaves at low after 3 writes; the next needs more than low writes and
    ``interval`` cycles after that exit."""
    rig = DrainRig(WatermarkDrain(8, 2, interval=interval))
    rig.write(50, 5)
    rig.write(interval + 100, 3)   # 2 + 3 = 5 > low after the first drain
    drains = rig.run(3 * interval + 200)
    assert drains[0][:3] == [interval, 5, 3]
    assert drains[1][:3] == [drains[0][3] + interval, 5, 3]
    assert len(drains) == 2


def _preempt_rig(read_class=URGENT_CLASS, preempt_below=1, **kw):
    kw.setdefault("min_batch", 3)
    kw.setdefault("max_hold", 200)
    kw.setdefault("force", 20)
    drain = PreemptingDrain(8, 2, preempt_below=preempt_below, **kw)
    return drain, DrainRig(drain, reads=1, read_class=read_class, qos=True)


def test_preempting_drain_held_exactly_max_hold_then_runs_to_the_low_watermark():
    """An urgent read always waits.  12 writes at 100 make a drain due; it is
    held until exactly 100 + max_hold, then runs without interruption down to
    the low watermark (10 writes, more than high - low), as the docstring and
    docs/system-model.md say."""
    drain, rig = _preempt_rig()
    rig.write(100, 12)
    rig.run(101)
    assert drain.wake() == 300, "the channel is told when the held drain lets go"
    drains = rig.run(700)
    assert drains[0][:3] == [300, 12, 10]
    assert rig.ch.pc_writes[0] == 2


def test_released_drain_is_recut_at_most_max_recuts_times_each_cut_held_again():
    """``max_recuts`` = 2, an urgent read always waits, 16 writes at 100
    (high 8, low 2, min_batch 3, max_hold 200).  The drain released at 300
    is cut after min_batch writes; the 13 left are a due drain again, held
    max_hold cycles from when they fall due, released, cut after 3 more; the
    third release has had its two cuts and runs to the low watermark.  The
    next writes start a new chain: their released drain is cut again."""
    drain, rig = _preempt_rig(max_recuts=2)
    rig.write(100, 16)
    drains = rig.run(2000)
    assert [d[1:3] for d in drains] == [[16, 3], [13, 3], [10, 8]]
    assert drains[0][0] == 300
    for before, after in zip(drains, drains[1:]):
        assert after[0] - before[3] >= 200, "a re-cut drain is held again"
    assert rig.ch.pc_writes[0] == 2
    rig.write(2000, 10)    # 12 queued: a new chain
    drains = rig.run(3000)
    assert drains[3][1:3] == [12, 3], "the count starts over after a drain that was not re-cut"


def test_recut_never_with_force_writes_queued():
    """``max_recuts`` = 1.  12 writes at 100 are held until 300 and released;
    12 more arrive at 301, so ``force`` (20) or more are queued: the released
    drain is re-cut only once fewer than 20 are queued and it has written
    min_batch, after 5 writes (24 - 5 = 19).  Its one re-cut spent, the next
    release runs to the low watermark."""
    drain, rig = _preempt_rig(max_recuts=1)
    rig.write(100, 12)
    rig.write(301, 12)
    drains = rig.run(2500)
    assert drains[0][:3] == [300, 12, 5]
    assert [d[1:3] for d in drains[1:]] == [[19, 17]]


@pytest.mark.parametrize("arrive_after", [1, 5])
def test_urgent_read_cuts_a_running_drain_after_min_batch(arrive_after):
    """No protected read when 12 writes make a drain due (it starts at once);
    an urgent read arrives after ``arrive_after`` writes: the drain ends as soon
    as it has written min_batch (3), or at once if it already has."""
    drain, rig = _preempt_rig()
    rig.reads = 0
    rig.write(100, 12)
    while not rig.drains or rig.drains[0][2] < arrive_after:
        rig.run(rig.t + 1)
    rig.f.put(bank(0, 0, 1, 2), 5, rig.t, qclass=URGENT_CLASS)
    rig.run(rig.t + 100)
    assert rig.drains[0][0] == 100
    assert rig.drains[0][2] == max(3, arrive_after)


@pytest.mark.parametrize("read_class, preempt_below, held", [
    (URGENT_CLASS, 1, True), (GUARANTEED_CLASS, 1, False), (GUARANTEED_CLASS, 2, True),
    (BURST_CLASS, 2, False)])
def test_preempt_below_decides_which_reads_hold_a_drain(read_class, preempt_below, held):
    drain, rig = _preempt_rig(read_class=read_class, preempt_below=preempt_below)
    rig.write(100, 12)
    drains = rig.run(500)
    assert drains[0][0] == (300 if held else 100)


def test_protected_writes_are_not_held_for_protected_reads():
    drain, rig = _preempt_rig()
    rig.write(100, 11)
    rig.write(100, 1, qclass=URGENT_CLASS)
    drains = rig.run(400)
    assert drains[0][:2] == [100, 12]


def test_force_writes_queued_start_the_drain_at_once_and_it_is_cut_only_below_force():
    """With ``force`` (20) writes queued the drain is not held, and protected
    reads cut it only once fewer than ``force`` are queued and it has written
    min_batch: 22 -> 19 after 3 writes."""
    drain, rig = _preempt_rig()
    rig.write(100, 22)
    drains = rig.run(600)
    assert drains[0][:3] == [100, 22, 3]


# -- activation guard -----------------------------------------------------------------------
def _guard_run(protected_class, *, guard=True, burst_write=False, other_pc=False):
    """A protected read opens bank 0 of pseudo-channel 0 at cycle 0; a burst
    access to another bank group (of pseudo-channel 1 with ``other_pc``) waits
    for its ACT.  A second protected read to another row of bank 0 keeps a
    protected read queued until well after tFAW."""
    ch = qos_channel(guard=guard)
    f = Feed(ch, qos=True)
    f.put(bank(0, 0, 0, 0), 1, 0, qclass=protected_class)
    f.put(bank(0, 0, 0, 0), 2, 0, qclass=protected_class)
    b = bank(1 if other_pc else 0, 0, 1, 0)
    burst = f.put(b, 7, 0, write=burst_write, qclass=BURST_CLASS)
    tick_until(ch, 0, 300)
    assert burst.done >= 0
    return cycles(ch, "ACT", b)[0]


@pytest.mark.parametrize("protected_class", [URGENT_CLASS, GUARANTEED_CLASS])
def test_burst_read_activates_exactly_when_the_tfaw_window_is_empty(protected_class):
    assert _guard_run(protected_class) == tFAW
    assert _guard_run(protected_class, guard=False) == tRRD_S


@pytest.mark.parametrize("protected_class", [URGENT_CLASS, GUARANTEED_CLASS])
def test_guard_holds_no_write_activation(protected_class):
    """A protected read waits while a write drain (5 burst writes in five bank
    groups reach the high watermark of 5) activates: the writes' ACTs keep the
    plain activate spacing, four tRRD_S apart and the fifth at tFAW."""
    ch = qos_channel(guard=True, drain=WatermarkDrain(5, 1))
    f = Feed(ch, qos=True)
    f.put(bank(0, 0, 0, 0), 1, 0, qclass=protected_class)
    banks = [bank(0, sid, bg, 1) for sid in range(2) for bg in range(4)][1:6]
    for b in banks:
        f.put(b, 3, 0, write=True, qclass=BURST_CLASS)
    tick_until(ch, 0, 200)
    assert [cycles(ch, "ACT", b)[0] for b in banks] == [0, tRRD_S, 2 * tRRD_S, 3 * tRRD_S, tFAW]


@pytest.mark.parametrize("protected_class", [URGENT_CLASS, GUARANTEED_CLASS])
def test_guard_does_not_hold_another_pseudo_channel(protected_class):
    assert _guard_run(protected_class, other_pc=True) == 2  # the row bus only


def test_guard_does_not_hold_burst_reads_for_burst_reads():
    assert _guard_run(BURST_CLASS) == tRRD_S


# -- refresh postponement and catch-up --------------------------------------------------------
def test_refresh_postponed_within_its_limit_then_caught_up():
    """Every bank of pseudo-channel 0 has a guaranteed read queued (re-queued as
    soon as served) until cycle 4000.  QosRefresh(max_postponed=4, retry=16)
    postpones pseudo-channel 0's refreshes: each is decided less than 4 slots
    (4 x 195 cycles) late and issued once its bank is closed; pseudo-channel 1, idle, refreshes
    at its exact slots.  Once the reads stop, the owed refreshes are caught
    up: by 4800 every slot due has had its refresh, each bank once per round."""
    limit = 4 * tREFIpb
    ch = Channel(refresh=True, n_tenants=1, log_commands=True, scheduler=QosScheduler(),
                 admission=ReservedEntries((8, 64, 64)), refresh_policy=QosRefresh(max_postponed=4, retry=16))
    f = Feed(ch, qos=True)
    per_pc = G.banks_per_pc

    def keep_protected(t):
        if t < 4000:
            for b in range(per_pc):
                if not ch.bank_queue[b]:
                    f.put(b, 1 + t % 3, t, qclass=GUARANTEED_CLASS)

    tick_until(ch, 0, 4800, keep_protected)
    refs = [(c, b) for c, k, b, *_ in ch.log if k == "REF"]
    pc0 = [c for c, b in refs if b < per_pc]
    pc1 = [c for c, b in refs if b >= per_pc]
    slots1 = list(range(tREFIpb + tREFIpb // 2, 4800, tREFIpb))
    assert len(pc1) == len(slots1) and all(0 <= c - s <= 1 for c, s in zip(pc1, slots1)), "at its slot (row bus)"
    slots0 = list(range(tREFIpb, 4800, tREFIpb))
    assert len(pc0) == len(slots0), "a postponed refresh was lost"
    close = 72 + 4  # after the decision: tRC after an ACT issued with it, and the row bus
    during = [(c, s) for c, s in zip(pc0, slots0) if c < 4000]
    print("pseudo-channel 0 refreshes (slot, cycle):", list(zip(slots0, pc0)))
    # The policy decides at less than 4 slots late, and at most one retry (16) earlier.
    assert len(during) > 10 and all(c - s >= limit - 16 for c, s in during), "not postponed as far as allowed"
    assert all(c - s < limit + close for c, s in zip(pc0, slots0)), "postponed beyond the limit"
    assert all(c - s < close for c, s in zip(pc0, slots0) if s >= 4200), "not caught up"
    banks0 = [b for _, b in refs if b < per_pc]
    assert len(set(banks0)) == len(banks0), "a bank refreshed twice in one round"
    assert ch.stats.ref_postponed > 0


def test_refresh_not_postponed_while_a_bank_of_the_round_is_unprotected():
    """Guaranteed reads in every bank of pseudo-channel 0 but bank 31: the
    refresh is not postponed; it goes to bank 31 at its slot."""
    ch = Channel(refresh=True, n_tenants=1, log_commands=True, scheduler=QosScheduler(),
                 admission=ReservedEntries((8, 64, 64)), refresh_policy=QosRefresh(max_postponed=4, retry=16))
    f = Feed(ch, qos=True)

    def keep_protected(t):
        for b in range(G.banks_per_pc - 1):
            if not ch.bank_queue[b]:
                f.put(b, 1 + t % 3, t, qclass=GUARANTEED_CLASS)

    tick_until(ch, 0, tREFIpb + 100, keep_protected)
    refs = [(c, b) for c, k, b, *_ in ch.log if k == "REF" and b < G.banks_per_pc]
    assert len(refs) == 1 and refs[0][1] == G.banks_per_pc - 1 and 0 <= refs[0][0] - tREFIpb <= 1, refs
    assert ch.stats.ref_postponed == 0


# -- the same rules over random traffic -------------------------------------------------------
class RuleObserver:
    """Checks every command of a channel against the scheduling rules' definitions.

    Wraps ``ch.tick``: before each tick it snapshots the queues, open rows and
    bus directions; after it, every new command in the log is judged against
    the rules, with the observer's own bookkeeping (bypass counts since each
    ACT, activation history, drain batches), never the channel's.

    Parameters
    ----------
    scheduler : "fcfs", "frfcfs" or "qos"
    caps : tuple of 3 ints (qos) or int (frfcfs)
    drain : (high, low, interval) or None (FCFS: no batching); the read turn
        between drains is high - low reads (WatermarkDrain's default)
    preempt : dict(below, min_batch, max_hold, force) or None
    guard : bool
    reserved : tuple of 3 ints or None
    refresh_limit : cycles a refresh may be postponed (0: never)
    """

    def __init__(self, ch, *, scheduler, caps=None, drain=None, preempt=None, guard=False, reserved=None,
                 refresh_limit=0):
        self.ch = ch
        self.scheduler, self.caps, self.drain, self.preempt = scheduler, caps, drain, preempt
        self.guard, self.reserved, self.refresh_limit = guard, reserved, refresh_limit
        npc = G.pseudo_channels
        self.bypass = [0] * G.banks
        self.acts = [[] for _ in range(npc)]
        self.refs = [[] for _ in range(npc)]
        self.batch = [0] * npc
        self.released = [False] * npc
        self.left_at = [0] * npc
        self.turn_owed = [False] * npc  # the last drain left with reads waiting
        self.turn_reads = [0] * npc     # reads issued since the last drain left
        self.due_since = [None] * npc
        self.stuck = [False] * npc
        self.counts = {"column": 0, "bypass": 0, "ACT": 0, "guarded": 0, "PRE": 0, "entry": 0, "exit": 0,
                       "released": 0, "preempted": 0}
        self._tick = ch.tick
        ch.tick = self.tick

    # rule helpers, from the definitions
    def _cap(self, r):
        return self.caps[r.qclass] if self.scheduler == "qos" else self.caps

    def _protected(self, reqs, write):
        below = self.preempt["below"]
        return any(q.is_write == write and q.qclass < below for q in reqs)

    def tick(self, now, horizon=1 << 62):
        ch = self.ch
        snap = {b: list(ch.bank_queue[b]) for b in range(G.banks) if ch.bank_queue[b]}
        open_before = list(ch.open_row)
        mode_before = list(ch.write_mode)
        per_pc = [[q for b, qs in snap.items() if G.split_bank_id(b)[0] == pc for q in qs]
                  for pc in range(G.pseudo_channels)]
        self._check_admission(snap)
        start = len(ch.log)
        result = self._tick(now, horizon)
        new = ch.log[start:]
        mode = list(ch.write_mode)
        if self.drain is not None:
            for pc in range(G.pseudo_channels):
                self._check_drain(now, pc, per_pc[pc], mode_before[pc], mode[pc])
        for c, cmd, b, row, _ in new:
            pc = G.split_bank_id(b)[0]
            queue = snap.get(b, [])
            if cmd in ("RD", "WR"):
                self._check_column(now, b, pc, row, queue, open_before[b], mode[pc])
            elif cmd == "ACT":
                self._check_act(now, c, b, pc, row, queue, per_pc[pc], mode[pc])
            elif cmd == "PRE" and ch.ref_bank[pc] != b:
                self._check_pre(b, queue, open_before[b], mode[pc])
            elif cmd == "REF":
                self.refs[pc].append((c, b))
        if self.drain is not None:
            self._note_stuck(snap, per_pc, mode, new)
        return result

    def _check_admission(self, snap):
        if self.reserved is None:
            return
        counts = [0, 0, 0]
        for qs in snap.values():
            for q in qs:
                counts[q.qclass] += 1
        for k in range(3):
            assert counts[k] <= self.reserved[k], f"class {k} holds {counts[k]} entries"
            for n in (1, 4):
                assert self.ch.has_room(n, False, k) == (counts[k] + n <= self.reserved[k])

    def _same_dir(self, queue, write):
        return [q for q in queue if q.is_write == write]

    def _check_column(self, now, b, pc, row, queue, open_row, write_mode):
        self.counts["column"] += 1
        (r,) = [q for q in queue if q.issued == now]
        assert r.row == row == open_row
        if self.scheduler == "fcfs":
            assert r is queue[0], "FCFS served a bank out of arrival order"
            return
        assert r.is_write == write_mode, "a column command against the bus direction"
        same = self._same_dir(queue, r.is_write)
        assert r is min((q for q in same if q.row == open_row), key=lambda q: q.rank), "not the best-ranked hit"
        older = [q for q in same if q.rank < r.rank]
        if older:
            self.counts["bypass"] += 1
            assert self.bypass[b] < self._cap(r), f"hit cap exceeded in bank {b}"
            if self.scheduler == "qos":
                assert all((q.qclass, q.axqos) == (r.qclass, r.axqos) for q in older), \
                    "a hit bypassed a request of a higher class or AxQOS"
            self.bypass[b] += 1
        if r.is_write:
            self.batch[pc] += 1
        else:
            self.turn_reads[pc] += 1

    def _head(self, queue, write_mode):
        if self.scheduler == "fcfs":
            return queue[0]
        return min(self._same_dir(queue, write_mode), key=lambda q: q.rank)

    def _check_act(self, now, c, b, pc, row, queue, pc_queue, write_mode):
        self.counts["ACT"] += 1
        self.bypass[b] = 0
        head = self._head(queue, write_mode)
        assert head.row == row, "an ACT for another request than the bank's best-ranked"
        if (self.guard and head.qclass == BURST_CLASS and not head.is_write
                and any(not q.is_write and q.qclass < BURST_CLASS for q in pc_queue)):
            self.counts["guarded"] += 1
            assert all(t <= now - tFAW for t in self.acts[pc][-4:]), "a burst ACT into a used tFAW window"
        self.acts[pc].append(c)

    def _check_pre(self, b, queue, open_row, write_mode):
        self.counts["PRE"] += 1
        head = self._head(queue, write_mode)
        assert head.row != open_row, "a precharge with the head's row open"
        if self.scheduler == "fcfs":
            return
        hits = [q for q in self._same_dir(queue, write_mode) if q.row == open_row]
        if hits:
            hit = min(hits, key=lambda q: q.rank)
            may = self.bypass[b] < self._cap(hit) and (
                self.scheduler != "qos" or (hit.qclass, hit.axqos) == (head.qclass, head.axqos))
            assert not may, "a precharge while a hit could still bypass"

    def _check_drain(self, now, pc, queue, was, mode):
        high, low, interval = self.drain
        writes = sum(q.is_write for q in queue)
        reads = len(queue) - writes
        stuck, self.stuck[pc] = self.stuck[pc], False
        p = self.preempt
        protected = p is not None and self._protected(queue, False) and not self._protected(queue, True)
        if not was:
            overdue = interval is not None and writes > low and now - self.left_at[pc] >= interval
            turn_done = not self.turn_owed[pc] or self.turn_reads[pc] >= high - low
            due = (writes > 0 and (reads == 0 or stuck)) or ((writes >= high or overdue) and turn_done)
            if not due:
                self.due_since[pc] = None
                assert not mode, f"a drain entered at {now} that was not due"
                return
            if self.due_since[pc] is None:
                self.due_since[pc] = now
            may_hold = p is not None and protected and writes < p["force"]
            held = may_hold and now - self.due_since[pc] < p["max_hold"]
            assert mode == (not held), f"a due drain {'held' if held else 'started'} at {now} against the rule"
            if held:
                return
            self.counts["entry"] += 1
            self.counts["released"] += may_hold
            self.released[pc] = may_hold
            self.batch[pc] = 0
            self.turn_owed[pc] = False
            self.due_since[pc] = None
        else:
            may_cut = (p is not None and protected and writes < p["force"]
                       and self.batch[pc] >= p["min_batch"])
            done = writes <= low if self.released[pc] else (
                writes <= low or self.batch[pc] >= high - low or may_cut)
            must = writes == 0 or (reads > 0 and (stuck or done))
            assert mode == (not must), f"drain at {now}: {writes} writes after {self.batch[pc]}, must end: {must}"
            if must:
                self.counts["exit"] += 1
                self.counts["preempted"] += may_cut and not self.released[pc] and self.batch[pc] < high - low
                self.left_at[pc] = now
                self.turn_owed[pc] = reads > 0
                self.turn_reads[pc] = 0

    def _note_stuck(self, snap, per_pc, mode, new):
        """The channel's 'no candidate in this direction' of this tick, from the definition."""
        pending = {b for b in self.ch.ref_bank if b >= 0} | {b for _, cmd, b, *_ in new if cmd == "REF"}
        for pc in range(G.pseudo_channels):
            work = any(q.is_write == mode[pc] for b, qs in snap.items()
                       if G.split_bank_id(b)[0] == pc and b not in pending for q in qs)
            self.stuck[pc] = bool(per_pc[pc]) and not work

    def check_refresh(self, until):
        """Every slot of every pseudo-channel refreshed, none lost; the k-th REF
        no later than its slot plus the postponement limit (or the previous REF,
        one being outstanding at a time) plus the time to close its bank (tRC
        after an ACT that came with the decision, and the row bus); each bank
        once per round."""
        close = 72 + 4
        for pc, refs in enumerate(self.refs):
            first = tREFIpb + pc * (tREFIpb // 2)
            slots = list(range(first, until, tREFIpb))
            assert len(refs) >= len(slots) - self.refresh_limit // tREFIpb - 1, "refresh slots lost"
            prev, last = -1, {}
            for (c, b), s in zip(refs, slots):
                # The bank itself may still be refreshing from the round before
                # (the pick prefers an idle, closed bank, which it may be).
                busy = last.get(b, -tRFCpb) + tRFCpb
                assert s <= c < max(s + self.refresh_limit, prev, busy) + close, (pc, s, c, prev, busy)
                prev = last[b] = c
            banks = [b for _, b in refs]
            for r in range(0, len(banks), 32):
                assert len(set(banks[r:r + 32])) == len(banks[r:r + 32]), "a bank twice in a round"


class _RandomClasses(_QosClassesPolicy):
    """test_sim_dram's random-class front end, in front of a QoS controller with
    small watermarks, caps and hold so that every rule bites often."""

    ARGS = dict(caps=(3, 5, 2), high=10, low=3, interval=400, below=2, min_batch=3, max_hold=60, force=16,
                entries=(12, 24, 24), postponed=2)

    def controller_args(self):
        a = self.ARGS
        return dict(scheduler=QosScheduler(a["caps"], True), admission=ReservedEntries(a["entries"]),
                    drain=PreemptingDrain(a["high"], a["low"], preempt_below=a["below"], min_batch=a["min_batch"],
                                          max_hold=a["max_hold"], force=a["force"], interval=a["interval"]),
                    refresh_policy=QosRefresh(max_postponed=a["postponed"]))

    def qclass(self, txn):
        # Mostly burst writes (a prefill's), so protected reads hold drains.
        k = self.rng.randrange(3)
        return BURST_CLASS if txn.is_write and self.rng.randrange(8) else k


def _random_system(policy, seed, channel_args):
    rng = random.Random(seed)
    tenants = [GreedyTenant(0, window=10, pattern="random", block=rng.choice([1, 2, 4]), write_share=3, seed=seed),
               GreedyTenant(1, window=10, pattern="stream", write_share=4, seed=seed),
               GreedyTenant(2, window=6, pattern="random", block=8, write_share=2, seed=seed + 1)]
    return System(tenants, policy, channel_args=dict(log_commands=True, refresh=True, **channel_args))


@pytest.mark.parametrize("scheduler", ["frfcfs", "fcfs", "qos"])
def test_random_traffic_obeys_every_scheduling_rule(scheduler, seed):
    """Three greedy tenants (random blocks, a stream, long random blocks; one
    access in 2-4 a write), 20,000 cycles, every command judged by RuleObserver.
    The counts printed show each rule was exercised."""
    print(f"seed={seed}")
    cycles_ = 20_000
    if scheduler == "frfcfs":
        system = _random_system(FrFcfsPolicy(), seed, dict(scheduler=FrFcfsScheduler(2), drain=WatermarkDrain(10, 3)))
        obs = RuleObserver(system.channel, scheduler="frfcfs", caps=2, drain=(10, 3, None))
    elif scheduler == "fcfs":
        system = _random_system(FcfsPolicy(), seed, {})
        obs = RuleObserver(system.channel, scheduler="fcfs")
    else:
        a = _RandomClasses.ARGS
        system = _random_system(_RandomClasses(seed), seed, {})
        obs = RuleObserver(system.channel, scheduler="qos", caps=a["caps"], drain=(a["high"], a["low"], a["interval"]),
                           preempt=dict(below=a["below"], min_batch=a["min_batch"], max_hold=a["max_hold"],
                                        force=a["force"]),
                           guard=True, reserved=a["entries"], refresh_limit=a["postponed"] * tREFIpb)
    system.run(cycles_)
    obs.check_refresh(cycles_ - 200)
    print(obs.counts)
    check_command_log(system.channel.log)
    c = obs.counts
    assert c["column"] > 1000 and c["ACT"] > 100 and c["PRE"] > 50
    if scheduler != "fcfs":
        assert c["bypass"] > 0 and c["entry"] > 5 and c["exit"] > 5
    if scheduler == "qos":
        assert c["guarded"] > 0 and c["released"] > 0 and c["preempted"] > 0


def _channel_writes(path):
    """(line, text) of every assignment whose target is rooted at ``ch`` (the
    channel a policy is handed), and every read of a private ``ch._*``."""
    import ast
    from pathlib import Path
    source = Path(path).read_text()
    found = []

    def rooted_at_ch(node):
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return isinstance(node, ast.Name) and node.id == "ch"

    for node in ast.walk(ast.parse(source)):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        found += [(node.lineno, ast.unparse(t)) for t in targets
                  if isinstance(t, (ast.Attribute, ast.Subscript)) and rooted_at_ch(t)]
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ch"
                and node.attr.startswith("_")):
            found.append((node.lineno, f"ch.{node.attr}"))
    return found


@pytest.mark.parametrize("module", ["controller", "policies", "fabric"])
def test_policies_only_read_the_channel(module):
    """Issue #28: policies read the channel and return decisions; only the
    channel writes its state, and no policy reaches for its private parts."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "sim" / f"{module}.py"
    assert _channel_writes(path) == []


def test_channel_write_check_catches_a_write(tmp_path):
    """The source check above finds the patterns it exists for."""
    bad = tmp_path / "bad.py"
    bad.write_text("def on(ch, b):\n    ch.bypassed[b] += 1\n    ch.stuck[0] = False\n    x = ch._pc_of[b]\n")
    assert [line for line, _ in _channel_writes(bad)] == [2, 3, 4]
