"""The coordinator of per-channel rates (hw/coordinator.py, spec §13) in Amaranth's simulator.

The component is driven through a small harness that holds what the register
file holds (``coord_enable``, and each tenant's active and staged RATE,
PEAK_RATE and enable, copied by a COMMIT) and the channels' ingress registers.
A reference written here from the rule, with :class:`fractions.Fraction`
arithmetic (each tenant's water level solved in closed form over its sorted
channel loads, not searched as the RTL does), gives every cycle's expected
``rate[c][i]``/``peak_rate[c][i]``: an epoch's result, when it is used
(tenant i on channel c from t_e + 1 + COORD_LATENCY + i·C + c), when it is discarded (a COMMIT,
a disabled cycle), and, with the coordinator off, the active RATE/PEAK_RATE in
every cycle.
"""

from fractions import Fraction
import math

import pytest
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib.wiring import In, Out

from kvfabric.hw.config import FabricComponent
from kvfabric.hw.coordinator import Coordinator, walk_cycles
from kvfabric.hw.layouts import acceptance_layout
from kvfabric.spec import (COORD_LATENCY, COORD_MAX_PASSES, COORD_MIN_EPOCH, FabricParams,
                           coord_level_bits, coord_passes)

from support.axil_manager import run_sim, seeded


def level(others, total):
    """The smallest integer h with sum(max(0, h - o) for o in others) >= total
    (total > 0): the real level over the k lowest loads, rounded up."""
    lows = sorted(others)
    for k in range(1, len(lows) + 1):
        lam = Fraction(total + sum(lows[:k]), k)
        if k == len(lows) or lam <= lows[k]:
            return math.ceil(lam)


