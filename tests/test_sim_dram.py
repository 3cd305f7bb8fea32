"""Validation of the HBM3 channel model against its own timing set.

Latencies and bandwidth limits are derived here from the preset by
arithmetic, never read back from the model; the command log of random
traffic is checked by a naive, independent JEDEC rule checker.
"""

import os
import random
from fractions import Fraction

import pytest

from kvfabric.sim.controller import (BURST_CLASS, GUARANTEED_CLASS, URGENT_CLASS, CreditReturn,
                                     PreemptingDrain, QosRefresh, QosScheduler, ReservedEntries,
                                     WatermarkDrain, YieldingCreditReturn, qos_rank)
from kvfabric.sim.dram import CONFLICT, HIT, MISS, NEVER, Channel, Request
from kvfabric.sim.mapping import AddressMap
from kvfabric.sim.hbm3 import (HBM3_6400, HBM3_GEOMETRY, bytes_per_cycle_to_gbps, ns_to_cycles,
                      peak_bytes_per_cycle)
from kvfabric.sim.policies import FcfsPolicy, FrFcfsPolicy
from kvfabric.sim.system import System
from kvfabric.sim.tenants import GreedyTenant

T = HBM3_6400
G = HBM3_GEOMETRY


# -- preset and conversions ----------------------------------------------------
@pytest.mark.parametrize("ns, cycles", [
    (0, 0), (Fraction(5, 8), 1), ("0.626", 2), (1, 2), (3900, 6240),
    ("121.875", 195), (200, 320), (320, 512), ("12.5", 20),
])
def test_ns_to_cycles_rounds_up(ns, cycles):
    assert ns_to_cycles(ns) == cycles


def test_ns_to_cycles_refuses_floats_and_negatives():
    with pytest.raises(TypeError, match="not 0.5"):
        ns_to_cycles(0.5)
    with pytest.raises(ValueError, match="non-negative"):
        ns_to_cycles(-1)


def test_preset_figures():
    assert (T.tREFI, T.tREFIpb, T.tRFCpb) == (6240, 195, 320)
    assert T.tRC >= T.tRAS + T.tRP - 1  # tRC is the datasheet's own figure, within a clock
    assert bytes_per_cycle_to_gbps(peak_bytes_per_cycle()) == Fraction("51.2")
    assert G.banks == 64 and G.columns == 32


# -- single-request latencies ------------------------------------------------------
def _serve(channel, req, now):
    """Enqueue ``req`` at ``now`` and tick until its data burst ends."""
    req.seq = req.rank = now + 1
    channel.enqueue(req, now)
    t = now
    while req.done < 0:
        t = channel.tick(t)
        assert t < now + 10_000, "request never served"
    channel.pop_completions(req.done)
    return req.done - now, req.done


def _idle_channel():
    return Channel(refresh=False, n_tenants=1, log_commands=True)


def test_read_latencies_follow_timing_set():
    ch = _idle_channel()
    bank = G.bank_id(0, 0, 0, 0)
    miss = Request(0, False, bank, 7, 0)
    latency, t = _serve(ch, miss, 0)
    assert (latency, miss.kind) == (T.tRCD_RD + T.CL + T.burst, MISS)
    hit = Request(0, False, bank, 7, t)
    latency, t = _serve(ch, hit, t + 100)
    assert (latency, hit.kind) == (T.CL + T.burst, HIT)
    conflict = Request(0, False, bank, 8, t)
    latency, _ = _serve(ch, conflict, t + 100)
    assert (latency, conflict.kind) == (T.tRP + T.tRCD_RD + T.CL + T.burst, CONFLICT)
    assert [cmd for _, cmd, *_ in ch.log] == ["ACT", "RD", "RD", "PRE", "ACT", "RD"]


def test_write_latencies_follow_timing_set():
    ch = _idle_channel()
    bank = G.bank_id(1, 1, 3, 2)
    latency, t = _serve(ch, Request(0, True, bank, 3, 0), 0)
    assert latency == T.tRCD_WR + T.CWL + T.burst
    latency, _ = _serve(ch, Request(0, True, bank, 3, t), t + 100)
    assert latency == T.CWL + T.burst


def test_conflict_waits_for_tras():
    ch = _idle_channel()
    bank = G.bank_id(0, 1, 2, 3)
    _, _ = _serve(ch, Request(0, False, bank, 1, 0), 0)
    # The row opened at cycle 0, so its precharge may not come before tRAS.
    latency, _ = _serve(ch, Request(0, False, bank, 2, 1), 1)
    pre = [c for c, cmd, *_ in ch.log if cmd == "PRE"][0]
    assert pre == T.tRAS
    act = max(T.tRAS + T.tRP, T.tRC)  # tRC (72) outlasts tRAS + tRP (71)
    assert latency == act - 1 + T.tRCD_RD + T.CL + T.burst


def test_back_to_back_column_spacing():
    """Two open rows: same bank group costs tCCD_L, different costs tCCD_S."""
    for bg_b, spacing in ((0, T.tCCD_L), (1, T.tCCD_S)):
        ch = _idle_channel()
        a, b = G.bank_id(0, 0, 0, 0), G.bank_id(0, 0, bg_b, 1)
        _serve(ch, Request(0, False, a, 0, 0), 0)
        _serve(ch, Request(0, False, b, 0, 100), 100)
        r1, r2 = Request(0, False, a, 0, 300), Request(0, False, b, 0, 300)
        r1.seq, r2.seq = r1.rank, r2.rank = 1000, 1001
        ch.enqueue(r1, 300)
        ch.enqueue(r2, 300)
        t = 300
        while r2.done < 0:
            t = ch.tick(t)
        assert r2.issued - r1.issued == spacing


# -- bandwidth against the preset's limits --------------------------------------
PEAK = peak_bytes_per_cycle()  # 32 B per cycle: both pseudo-channels, a burst every tCCD_S


def _drive(channel, next_request, cycles):
    """Keep the transaction queue full from ``next_request(seq, now)``; bytes per cycle."""
    seq = 0
    t = 0
    while t < cycles:
        while channel.has_room():
            seq += 1
            req = next_request(seq, t)
            req.seq = req.rank = seq
            channel.enqueue(req, t)
        t = channel.tick(t)
        channel.pop_completions(t)
    return Fraction(sum(channel.stats.bytes), cycles)


def _stream(seq, now):
    bank, row = AddressMap(1).locate(0, seq)
    return Request(0, False, bank, row, now)


def test_streaming_reads_reach_peak():
    bw = _drive(Channel(refresh=False, n_tenants=1), _stream, 40_000)
    assert Fraction(93, 100) * PEAK <= bw <= PEAK