def rule_result(demand, tenants, floor, passes, top=(1 << 16) - 1, backlog=None, previous=None):
    """Spec §13.5 from its text: per tenant (rates, peaks) per channel.
    ``tenants`` = [(rate, peak, enable)]; ``demand[i][c]`` true where tenant i
    was accepted on channel c, ``backlog[i][c]`` where one of those
    acceptances left its queue full (None: wherever it was accepted);
    ``top`` the highest level, 2^W - 1. A light pair keeps lo =
    ``RATE - fr``, a backlogged one lo = ``min(p >> 1, RATE - fr)`` with
    ``p = previous[i][c]`` the previous epoch's rate (damped descent; 0
    when ``previous`` is None); the levelled pairs are the backlogged ones, or all if
    none is. The fill, ``sum lo`` over the light pairs plus
    ``max(0, h - (o + lo))`` over the levelled ones, is ``sum lo`` plus the
    plain fill over the loads ``o + lo``, so the level is the plain one of
    the rest over those (0 when the lower bounds alone reach the total)."""
    n, nc = len(tenants), len(demand[0])
    backlog = demand if backlog is None else backlog
    active = [tenants[i][2] and any(demand[i]) for i in range(n)]
    fr = [math.floor(Fraction(floor * t[0], 256)) for t in tenants]
    need = [nc * (t[0] - f) for t, f in zip(tenants, fr)]
    lows = [[(t[0] - f if not backlog[i][c] else
              min(previous[i][c] // 2, t[0] - f) if previous is not None else 0) if demand[i][c] else 0
             for c in range(nc)]
            for i, (t, f) in enumerate(zip(tenants, fr))]
    x = [[0] * nc for _ in range(n)]
    for _ in range(passes):
        for i in range(n):
            if not active[i]:
                continue
            chans = [c for c in range(nc) if demand[i][c]]
            lev = [c for c in chans if backlog[i][c]] or chans
            lo = lows[i]
            others = {c: sum(x[j][c] for j in range(n) if j != i) for c in range(nc)}
            rest = need[i] - sum(lo)
            h = (min(level([others[c] + lo[c] for c in lev], rest), top) if rest > 0 else 0) if need[i] else 0
            x[i] = [(max(lo[c], h - others[c]) if c in lev else lo[c]) if c in chans and need[i] else 0
                    for c in range(nc)]
    out = []
    for i, (rate, peak, en) in enumerate(tenants):
        if not active[i]:
            out.append(([rate] * nc, [peak] * nc))
            continue
        rates = [min(max(fr[i] + x[i][c], min(rate, 1)), 0xFFFF) for c in range(nc)]
        out.append((rates, [min(max(r + peak - rate, 0), 0xFFFF) for r in rates]))
    return out


class Reference:
    """Cycle-by-cycle expectation of the rate registers (spec §13)."""

    def __init__(self, params):
        self.p = params
        n, c = params.tenants, params.channels
        self.enable = 0
        self.ec = 0
        self.demand = [[False] * c for _ in range(n)]
        self.backlog = [[False] * c for _ in range(n)]
        self.pending = None  # [t_a, rates[i][c], peaks[i][c], keep[i]]
        self.previous = None  # the last epoch's rates, 0 for a tenant not active in it
        self.rate = [[0] * n for _ in range(c)]
        self.peak = [[0] * n for _ in range(c)]
        self.results = 0
        self.applied = 0
        self.damped = 0       # backlogged pairs whose damped floor was not 0
        self.masked = 0       # results that a latency-bound tenant's backlog bits would have changed

    def step(self, t, *, active, floor, epoch_cycles, accepted, commit, enable_next, active_next,
             latency=frozenset()):
        """Cycle t: ``active`` = [(rate, peak, enable)] of t, ``accepted`` =
        [(tenant, bytes) or None] per channel, ``commit`` the tenants whose
        COMMIT takes effect in t; sets the expected registers of t + 1.
        An acceptance is (tenant, bytes, full): full, its tenant's
        queue_full in the next cycle (the pair is backlogged). ``latency``:
        the tenants whose priority CREDITS.arrival_prio marks in t, whose
        pairs an epoch ending in t counts light (spec §13.4)."""
        p = self.p
        n, nc = p.tenants, p.channels
        if not self.enable:
            self.ec = 0
            self.demand = [[False] * nc for _ in range(n)]
            self.backlog = [[False] * nc for _ in range(n)]
            self.pending = None
            self.previous = None
        else:
            for c, acc in enumerate(accepted):
                if acc is not None:
                    self.demand[acc[0]][c] = True
                    self.backlog[acc[0]][c] |= acc[2]
            if self.ec >= max(epoch_cycles, COORD_MIN_EPOCH) - 1:
                backlog = [[b and i not in latency for b in row] for i, row in enumerate(self.backlog)]
                res = rule_result(self.demand, active, floor, coord_passes(p), (1 << coord_level_bits(p)) - 1,
                                  backlog, self.previous)
                self.masked += res != rule_result(self.demand, active, floor, coord_passes(p),
                                                  (1 << coord_level_bits(p)) - 1, self.backlog, self.previous)
                if self.previous is not None:
                    self.damped += sum(self.backlog[i][c] and self.previous[i][c] > 1
                                       for i in range(n) for c in range(nc))
                self.previous = [r if active[i][2] and any(self.demand[i]) else [0] * nc
                                 for i, (r, _) in enumerate(res)]
                self.pending = [t + 1 + COORD_LATENCY, [r for r, _ in res], [pk for _, pk in res], [True] * n]
                self.results += 1
                self.demand = [[False] * nc for _ in range(n)]
                self.backlog = [[False] * nc for _ in range(n)]
                self.ec = 0
            else:
                self.ec += 1
            # A COMMIT taking effect in t_e .. t_a + i·C + c - 1 discards tenant i's result on channel c.
            if self.pending is not None:
                for i in commit:
                    self.pending[3][i] = False
        # Pair k = i·C + c loads at the edge into t_a + k (spec §13.5).
        applying = None if self.pending is None else t + 1 - self.pending[0]
        for i in range(n):
            for c in range(nc):
                if not enable_next or i in commit:
                    self.rate[c][i], self.peak[c][i] = active_next[i][:2]
                elif applying == i * nc + c and self.pending[3][i]:
                    self.rate[c][i] = self.pending[1][i][c]
                    self.peak[c][i] = self.pending[2][i][c]
        if applying == n * nc - 1:
            self.applied += 1
            self.pending = None
        self.enable = enable_next


class Harness(FabricComponent):
    """The coordinator with the register file's part of its inputs: the
    enable register (written by ``en_write``/``en_value``, taking effect in
    this cycle) and every tenant's active configuration (``commit`` copies
    ``staged_*``), and the channels' ingress registers (``acc`` is an
    acceptance in this cycle) with their ``queue_full`` of the next cycle
    (``qfull``, registered with it). Like the register file, it also tells the
    coordinator the next cycle's COMMITs and enable write (``commit_next``,
    ``en_write_next``/``en_value_next``), with ``staged_*`` already holding
    what a COMMIT of the next cycle copies."""

    def __init__(self, params):
        n, c = params.tenants, params.channels
        super().__init__(params, {
            "en_write":     In(1),
            "en_value":     In(1),
            "en_write_next": In(1),
            "en_value_next": In(1),
            "commit_next":  In(n),
            "floor":        In(8),
            "epoch_cycles": In(24),
            "commit":       In(n),
            "staged_rate":  In(16).array(n),
            "staged_peak":  In(16).array(n),
            "staged_en":    In(1).array(n),
            "acc":          In(acceptance_layout(params)).array(c),
            "qfull":        In(n).array(c),
            "arrival_prio": In(4),
            "priority":     In(params.priority_bits).array(n),
            "rate":         Out(16).array(c, n),
            "peak_rate":    Out(16).array(c, n),
            "div_state":    Out(3),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.coord = coord = Coordinator(p)
        enable = Signal()
        enable_next = Mux(self.en_write, self.en_value, enable)
        m.d.sync += enable.eq(enable_next)
        m.d.comb += [coord.enable.eq(enable), coord.enable_next.eq(enable_next),
                     coord.enable_after_next.eq(Mux(self.en_write_next, self.en_value_next, enable_next)),
                     coord.floor.eq(self.floor), coord.epoch_cycles.eq(self.epoch_cycles),
                     coord.commit.eq(self.commit), coord.commit_next.eq(self.commit_next),
                     coord.arrival_prio.eq(self.arrival_prio)]
        for i in range(p.tenants):
            cfg = coord.tenant_cfg[i]
            m.d.sync += cfg.priority.eq(self.priority[i])   # held still by the tests: as configured
            with m.If(self.commit[i]):
                m.d.sync += [cfg.rate.eq(self.staged_rate[i]), cfg.peak_rate.eq(self.staged_peak[i]),
                             cfg.enable.eq(self.staged_en[i])]
            copies = self.commit[i] | self.commit_next[i]
            m.d.comb += [coord.rate_after_next[i].eq(Mux(copies, self.staged_rate[i], cfg.rate)),
                         coord.peak_rate_after_next[i].eq(Mux(copies, self.staged_peak[i], cfg.peak_rate))]
        for c in range(p.channels):
            m.d.sync += [coord.accepted[c].eq(self.acc[c]), coord.queue_full[c].eq(self.qfull[c])]
            for i in range(p.tenants):
                m.d.comb += [self.rate[c][i].eq(coord.rate[c][i]),
                             self.peak_rate[c][i].eq(coord.peak_rate[c][i])]
        return m


def test_rule_even_demand_is_the_contract():
    # The rule's own identity: demand on every channel gives back RATE and PEAK_RATE exactly.
    for rate, peak, floor in [(1000, 4000, 0), (1000, 4000, 128), (8191, 65535, 255), (7, 9, 3)]:
        for c in (1, 2, 4, 8, 16):
            got = rule_result([[True] * c, [True] * c], [(rate, peak, 1), (rate // 2, peak, 1)], floor, 4)
            assert got[0] == ([rate] * c, [peak] * c)


def test_schedule_fits():
    # The passes and the write-out's N x C cycles fit the latency for every
    # size of spec §1, with the most passes that fit: the passes end before
    # the write-out starts (t_a - 3).
    for n in range(1, 17):
        for c in range(1, 17):
            p = FabricParams(tenants=n, channels=c)
            passes, lw = coord_passes(p), coord_level_bits(p)
            assert 1 <= passes <= COORD_MAX_PASSES
            # Spec §13.6: passes, the N x C write-out and its two pipeline stages' cycles.
            assert walk_cycles(p) == passes * n * (lw + 3) + n * c + 2 <= COORD_LATENCY - 2
            assert passes == COORD_MAX_PASSES or (passes + 1) * n * (lw + 3) + n * c + 2 > COORD_LATENCY - 2
            assert lw == 16  # a level reaches what a rate register holds (spec §13.2)
    assert coord_passes(FabricParams(tenants=8, channels=8)) == 6


def _run(params, seed, *, cycles, script, traffic, damping=False, priorities=None, arrival=None):
    """Simulate ``cycles`` cycles; ``script(t, rng)`` returns the cycle's
    register actions, ``traffic(t, rng, c)`` an acceptance (tenant, bytes,
    full) or None. Every cycle's rate and peak registers are compared with
    :class:`Reference`. The other tenants' ``queue_full`` bits are random:
    only the accepted tenant's may mark a pair backlogged. ``priorities``:
    every tenant's priority, held from cycle 0 (default 0); ``arrival(t)``:
    CREDITS.arrival_prio in cycle t (default 0)."""
    rng = seeded(seed, 27)
    dut = Harness(params)
    ref = Reference(params)
    n, nc = params.tenants, params.channels
    stats = {}

    prio = priorities or [0] * n

    async def testbench(ctx):
        active = [(0, 0, 0)] * n
        enable = 0
        for i in range(n):
            ctx.set(dut.priority[i], prio[i])
        acts_next = script(0, rng)
        # The register file's first COMMIT or enable write takes effect in cycle 1.
        assert "commit" not in acts_next and "enable" not in acts_next, "a write takes effect in cycle 0"
        for t in range(cycles):
            acts, acts_next = acts_next, script(t + 1, rng)
            floor = acts.get("floor", 0)
            epoch_cycles = acts.get("epoch", 0)
            commits = acts.get("commit", {})
            commits_next = acts_next.get("commit", {})
            ctx.set(dut.en_write, "enable" in acts)
            ctx.set(dut.en_value, acts.get("enable", 0))
            ctx.set(dut.en_write_next, "enable" in acts_next)
            ctx.set(dut.en_value_next, acts_next.get("enable", 0))
            ctx.set(dut.floor, floor)
            ctx.set(dut.epoch_cycles, epoch_cycles)
            marked = arrival(t) if arrival else 0
            ctx.set(dut.arrival_prio, marked)
            ctx.set(dut.commit, sum(1 << i for i in commits))
            ctx.set(dut.commit_next, sum(1 << i for i in commits_next))
            # A tenant's COMMITs are at least two cycles apart (the bus's
            # write spacing): the staged values serve the COMMIT of t or t + 1.
            assert not set(commits) & set(commits_next), f"cycle {t}: back-to-back COMMITs"
            for i, (r, pk, en) in {**commits, **commits_next}.items():
                ctx.set(dut.staged_rate[i], r)
                ctx.set(dut.staged_peak[i], pk)
                ctx.set(dut.staged_en[i], en)
            accepted = []
            for c in range(nc):
                acc = traffic(t, rng, c)
                accepted.append(acc)
                ctx.set(dut.acc[c].valid, acc is not None)
                qfull = rng.getrandbits(n)
                if acc is not None:
                    ctx.set(dut.acc[c].tenant, acc[0])
                    ctx.set(dut.acc[c].bytes, acc[1])
                    qfull = qfull & ~(1 << acc[0]) | (int(acc[2]) << acc[0])
                ctx.set(dut.qfull[c], qfull)
            for c in range(nc):
                for i in range(n):
                    got = (ctx.get(dut.rate[c][i]), ctx.get(dut.peak_rate[c][i]))
                    exp = (ref.rate[c][i], ref.peak[c][i])
                    assert got == exp, f"cycle {t} channel {c} tenant {i}: rate, peak {got} != {exp}"
                    if not enable:
                        assert got == active[i][:2], f"cycle {t}: off, but not RATE/PEAK_RATE"
            active_next = [commits.get(i, active[i]) for i in range(n)]
            enable_next = acts.get("enable", enable)
            ref.step(t, active=active, floor=floor, epoch_cycles=epoch_cycles, accepted=accepted,
                     commit=set(commits), enable_next=enable_next, active_next=active_next,
                     latency=frozenset(i for i in range(n) if marked >> prio[i] & 1))
            active, enable = active_next, enable_next
            await ctx.tick()
        stats.update(results=ref.results, applied=ref.applied)
        if arrival:
            stats["masked"] = ref.masked
        print(f"results {ref.results}, applied {ref.applied}, damped floors {ref.damped}")
        assert ref.results < 2 or ref.damped > 0 or not damping, "no damped floor exercised"

    run_sim(dut, testbench)
    return stats


def _contracts(params, rng):
    return {i: (rng.randrange(1, 1 << 16), rng.randrange(1, 1 << 16), 1) for i in range(params.tenants)}


@pytest.mark.parametrize("params", [FabricParams(tenants=3, channels=2), FabricParams(tenants=2, channels=3),
                                    FabricParams(tenants=4, channels=4), FabricParams(tenants=3, channels=1)],
                         ids=["3x2", "2x3", "4x4", "3x1"])
def test_results_and_timing(params, seed):
    """Skewed random demand over four epochs of COORD_MIN_EPOCH cycles; each
    epoch's result (arithmetic against the Fraction rule) used exactly from
    t_e + 1 + COORD_LATENCY + i·C + c for tenant i on channel c; a COMMIT in a result's window, in t_e
    itself or in the write-out between two of its pairs, discards that tenant's result (the rest of it); one tenant disabled (its result
    is the even split); a floor in the first epoch, none later, where the
    last tenant has no demand on channels other than 0 (the rate of 1 that
    a tenant with a rate keeps everywhere); RATE/PEAK_RATE near 2^16 so the
    clamps act."""
    n = params.tenants
    E = COORD_MIN_EPOCH
    first = 10
    cfg = {i: (60000 if i == 0 else 900 * (i + 1), 65535 if i == 0 else 3000 * (i + 1), int(i != 1))
           for i in range(n)}
    commit_at = first + E + 300       # inside the first result's window
    commit_end = first + 2 * E        # the second epoch's t_e
    # In the third result's write-out, after the last tenant's first pair
    # (spec §13.5: pair (i, c) loads at the edge into t_a + i·C + c).
    commit_mid = first + 3 * E + 1 + COORD_LATENCY + (n - 1) * params.channels + 1
    skew = [[9, 1, 1], [1, 5, 1], [1, 1, 7]]

    def script(t, rng):
        acts = {"floor": 64 if t <= first + E else 0, "epoch": 0}
        if t == 2:
            acts["commit"] = cfg
        if t == first:
            acts["enable"] = 1
        if t == commit_at:
            acts["commit"] = {n - 1: (1234, 5678, 1)}
        if t == commit_end:
            acts["commit"] = {0: (50000, 60000, 1)}
        if t == commit_mid:
            acts["commit"] = {n - 1: (2345, 6789, 1)}
        return acts

    def traffic(t, rng, c):
        if t < first or rng.random() < 0.3:
            return None
        # Tenant i uses the channels where its row of `skew` is not 0 (the
        # last one channel 0 only): skewed, overlapping channel sets.
        weights = [skew[i % 3][c % 3] * ((i + c) % 3 != 1 or c == i % params.channels)
                   if i < n - 1 or c == 0 else 0 for i in range(n)]
        if not any(weights):
            return None
        # Backlogged on the pairs with i + c even (an acceptance leaves the
        # queue full now and then), light on the others.
        i = rng.choices(range(n), weights)[0]
        return i, rng.choice([1, 31, 32, 33, 64, 4096]), (i + c) % 2 == 0 and rng.random() < 0.05

    stats = _run(params, seed, cycles=first + 1 + 3 * E + COORD_LATENCY + params.tenants * params.channels + 4,
                 script=script,
                 traffic=traffic, damping=True)
    assert stats == {"results": 3, "applied": 3}


def test_disable_discards_and_off_follows_rate(seed):
    """Enable, an epoch's result pending, disable inside its window (every
    register back to RATE/PEAK_RATE from the next cycle, the result never
    used), COMMITs while off (followed at once), enable again: a new first
    epoch; disabled again at the very cycle an epoch ends (its result is
    discarded too)."""
    params = FabricParams(tenants=2, channels=2)
    E = COORD_MIN_EPOCH
    on1, off1 = 5, 5 + E + 200
    on2 = off1 + 50
    off2 = on2 + E          # the write takes effect in t_e: enable is 0 from t_e + 1

    def script(t, rng):
        acts = {"floor": 0, "epoch": 0}
        if t == 1:
            acts["commit"] = {0: (800, 1600, 1), 1: (400, 500, 1)}
        if t in (on1, on2):
            acts["enable"] = 1
        if t in (off1, off2):
            acts["enable"] = 0
        if t in (off1 + 10, off2 + 7):
            acts["commit"] = {1: (rng.randrange(1 << 16), rng.randrange(1 << 16), 1)}
        return acts

    def traffic(t, rng, c):
        return (c, 256, rng.random() < 0.5) if rng.random() < 0.5 else None

    stats = _run(params, seed, cycles=off2 + COORD_LATENCY + 20, script=script, traffic=traffic)
    assert stats == {"results": 2, "applied": 0}


def test_long_epoch(seed):
    """COORD_EPOCH above the minimum, one channel busy every cycle and the
    other accepting a few requests: both are the tenant's channels."""
    params = FabricParams(tenants=1, channels=2)
    E = 8300

    def script(t, rng):
        acts = {"floor": 200, "epoch": E}
        if t == 1:
            acts["commit"] = {0: (3000, 6000, 1)}
        if t == 2:
            acts["enable"] = 1
        return acts

    def traffic(t, rng, c):
        if c == 0:
            return (0, 4096, True)
        return (0, 32, False) if rng.random() < 0.01 else None

    stats = _run(params, seed, cycles=2 + E + COORD_LATENCY + 6, script=script, traffic=traffic)
    assert stats == {"results": 1, "applied": 1}


def test_previous_rate_of_an_inactive_tenant_is_zero(seed):
    """Spec §13.5: a backlogged pair's damped floor comes from the previous
    epoch's rate, 0 for a tenant that was not active in it. Tenant 1 is
    backlogged on both channels in epoch 0 (its even split, so its previous
    rates are RATE there), has no demand in epoch 1 and is backlogged again
    in epoch 2, where tenant 0 loads channel 0: its floor there is 0, not
    half its epoch-0 rate, so its level puts less of its total on channel 0
    than a stale previous rate would."""
    params = FabricParams(tenants=2, channels=2)
    E = COORD_MIN_EPOCH
    first = 10

    def script(t, rng):
        acts = {"floor": 0, "epoch": 0}
        if t == 2:
            acts["commit"] = {0: (20000, 40000, 1), 1: (8000, 16000, 1)}
        if t == first:
            acts["enable"] = 1
        return acts

    def traffic(t, rng, c):
        # Epoch k spans about [first + k E, first + (k + 1) E); stay clear of its edges.
        k, into = divmod(t - first - 1, E)
        if t <= first or not 64 <= into < E - 64 or rng.random() < 0.2:
            return None
        if k == 0:
            return 1, 256, rng.random() < 0.1
        if k == 2:
            tenant = 0 if c == 0 and rng.random() < 0.7 else 1
            return tenant, 256, rng.random() < 0.1
        return None

    stats = _run(params, seed, cycles=first + 1 + 3 * E + COORD_LATENCY + params.tenants * params.channels + 4,
                 script=script,
                 traffic=traffic)
    assert stats == {"results": 3, "applied": 3}


def test_latency_bound_tenants_are_never_backlogged(seed):
    """Spec §13.4: a tenant whose priority CREDITS.arrival_prio marks in t_e
    has no backlogged pair in that epoch's result, whatever its acceptances
    left full. Four tenants of priorities 0, 1, 2, 1 on 4 channels (0 on
    channels 0-1, 2 on 1 and 3, the others everywhere), often backlogged; arrival_prio marks priority 1 in the first epoch,
    nothing in the second and priorities 0 and 2 in the third (changing
    inside epochs too, so only t_e's value counts). Every cycle's rate
    registers against the reference, and in at least one epoch the marked
    tenants' backlog bits would have changed the result."""
    params = FabricParams(tenants=4, channels=4)
    E = COORD_MIN_EPOCH
    first = 10
    cfg = {i: (3000 * (i + 1), 9000 * (i + 1), 1) for i in range(params.tenants)}

    def script(t, rng):
        acts = {"floor": 0, "epoch": 0}
        if t == 2:
            acts["commit"] = cfg
        if t == first:
            acts["enable"] = 1
        return acts

    def arrival(t):
        k, into = divmod(t - first, E)
        if into < E // 2:           # a different mark in each epoch's first half: t_e's is what counts
            return 0b1111
        return [0b0010, 0b0000, 0b0101, 0b0000][min(max(k, 0), 3)]

    def traffic(t, rng, c):
        if t < first or rng.random() < 0.2:
            return None
        # Tenant 0 on channels 0-1 only, tenant 2 on 1 and 3: uneven loads,
        # from which a backlogged tenant 1 or 3 would be levelled away.
        i = rng.choices(range(4), [4 if c < 2 else 0, 1, 3 if c % 2 else 0, 2])[0]
        return i, 64, rng.random() < 0.3

    stats = _run(params, seed, cycles=first + 1 + 3 * E + COORD_LATENCY + params.tenants * params.channels + 4,
                 script=script,
                 traffic=traffic, priorities=[0, 1, 2, 1], arrival=arrival)
    assert stats["results"] == 3 and stats["applied"] == 3
    assert stats["masked"] >= 1, "no result depended on the latency-bound tenants' backlog bits"