def test_streaming_with_refresh_keeps_most_of_peak_and_refreshes_on_time():
    cycles = 40_000
    ch = Channel(refresh=True, n_tenants=1)
    bw = _drive(ch, _stream, cycles)
    assert Fraction(85, 100) * PEAK <= bw <= PEAK
    # One REFpb per tREFIpb per pseudo-channel, none skipped.
    due = sum(len(range(T.tREFIpb + pc * (T.tREFIpb // 2), cycles, T.tREFIpb)) for pc in range(2))
    assert due - 2 <= ch.stats.refs <= due


def test_one_bank_group_is_capped_by_tccd_l():
    """Row hits confined to one bank group per pseudo-channel: a burst per tCCD_L."""
    banks = [G.bank_id(pc, 0, 0, bank) for pc in range(2) for bank in range(4)]
    bw = _drive(Channel(refresh=False, n_tenants=1),
                lambda seq, now: Request(0, False, banks[seq % len(banks)], 5, now), 20_000)
    limit = Fraction(G.pseudo_channels * G.access_bytes, T.tCCD_L)
    assert bytes_per_cycle_to_gbps(limit) == Fraction("25.6")
    assert Fraction(97, 100) * limit <= bw <= limit


@pytest.mark.parametrize("scheduler", ["frfcfs", "fcfs"])
def test_random_single_accesses_are_capped_by_tfaw(scheduler, seed):
    """One access per activation: four activations per tFAW per pseudo-channel."""
    rng = random.Random(seed)
    limit = Fraction(4 * G.pseudo_channels * G.access_bytes, T.tFAW)
    assert abs(bytes_per_cycle_to_gbps(limit) - Fraction(1707, 100)) < Fraction(1, 100)
    bw = _drive(Channel(refresh=False, n_tenants=1, scheduler=scheduler),
                lambda seq, now: Request(0, False, rng.randrange(G.banks), rng.randrange(G.rows), now),
                30_000)
    assert Fraction(92, 100) * limit <= bw <= limit


def test_random_transactions_activate_once_per_two_bursts():
    """A 128 B transaction is two bursts per pseudo-channel in one row, so the
    tFAW cap doubles to 34 GB/s; refresh and bank collisions keep it below."""
    system = System([GreedyTenant(0, window=32, pattern="random", seed=1)], FrFcfsPolicy())
    cycles = 30_000
    system.run(cycles)
    bw = Fraction(system.channel.stats.bytes[0], cycles)
    limit = Fraction(4 * 2 * G.pseudo_channels * G.access_bytes, T.tFAW)
    assert Fraction(80, 100) * limit <= bw <= limit


# -- an independent rule checker over random traffic --------------------------------
def check_command_log(log, timing=T, geometry=G):
    """Assert every JEDEC constraint between the logged commands.

    Deliberately naive: keeps the full history per bank, bank group and
    pseudo-channel and tests each new command against it.
    """
    tm = timing
    wr_end = tm.CWL + tm.burst
    open_row = {}
    last = {}          # (scope, key, command) -> cycle
    acts_pc = {}
    row_bus_end = -1
    col_cycles = set()
    data_end = {}

    def since(scope, key, cmd):
        return last.get((scope, key, cmd), -10**9)

    for cycle, cmd, b, row, start_half in log:
        pc, sid, bg, _ = geometry.split_bank_id(b)
        bgk = (pc, sid, bg)
        if start_half is not None:
            assert start_half >= row_bus_end, f"row bus overlap at {cycle}"
            assert cycle == (start_half + 1) // 2
            row_bus_end = start_half + {"ACT": tm.act_bus_half, "PRE": tm.pre_bus_half,
                                        "REF": tm.ref_bus_half}[cmd]
        if cmd == "ACT":
            assert open_row.get(b) is None, f"ACT to open bank {b} at {cycle}"
            assert cycle >= since("bank", b, "PRE") + tm.tRP
            assert cycle >= since("bank", b, "ACT") + tm.tRC
            assert cycle >= since("bank", b, "REF") + tm.tRFCpb
            assert cycle >= since("bg", bgk, "ACT") + tm.tRRD_L
            assert cycle >= since("pc", pc, "ACT") + tm.tRRD_S
            history = acts_pc.setdefault(pc, [])
            if len(history) >= 4:
                assert cycle >= history[-4] + tm.tFAW, f"tFAW violated at {cycle}"
            history.append(cycle)
            open_row[b] = row
        elif cmd == "PRE":
            assert open_row.get(b) is not None
            assert cycle >= since("bank", b, "ACT") + tm.tRAS
            assert cycle >= since("bank", b, "RD") + tm.tRTP
            assert cycle >= since("bank", b, "WR") + wr_end + tm.tWR
            assert cycle >= since("pc", pc, "PRE") + tm.tPPD
            open_row[b] = None
        elif cmd == "REF":
            assert open_row.get(b) is None
            assert cycle >= since("bank", b, "PRE") + tm.tRP
            assert cycle >= since("bank", b, "ACT") + tm.tRC
        else:
            assert open_row.get(b) == row, f"{cmd} to a closed or other row at {cycle}"
            assert cycle not in col_cycles, f"two column commands at {cycle}"
            col_cycles.add(cycle)
            prev_col = max(since("pc", pc, "RD"), since("pc", pc, "WR"))
            assert cycle >= max(since("bg", bgk, "RD"), since("bg", bgk, "WR")) + tm.tCCD_L
            assert cycle >= prev_col + tm.tCCD_S
            if last.get(("pc", pc, "sid")) not in (None, sid):
                assert cycle >= prev_col + tm.tCCD_R
            if cmd == "RD":
                assert cycle >= since("bank", b, "ACT") + tm.tRCD_RD
                assert cycle >= since("bg", bgk, "WR") + wr_end + tm.tWTR_L
                assert cycle >= since("pc", pc, "WR") + wr_end + tm.tWTR_S
                burst = (cycle + tm.CL, cycle + tm.CL + tm.burst)
            else:
                assert cycle >= since("bank", b, "ACT") + tm.tRCD_WR
                assert cycle >= since("pc", pc, "RD") + tm.tRTW
                burst = (cycle + tm.CWL, cycle + wr_end)
            assert burst[0] >= data_end.get(pc, -1), f"data bus overlap at {cycle}"
            data_end[pc] = burst[1]
            last[("pc", pc, "sid")] = sid
        for scope, key in (("bank", b), ("bg", bgk), ("pc", pc)):
            last[(scope, key, cmd)] = cycle


class _QosClassesPolicy(FrFcfsPolicy):
    """The QoS controller behind a front end that spreads requests over the
    three classes at random, with postponable refresh and write preemption."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def controller_args(self):
        return dict(scheduler=QosScheduler((8, 8, 2)), admission=ReservedEntries((8, 24, 32)),
                    drain=PreemptingDrain(12, 2, preempt_below=2),
                    refresh_policy=QosRefresh(max_postponed=4))

    def qclass(self, txn):
        return self.rng.randrange(3)

    def front_end(self, now):
        system = self.system
        for q in system.sources:
            if q:
                txn = q[0]
                k = self.qclass(txn)
                axqos = self.rng.randrange(16)
                if system.channel.has_room(len(txn.accesses), txn.is_write, k):
                    for a in txn.accesses:
                        a.qclass, a.axqos, a.rank = k, axqos, qos_rank(axqos, a.seq, k)
                    system.admit(txn, now)
                    return now + 1
        return NEVER if not system.waiting else now + 1


@pytest.mark.parametrize("policy", [FrFcfsPolicy, FcfsPolicy, _QosClassesPolicy])
def test_random_traffic_obeys_every_timing_rule(policy, seed):
    rng = random.Random(seed)
    tenants = [
        GreedyTenant(0, window=12, pattern="random", block=rng.choice([1, 2, 4]), write_share=3,
                     seed=seed),
        GreedyTenant(1, window=12, pattern="stream", write_share=5, seed=seed),
    ]
    front = policy(seed) if policy is _QosClassesPolicy else policy()
    system = System(tenants, front, channel_args=dict(log_commands=True, refresh=True))
    cycles = 3 * T.tREFI
    system.run(cycles)
    log = system.channel.log
    check_command_log(log)
    refreshed = {b for _, cmd, b, _, _ in log if cmd == "REF"}
    assert len(refreshed) >= G.banks * 2 // 3, "per-bank refresh should have reached most banks"
    # Postponed or not, no refresh slot is more than the policy's limit late.
    assert system.channel.stats.ref_late_max <= 4 * T.tREFIpb
    stats = system.channel.stats
    assert sum(stats.accesses) > cycles // 10
    served = sum(stats.hits) + sum(stats.misses) + sum(stats.conflicts)
    assert served == sum(stats.accesses)


def test_fcfs_serves_each_bank_in_arrival_order(seed):
    tenants = [GreedyTenant(i, window=8, pattern="random", block=2, write_share=4, seed=seed)
               for i in range(2)]
    system = System(tenants, FcfsPolicy())
    order = {}
    original = system.channel._issue_column

    def spy(req, now):
        order.setdefault(req.bank, []).append(req.seq)
        original(req, now)

    system.channel._issue_column = spy
    system.run(20_000)
    assert all(seqs == sorted(seqs) for seqs in order.values())


# -- the QoS controller's policies ---------------------------------------------------
def _qos_channel(**kw):
    return Channel(refresh=False, n_tenants=2, scheduler=QosScheduler((16, 16, 4)),
                   admission=ReservedEntries((4, 8, 8)), **kw)


def test_reserved_entries_keep_a_full_burst_class_from_blocking_guaranteed():
    ch = _qos_channel()
    for i in range(8):
        r = Request(0, False, i, 1, 0)
        r.qclass = BURST_CLASS
        assert ch.has_room(1, False, BURST_CLASS)
        ch.enqueue(r, 0)
    assert not ch.has_room(1, False, BURST_CLASS)
    assert not ch.has_room(1, True, BURST_CLASS), "reads and writes of a class share its entries"
    assert ch.has_room(8, False, GUARANTEED_CLASS) and not ch.has_room(9, False, GUARANTEED_CLASS)


def _read_feeder(ch):
    """``put(bank, row, qclass, axqos, now)``: enqueue a read with the next
    sequence number and the rank a QoS front end gives it."""
    seq = 0

    def put(bank, row, qclass, axqos, now):
        nonlocal seq
        seq += 1
        r = Request(0, False, bank, row, now)
        r.seq, r.qclass, r.axqos, r.rank = seq, qclass, axqos, qos_rank(axqos, seq, qclass)
        ch.enqueue(r, now)
        return r

    return put


def test_guaranteed_request_beats_an_older_burst_row_hit_stream():
    """Class first: a guaranteed conflict closes the row a burst stream keeps hitting."""
    ch = _qos_channel(log_commands=True)
    bank = G.bank_id(0, 0, 0, 0)
    feed = _read_feeder(ch)

    def put(row, qclass, axqos, now):
        return feed(bank, row, qclass, axqos, now)

    burst = [put(3, BURST_CLASS, 4, 0) for _ in range(12)]
    t = 0
    while burst[0].issued < 0:     # row 3 open, first burst access issued
        t = ch.tick(t)
    urgent = put(9, GUARANTEED_CLASS, 10, t)
    while urgent.done < 0:
        t = ch.tick(t)
    # Without classes, FR-FCFS would serve the eleven younger row hits first.
    assert all(r.issued < 0 for r in burst[1:]), "burst hits must wait for the guaranteed request"
    assert urgent.done - t <= T.tRAS + T.tRP + T.tRCD_RD + T.CL + T.burst
    assert [c for _, c, *_ in ch.log].count("PRE") == 1
    check_command_log(ch.log)


def test_urgent_read_cuts_a_write_drain_short():
    drain = PreemptingDrain(8, 2, preempt_below=1, min_batch=0, force=100)
    ch = Channel(refresh=False, n_tenants=1, scheduler=QosScheduler(), admission=ReservedEntries((8, 8, 64)),
                 drain=drain)
    for i in range(20):  # enough writes on pseudo-channel 0 to start a drain
        w = Request(0, True, G.bank_id(0, 0, i % 4, 0), 1 + i // 4, 0)
        w.seq = w.rank = i + 1
        ch.enqueue(w, 0)
    t = ch.tick(0)
    assert ch.write_mode[0]
    r = Request(0, False, G.bank_id(0, 0, 0, 1), 5, t)
    r.seq, r.qclass, r.rank = 100, 0, qos_rank(15, 100, 0)
    ch.enqueue(r, t)
    ch.tick(t)
    assert not ch.write_mode[0], "an urgent read must end the drain at once"
    while r.done < 0:
        t = ch.tick(t)
    assert ch.pc_writes[0] > drain.low, "the read was served before the drain finished"


def test_protected_reads_hold_and_cut_drains_but_never_starve_writes():
    """A protected read waits on pseudo-channel 0 all the time (a fresh one
    replaces it as soon as it is served).  A due drain (``high`` writes
    queued, and the read turn of ``high - low`` reads since the last drain
    served) must wait for it, but at most ``max_hold`` cycles, and then run
    uninterrupted; writes keep flowing."""
    drain = PreemptingDrain(8, 2, preempt_below=2, min_batch=3, max_hold=150)
    ch = Channel(refresh=False, n_tenants=1, scheduler=QosScheduler(), admission=ReservedEntries((8, 64, 64)),
                 drain=drain, log_commands=True)
    seq = 0

    def add(is_write, bank, row, qclass, t):
        nonlocal seq
        seq += 1
        req = Request(0, is_write, bank, row, t)
        req.seq, req.qclass, req.rank = seq, qclass, qos_rank(11 if qclass == GUARANTEED_CLASS else 4, seq, qclass)
        ch.enqueue(req, t)
        return req

    t = 0
    read = add(False, G.bank_id(0, 0, 0, 1), 7, GUARANTEED_CLASS, t)
    due_since, holds, writes_done, left = None, [], 0, None
    for step in range(6000):
        if ch.pc_writes[0] < 12 and step % 3 == 0:
            add(True, G.bank_id(0, 0, step % 4, 0), 1, BURST_CLASS, t)
        before = ch.pc_writes[0]
        prev = t
        t = ch.tick(t)
        if read.done >= 0:
            read = add(False, G.bank_id(0, 0, 0, 1), 7 + step % 5, GUARANTEED_CLASS, t)
        if ch.write_mode[0]:
            left = t  # the drain, if it ends, ends at a later tick
        turn = left is None or sum(c[1] == "RD" and c[0] >= left for c in ch.log) >= drain.high - drain.low
        if not ch.write_mode[0] and ch.pc_writes[0] >= drain.high and turn and due_since is None:
            due_since = t  # the drain sees the new write (or the turn's last read) at its next tick
        if ch.write_mode[0] and due_since is not None:
            holds.append(prev - due_since)
            due_since = None
        writes_done += max(0, before - ch.pc_writes[0])
    assert writes_done > 100, "writes starved behind the protected reads"
    assert holds and max(holds) <= drain.max_hold + 1, holds
    assert max(holds) >= drain.max_hold - 10, "due drains were not held off for the protected read"
    check_command_log(ch.log)


@pytest.mark.parametrize("interval", [0, -5, 2.5, "600"])
def test_init_wrong_drain_interval(interval):
    with pytest.raises(ValueError, match=f"Drain interval must be a positive number of cycles or None, "
                                         f"not {interval!r}"):
        WatermarkDrain(28, 4, interval=interval)


@pytest.mark.parametrize("interval", [None, 300])
def test_drain_interval_drains_a_slow_writer_below_the_high_watermark(interval):
    """Reads wait on pseudo-channel 0 all the time and a write arrives every
    40 cycles, never reaching the high watermark (28).  With watermarks only,
    no drain starts while reads wait; with a drain interval, a drain starts
    no earlier than ``interval`` cycles after the last one ended and, once
    more than ``low`` writes are queued and the read turn (``high - low``
    reads since that drain) is served, no later than a few cycles after
    that; every drain ends at the low watermark."""
    drain = WatermarkDrain(28, 4, interval=interval)
    ch = Channel(refresh=False, n_tenants=1, drain=drain, log_commands=True)
    seq = 0

    def add(is_write, bank, row, t):
        nonlocal seq
        seq += 1
        req = Request(0, is_write, bank, row, t)
        req.seq = req.rank = seq
        ch.enqueue(req, t)
        return req

    t = 0
    reads = [add(False, G.bank_id(0, 0, i, 1), 7, t) for i in range(4)]
    entries, exits, last_write = [], [], -40
    while t < 6000:
        if t - last_write >= 40 and ch.pc_writes[0] < 20:
            add(True, G.bank_id(0, 1, t % 4, 0), 1, t)
            last_write = t
        was, writes_before = ch.write_mode[0], ch.pc_writes[0]
        prev = t
        t = ch.tick(t)
        if not was and ch.write_mode[0]:
            entries.append((prev, writes_before))
        if was and not ch.write_mode[0]:
            exits.append((prev, ch.pc_writes[0]))
        reads = [r if r.done < 0 else add(False, r.bank, 7 + t % 5, t) for r in reads]
    if interval is None:
        assert entries == [], "a drain started below the high watermark while reads waited"
        assert ch.pc_writes[0] >= 20
    else:
        assert len(entries) >= 6, entries
        reads_at = [c[0] for c in ch.log if c[1] == "RD"]
        for (left, _), (entered, queued) in zip(exits, entries[1:]):
            turn = [r for r in reads_at if r >= left][drain.high - drain.low - 1]
            assert entered - left >= interval, "a drain started before the interval had passed"
            assert entered > turn, "a drain started before the read turn was served"
            assert entered - max(left + interval, turn) <= 45, "a due drain waited for the next write or longer"
            assert queued > drain.low
        assert all(queued <= drain.low for _, queued in exits)
    check_command_log(ch.log)


class _CreditView:
    """What a credit-return policy reads of a channel: entries freed per
    class, and reads queued per pseudo-channel and class."""

    def __init__(self):
        self.class_freed = [0, 0, 0]
        self.pc_class_reads = [[0, 0, 0], [0, 0, 0]]
        self.occupancy = 0                # entries queued, every class's reads and writes
        self.writes_queued = 0
        self.pc_writes = [0, 0]           # writes queued per pseudo-channel
        self.write_mode = [False, False]
        self.drain = WatermarkDrain(8, 2)  # a drain is due at 8 writes queued in a pseudo-channel


def _grants(ret, k, n, entries=4):
    """``n`` grants of class ``k``, each of ``entries`` entries."""
    for _ in range(n):
        ret.granted(k, entries)


def test_credit_return_gives_a_grants_credit_once_its_entries_are_freed_one_per_clock():
    """A grant's credit goes back once the class's freed entries cover it and
    every grant of the class before it; one credit per class per clock."""
    ret = CreditReturn()
    ret.granted(0, 4)
    for entries in (4, 8, 4):
        ret.granted(1, entries)
    ret.granted(2, 8)
    view = _CreditView()
    view.class_freed = [3, 9, 8]
    assert ret.step(view, 0) == (0, 1, 1), "3 of 4 entries free no credit; 9 cover the first 4, 8 the 8"
    assert ret.owed(view, 1) == 0, "5 entries left do not cover the next grant's 8"
    assert ret.step(view, 1) == (0, 0, 0)
    view.class_freed = [4, 16, 24]
    assert ret.owed(view, 1) == 2 and ret.owed(view, 2) == 0, "freed entries beyond every grant owe nothing"
    assert [ret.step(view, now) for now in (2, 3, 4)] == [(1, 1, 0), (0, 1, 0), (0, 0, 0)]
    assert ret.returned == [1, 3, 1]


def test_credit_return_of_equal_grants_is_one_credit_per_their_entries():
    """Grants of 4 entries each: one credit per 4 entries freed, whichever grant they were."""
    ret = CreditReturn()
    _grants(ret, 1, 5)
    view = _CreditView()
    got = []
    for now, freed in enumerate((1, 4, 7, 8, 8, 20, 20, 20, 20)):
        view.class_freed = [0, freed, 0]
        got.append(ret.step(view, now)[1])
    assert got == [0, 1, 0, 1, 0, 1, 1, 1, 0]


@pytest.mark.parametrize("protected", [URGENT_CLASS, GUARANTEED_CLASS])
def test_yielding_credit_return_holds_burst_credits_for_protected_reads_at_most_max_hold(protected):
    ret = YieldingCreditReturn(max_hold=50)
    _grants(ret, 1, 2)
    _grants(ret, 2, 13)
    view = _CreditView()
    view.pc_class_reads[1][protected] = 1        # a protected read waits on pseudo-channel 1
    view.class_freed = [0, 8, 40]                # two guaranteed and ten burst credits owed
    bits = [ret.step(view, now) for now in range(100, 150)]
    assert sum(b[1] for b in bits) == 2, "guaranteed credits never wait"
    assert not any(b[2] for b in bits), "burst credits wait while the protected read is queued"
    late = [ret.step(view, now) for now in range(150, 160)]
    assert [b[2] for b in late] == [1] * 10, "after max_hold the owed burst credits go back one per clock"
    # The protected read leaves: the next period of protected reads holds again from its own start.
    view.pc_class_reads[1][protected] = 0
    view.class_freed[2] += 4
    assert ret.step(view, 400)[2] == 1
    view.pc_class_reads[0][protected] = 1
    view.class_freed[2] += 8
    assert [ret.step(view, now)[2] for now in range(500, 550)] == [0] * 50
    assert [ret.step(view, now)[2] for now in range(550, 552)] == [1, 1]


def test_yielding_credit_return_budget_counts_queued_reads_and_waits_for_drains():
    """The budget: a held burst credit goes back while fewer than ``budget``
    reads of all classes together are queued, the protected reads' own
    included, and no pseudo-channel is in write mode or has a drain due (its
    high watermark, 8, reached).  Writes queued below the watermark do not
    count against the budget."""
    ret = YieldingCreditReturn(max_hold=1000, budget=10)
    _grants(ret, 2, 4)
    view = _CreditView()
    view.pc_class_reads[0][GUARANTEED_CLASS] = 3   # a decode's reads are queued: the hold is on
    view.occupancy = 9                             # 9 reads queued in all, under the budget
    view.class_freed = [0, 0, 16]                  # four burst credits owed
    assert ret.step(view, 0)[2] == 1, "under the budget a held credit goes back"
    view.occupancy = 10                            # 10 reads: the budget is reached
    assert [ret.step(view, now)[2] for now in range(1, 4)] == [0, 0, 0]
    view.occupancy = 9 + 7                         # 9 reads and 7 writes (below the watermark)
    view.writes_queued, view.pc_writes = 7, [7, 0]
    assert ret.step(view, 4)[2] == 1, "queued writes are not counted as reads"
    view.occupancy = 3 + 16                        # 3 reads; pseudo-channel 1 at its high watermark
    view.writes_queued, view.pc_writes = 16, [8, 8]
    assert ret.step(view, 5)[2] == 0, "a due drain holds the credit"
    view.occupancy = 3 + 9
    view.writes_queued, view.pc_writes = 9, [7, 2]
    view.write_mode = [False, True]                # pseudo-channel 1 drains
    assert ret.step(view, 6)[2] == 0, "a running drain holds the credit"
    view.write_mode = [False, False]
    assert ret.step(view, 7)[2] == 1
    view.occupancy = 12                            # the decode step alone fills the budget
    view.writes_queued, view.pc_writes = 0, [0, 0]
    assert ret.step(view, 8)[2] == 0
    view.occupancy = 3
    assert ret.step(view, 9)[2] == 1
    assert ret.step(view, 10)[2] == 0, "nothing more owed"
    # Budget 0 is the complete hold, whatever is queued.
    plain = YieldingCreditReturn(max_hold=1000)
    _grants(plain, 2, 1)
    view.class_freed = [0, 0, 4]
    assert plain.step(view, 0)[2] == 0
    with pytest.raises(ValueError, match="budget"):
        YieldingCreditReturn(budget=-1)


def test_yielding_credit_return_does_not_hold_for_burst_reads():
    ret = YieldingCreditReturn(max_hold=50)
    _grants(ret, 2, 2)
    view = _CreditView()
    view.pc_class_reads[0][BURST_CLASS] = 30
    view.class_freed = [0, 0, 8]
    assert [ret.step(view, now)[2] for now in range(3)] == [1, 1, 0]


def test_qos_refresh_avoids_banks_with_guaranteed_reads_and_postpones_within_its_limit():
    policy = QosRefresh(max_postponed=2, retry=16)
    ch = Channel(refresh=True, n_tenants=1, scheduler=QosScheduler(), admission=ReservedEntries((8, 64, 64)),
                 refresh_policy=policy)
    per_pc = G.banks_per_pc
    todo = set(range(per_pc))             # pseudo-channel 0's round
    for b in range(per_pc - 1):           # guaranteed reads everywhere but the last bank
        r = Request(0, False, b, 3, 0)
        r.qclass = GUARANTEED_CLASS
        ch.enqueue(r, 0)
    assert policy.pick(ch, 0, todo) == per_pc - 1
    r = Request(0, False, per_pc - 1, 3, 0)
    r.qclass = GUARANTEED_CLASS
    ch.enqueue(r, 0)
    due = ch.ref_due[0]
    assert policy.postpone(ch, 0, todo, due) == due + 16, "every bank protected: wait"
    limit = 2 * T.tREFIpb
    assert policy.postpone(ch, 0, todo, due + limit - 16) is None, "never later than the limit"
    other = Channel(refresh=False, n_tenants=1)
    other.enqueue(Request(0, False, 0, 3, 0), 0)  # a burst read does not protect its bank
    assert policy.pick(other, 0, {0, 1}) == 1 and not policy._protected(other, 0)


def test_burst_activation_waits_for_an_empty_tfaw_window_while_guaranteed_reads_wait():
    """QosScheduler's activation guard: a burst read does not take a tFAW slot
    that the guaranteed reads queued in its pseudo-channel could use."""

    def run(guard):
        ch = Channel(refresh=False, n_tenants=2, log_commands=True,
                     scheduler=QosScheduler((16, 16, 4), guard_activations=guard),
                     admission=ReservedEntries((4, 8, 8)))
        put = _read_feeder(ch)
        # Two guaranteed reads in one bank (the second must wait tRC for its
        # row), a burst read in another bank of the same pseudo-channel.
        g_bank, b_bank = G.bank_id(0, 0, 0, 0), G.bank_id(0, 0, 1, 0)
        first = put(g_bank, 1, GUARANTEED_CLASS, 10, 0)
        second = put(g_bank, 2, GUARANTEED_CLASS, 10, 0)
        burst = put(b_bank, 7, BURST_CLASS, 4, 0)
        t = 0
        while burst.done < 0 or second.done < 0:
            t = ch.tick(t)
        check_command_log(ch.log)
        acts = {b: c for c, cmd, b, *_ in ch.log if cmd == "ACT" and b == b_bank}
        first_act = min(c for c, cmd, b, *_ in ch.log if cmd == "ACT" and b == g_bank)
        return acts[b_bank], first_act, second

    burst_act, guaranteed_act, second = run(guard=True)
    assert burst_act >= guaranteed_act + T.tFAW, "the burst ACT must wait for an empty tFAW window"
    assert burst_act < second.issued, "but it must not wait for every guaranteed read to finish"
    unguarded_act, guaranteed_act, _ = run(guard=False)
    assert unguarded_act < guaranteed_act + T.tFAW, "without the guard the burst ACT goes at once"
