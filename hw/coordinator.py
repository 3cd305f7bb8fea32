"""Coordinator of the per-channel rates (spec §13, issues #27 and #43).

Every channel refills tenant i's buckets with its own ``rate[c][i]`` and
``peak_rate[c][i]`` registers. With the coordinator off they follow the
active ``RATE_i``/``PEAK_RATE_i`` (loaded at the same edge as the active
registers, so they are equal in every cycle). With it on, every epoch of E
cycles records which channels each tenant was accepted on and, from
``COORD_LATENCY`` cycles after the epoch's end, loads an *allocation* of every
tenant's total over those channels: water-filling, each tenant in turn
spreading its total over its channels so that their loads (the sums of the
allocation) are as level as the other tenants' allocations allow, repeated
for ``coord_passes`` passes (spec §13.5). A channel where the tenant was
accepted but never left its queue full (a light pair: a decode) keeps the
tenant's even split, and only its backlogged pairs are levelled: a light
tenant's requests never lose their guarantee to a neighbour's load, and a
tenant's guarantee goes where its requests wait, not where they are
already served.

Timing, exactly:

* Epoch counter ``coord_ec``: 0 in the first enabled cycle; the epoch ends in
  t_e when ``coord_ec >= E - 1`` (E = max(``coord_epoch_cycles``,
  COORD_MIN_EPOCH)), and ``coord_ec`` is 0 again in t_e + 1.
* Demand: a valid request accepted on channel c in an enabled cycle a sets
  the bit ``m[i][c]`` of a's epoch, and the backlog bit ``b[i][c]`` if the
  channel's ``queue_full`` bit i is 1 in a + 1. The acceptance is read from
  the channel's ingress register in a + 1 (a register, so the coordinator
  adds no load to the channel's request port), beside ``queue_full``
  (from registers too); the bits of an epoch are complete from t_e + 2,
  when they have been copied (``coord_dwalk_<c>``, ``coord_bwalk_<c>``) for
  the walk while the next epoch sets the counting ones.
* ``coord_floor``, every tenant's RATE and enable of t_e are held
  (``coord_snap_*``): the allocation of every tenant depends on every
  other's total. PEAK_RATE is read live (a COMMIT that changes it discards
  the tenant's result, so a result that applies saw the value of t_e).
* From t_e + 2 one walk: ``coord_passes`` passes over the tenants, each
  active tenant (enabled, with demand) taking a load cycle (the other
  tenants' loads on every channel, ``o[c] = load[c] - x[i][c]``), one cycle
  per bit of its water level (a binary search of the smallest level h whose
  fill reaches its total: over its channels, ``max(lo[c], h - o[c])`` on
  the levelled ones (its backlogged channels, or all of them if none is)
  and ``lo[c]`` on the others, lo[c] = RATE - fr on a light channel and 0
  on a backlogged one; all channels in parallel) and a write cycle (``x[i][c]`` into the per-channel
  allocation RAM ``coord_alloc_<c>``, the loads updated); then a write-out of
  every pair's rate and peak rate, one per cycle, into the per-tenant result
  RAM ``coord_result_<i>`` (its entry c: channel c's rate and peak rate).
* Channel c's registers load their tenants' results at the edge into
  t_a + c (t_a = t_e + 1 + COORD_LATENCY), all tenants at once, from the
  result RAMs read at address c. A COMMIT of tenant i loads tenant i's
  registers on every channel with the new RATE/PEAK_RATE at the edge at
  which the active registers take them and discards the rest of its result
  (one taking effect in t_e included); a cycle with the coordinator
  disabled loads every register from the active ones and discards every
  pending result (so a disable taking effect in t_e, too, discards t_e's
  result).
* Every ``rate``/``peak_rate`` register loads one value per tenant, the
  tenant's bus (shared by its channels): the register file's RATE/PEAK_RATE
  of the next cycle while it is being reloaded from them, the result RAM's
  entry of the channel applying otherwise. So a register costs a flip-flop
  with a clock enable and no multiplexer, and no staging copy of the
  registers is needed: the results wait in LUT RAM.

Area: the walk's datapath (C subtractors and an adder tree) is shared by
every tenant; what grows with N x C is the rate registers, the demand bits
and the two RAMs.

All state is named ``coord_*``: the state-budget script reports it as its
own category.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import enum
from amaranth.lib.memory import Memory

from amaranth.lib.wiring import In, Out

from .config import FabricComponent
from .layouts import acceptance_layout, tenant_config_layout
from kvfabric.spec import (COORD_EPOCH_BITS, COORD_FLOOR_BITS, COORD_LATENCY, COORD_MIN_EPOCH,
                           check_params, coord_level_bits, coord_passes)

__all__ = ["Coordinator", "walk_cycles"]


def walk_cycles(params):
    """Cycles of the walk when every tenant is active (the most it takes):
    ``coord_passes`` passes of ``N * (coord_level_bits + 2)`` cycles, then
    the write-out of ``N * C`` pairs and its pipeline stage's cycle. It
    starts in t_e + 2 and must end before the edge into t_a's predecessor,
    whose cycle reads the results."""
    n, c = params.tenants, params.channels
    return coord_passes(params) * n * (coord_level_bits(params) + 2) + n * c + 1


def _bit(m, vector, index, name):
    """Bit ``index`` of ``vector`` as a case statement (a variable shift
    would be as wide as ``vector``, which the lint reports as truncated)."""
    bit = Signal(name=name)
    with m.Switch(index):
        for e in range(len(vector)):
            with m.Case(e):
                m.d.comb += bit.eq(vector[e])
    return bit


class _State(enum.Enum, shape=3):
    """The walk's step: a tenant's load cycle (LOAD), the search of its
    water level (SEARCH) and its write cycle (WRITE); then the write-out of
    the results (OUT)."""
    IDLE = 0
    LOAD = 1
    SEARCH = 2
    WRITE = 3
    OUT = 4


class Coordinator(FabricComponent):
    """Per-(tenant, channel) rates from measured demand (spec §13).

    Parameters
    ----------
    params : :class:`kvfabric.spec.FabricParams`

    Members
    -------
    enable, enable_next, enable_after_next : ``In(1)``
        ``COORD.coord_enable`` in this cycle, in the next one and in the one
        after it (``enable_after_next`` is not used any more).
    floor : ``In(8)``
        ``COORD.coord_floor`` (UQ0.8) in this cycle.
    epoch_cycles : ``In(24)``
        ``COORD_EPOCH.coord_epoch_cycles`` in this cycle.
    tenant_cfg : ``In(tenant_config_layout(params)).array(tenants)``
        Active per-tenant configuration (``rate``, ``peak_rate``, ``enable``).
    rate_after_next, peak_rate_after_next : ``In(16).array(tenants)``
        The values the active ``rate``/``peak_rate`` have after the next two
        edges (after the next one when a COMMIT takes effect in this cycle).
    commit, commit_next : ``In(tenants)``
        Bit i: a COMMIT of tenant i takes effect in this cycle, in the next one.
    accepted : ``In(acceptance_layout(params)).array(channels)``
        Each channel's ingress register: a valid request accepted in the
        previous cycle, its tenant and bytes.
    queue_full : ``In(tenants).array(channels)``
        Each channel's ``queue_full`` (spec §2, from registers): read with
        ``accepted``, it says whether an acceptance left its tenant's queue
        full (the pair is backlogged, spec §13.4).
    rate, peak_rate : ``Out(16).array(channels, tenants)``
        ``rate[c][i]``: tenant i's refill rate on channel c, a register.

    Raises
    ------
    :exc:`ValueError`
        If the walk cannot end within COORD_LATENCY (no size of spec §1).
    """

    def __init__(self, params, *, walkers=None):
        check_params(params)
        if walk_cycles(params) > COORD_LATENCY - 2:
            raise ValueError(f"the coordinator's walk of {params.tenants} x {params.channels} takes "
                             f"{walk_cycles(params)} cycles, more than COORD_LATENCY - 2")
        n, c = params.tenants, params.channels
        super().__init__(params, {
            "enable":         In(1),
            "enable_next":    In(1),
            "enable_after_next": In(1),
            "floor":          In(COORD_FLOOR_BITS),
            "epoch_cycles":   In(COORD_EPOCH_BITS),
            "tenant_cfg":     In(tenant_config_layout(params)).array(n),
            "rate_after_next":      In(params.rate_bits).array(n),
            "peak_rate_after_next": In(params.peak_rate_bits).array(n),
            "commit":         In(n),
            "commit_next":    In(n),
            "accepted":       In(acceptance_layout(params)).array(c),
            "queue_full":     In(n).array(c),
            "rate":           Out(params.rate_bits).array(c, n),
            "peak_rate":      Out(params.peak_rate_bits).array(c, n),
        })

    def elaborate(self, platform):
        m = Module()
        epoch = self._epoch(m)
        mask, backlog = self._demand(m, epoch)
        snap = self._snapshot(m, epoch)
        results = self._walk(m, epoch, mask, backlog, snap)
        self._outputs(m, epoch, results)
        return m

    # --- epochs ---------------------------------------------------------------------------
    def _epoch(self, m):
        """The epoch counter, the end strobe and its one-cycle-late copy."""
        ec = Signal(COORD_EPOCH_BITS, name="coord_ec")
        last = Signal(COORD_EPOCH_BITS, name="coord_epoch_last")
        end = Signal(name="coord_epoch_end")
        m.d.comb += [
            last.eq(Mux(self.epoch_cycles > COORD_MIN_EPOCH, self.epoch_cycles - 1, COORD_MIN_EPOCH - 1)),
            end.eq(self.enable & (ec >= last)),
        ]
        with m.If(~self.enable | end):
            m.d.sync += ec.eq(0)
        with m.Else():
            m.d.sync += ec.eq(ec + 1)

        en_d = Signal(name="coord_enable_prev")
        end_d = Signal(name="coord_epoch_end_prev")
        m.d.sync += [en_d.eq(self.enable), end_d.eq(end)]
        return _Epoch(ec=ec, end=end, en_d=en_d, end_d=end_d)

    # --- demand ---------------------------------------------------------------------------
    def _demand(self, m, epoch):
        """Per channel, one bit per tenant for the epoch counting
        (``coord_dcount_<c>``), set by the channel's ingress register, and the
        bits of the last ended epoch (``coord_dwalk_<c>``), copied from them
        in t_e + 1 (with t_e's acceptance, which the ingress register shows
        then) while they restart; the walk reads the copy. The backlog bits
        (``coord_bcount_<c>``, ``coord_bwalk_<c>``) likewise, set by an
        acceptance whose tenant's ``queue_full`` is 1 beside it in a + 1:
        the request took the queue's last free slot and none left."""
        p = self.params
        n = p.tenants
        bits, backlog = [], []
        for c in range(p.channels):
            ev = self.accepted[c]
            hit = Cat(epoch.en_d & ev.valid & (ev.tenant == i) for i in range(n))
            for kind, new, out in (("d", hit, bits), ("b", hit & self.queue_full[c], backlog)):
                count = Signal(n, name=f"coord_{kind}count_{c}")
                walk = Signal(n, name=f"coord_{kind}walk_{c}")
                nxt = Signal(n, name=f"coord_{kind}next_{c}")
                m.d.comb += nxt.eq(count | new)
                with m.If(~epoch.en_d):
                    m.d.sync += count.eq(0)
                with m.Elif(epoch.end_d):
                    m.d.sync += [walk.eq(nxt), count.eq(0)]
                with m.Else():
                    m.d.sync += count.eq(nxt)
                out.append(walk)
        return bits, backlog

    # --- the values of t_e ----------------------------------------------------------------
    def _snapshot(self, m, epoch):
        """``coord_floor`` and every tenant's RATE and enable of t_e, held for the walk."""
        p = self.params
        floor = Signal(COORD_FLOOR_BITS, name="coord_snap_floor")
        rate = [Signal(p.rate_bits, name=f"coord_snap_rate_{i}") for i in range(p.tenants)]
        en = Signal(p.tenants, name="coord_snap_enable")
        with m.If(epoch.end):
            m.d.sync += floor.eq(self.floor)
            m.d.sync += [rate[i].eq(self.tenant_cfg[i].rate) for i in range(p.tenants)]
            m.d.sync += en.eq(Cat(self.tenant_cfg[i].enable for i in range(p.tenants)))
        return _Snapshot(floor=floor, rate=rate, enable=en)

    # --- the walk -------------------------------------------------------------------------
    def _walk(self, m, epoch, mask, backlog, snap):
        """The allocation's passes and the write-out; returns, per tenant, the
        read port of its result RAM."""
        p = self.params
        n, nc = p.tenants, p.channels
        lw = coord_level_bits(p)
        xw = lw                                     # x[i][c] <= max(RATE, the level) < 2^W
        # A channel's load: the sum of N allocations of W bits (a floor lifts
        # one above the level).
        ldw = (n * ((1 << lw) - 1)).bit_length()
        nw = ((nc << p.rate_bits) - 1).bit_length()  # a tenant's total C·(RATE - fr)
        passes = coord_passes(p)
        rmax = (1 << p.rate_bits) - 1
        pmax = (1 << p.peak_rate_bits) - 1

        state = Signal(_State, name="coord_state")
        pass_no = Signal(range(max(passes, 2)), name="coord_pass")
        ti = Signal(range(max(n, 2)), name="coord_tenant")
        ci = Signal(range(max(nc, 2)), name="coord_channel")
        hp = Signal(lw, name="coord_level")        # the largest level found whose fill is below the total
        probe = Signal(lw, name="coord_probe")     # one-hot: the level bit being decided
        load = [Signal(ldw, name=f"coord_load_{c}") for c in range(nc)]
        others = [Signal(ldw, name=f"coord_others_{c}") for c in range(nc)]   # load[c] - x[i][c]
        use = Signal(nc, name="coord_use")         # the tenant's channels (none when its total is 0)
        light = Signal(nc, name="coord_light")     # those where it is not backlogged: x >= RATE - fr
        lev = Signal(nc, name="coord_levelled")    # its backlogged ones, or all if none is

        # The tenant's values of t_e: RATE, enable, and the live PEAK_RATE for
        # the write-out (equal to t_e's unless a COMMIT discards the result).
        t_rate = Signal(p.rate_bits, name="coord_t_rate")
        t_en = Signal(name="coord_t_enable")
        t_peak_live = Signal(p.peak_rate_bits, name="coord_t_peak")
        with m.Switch(ti):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += [t_rate.eq(snap.rate[i]), t_en.eq(snap.enable[i]),
                                 t_peak_live.eq(self.tenant_cfg[i].peak_rate)]
        # The tenant's demand bits of the ended epoch, per channel.
        dem = Signal(nc, name="coord_demand_bits")
        m.d.comb += dem.eq(Cat(_bit(m, mask[c], ti, f"coord_dbit_{c}") for c in range(nc)))
        bkl = Signal(nc, name="coord_backlog_bits")
        m.d.comb += bkl.eq(Cat(_bit(m, backlog[c], ti, f"coord_bbit_{c}") for c in range(nc)))
        active = Signal(name="coord_active")
        m.d.comb += active.eq(t_en & dem.any())

        # fr = floor(f * RATE / 256) and the total to place g = C * (RATE - fr).
        # The product is a register (coord_floor_rate): it holds fr of the
        # previous cycle's tenant, which is this cycle's in SEARCH and WRITE
        # (the tenant is the one LOAD saw) and the write-out's pipeline stage
        # below (the pair registered in the previous cycle). So the multiply
        # is the only logic between coord_tenant and a register, and neither
        # the search nor the write-out waits for it (it was the top's longest
        # path on ECP5 and ASAP7). LOAD needs only whether the total is 0:
        # with f < 1 (UQ0.8), fr < RATE unless RATE = 0.
        fr_next = Signal(p.rate_bits, name="coord_floor_rate_next")
        m.d.comb += fr_next.eq((snap.floor * t_rate) >> COORD_FLOOR_BITS)
        fr = Signal(p.rate_bits, name="coord_floor_rate")
        m.d.sync += fr.eq(fr_next)
        unit = Signal(p.rate_bits, name="coord_even")   # RATE - fr, a light pair's lower bound
        m.d.comb += unit.eq(t_rate - fr)
        need = Signal(nw, name="coord_need")
        m.d.comb += need.eq(unit * nc)

        # The allocation RAMs: x[i][c] in channel c's, at address i.
        x_old = []
        x_wr = []
        for c in range(nc):
            mem = Memory(shape=xw, depth=n, init=[])
            m.submodules[f"coord_alloc_{c}"] = mem
            rp = mem.read_port(domain="comb")
            wp = mem.write_port()
            m.d.comb += [rp.addr.eq(ti), wp.addr.eq(ti)]
            x_old.append(rp.data)
            x_wr.append(wp)

        # The other tenants' load on each channel: the tenant's own allocation
        # taken out (none yet in the first pass).
        first = Signal(name="coord_first_pass")
        m.d.comb += first.eq(pass_no == 0)
        for c in range(nc):
            m.d.comb += others[c].eq(load[c] - Mux(first, 0, x_old[c]))

        # The fill at the level `cand`: sum over the tenant's channels of
        # max(lo[c], cand - o[c]) on a levelled channel, lo[c] on the others,
        # lo[c] = RATE - fr on a light channel, else 0.
        cand = Signal(lw, name="coord_cand")
        # In the write cycle the level h: one above the largest level whose fill
        # is below the total, or the highest level if even that one's is. The
        # search starts from hp = 0, as if the fill at 0 were below the total:
        # it is not only when the tenant is light on all C channels (their
        # lower bounds sum to C·(RATE - fr), the total), and then each x is
        # RATE - fr >= 1 at the levels 0 and 1 alike.
        m.d.comb += cand.eq(Mux(state == _State.WRITE, Mux(hp.all(), hp, hp + 1), hp | probe))
        pos = []
        for c in range(nc):
            diff = Signal(ldw + 1, name=f"coord_diff_{c}")
            above = Signal(lw, name=f"coord_above_{c}")   # max(0, cand - o[c]) < 2^W
            pc = Signal(lw, name=f"coord_fill_{c}")
            m.d.comb += [diff.eq(cand - others[c]),
                         above.eq(Mux(diff[ldw], 0, diff[:lw])),
                         pc.eq(Mux(use[c], Mux(light[c] & (~lev[c] | (above < unit)), unit, above), 0))]
            pos.append(pc)
        fill = Signal(lw + nc.bit_length(), name="coord_fill")
        m.d.comb += fill.eq(_tree_sum(pos))
        below = Signal(name="coord_below")
        m.d.comb += below.eq(fill < need)

        # The write-out: rate = min(max(fr + x, min(RATE, 1)), max),
        # peak = min(max(rate + PEAK_RATE - RATE, 0), max); the registers when inactive.
        # One pipeline stage: the OUT cycle of pair (i, c) registers x[i][c],
        # RATE_i, PEAK_RATE_i and whether i is active (coord_wo_*); the next
        # cycle computes the pair's rates from them and fr (then i's) and
        # writes them into i's result RAM. So the last pair is written one
        # cycle after the walk's OUT cycles (walk_cycles counts it).
        x_sel = Signal(xw, name="coord_x_sel")
        with m.Switch(ci):
            for c in range(nc):
                with m.Case(c):
                    m.d.comb += x_sel.eq(x_old[c])
        wo_valid = Signal(name="coord_wo_valid")
        wo_tenant = Signal.like(ti, name="coord_wo_tenant")
        wo_channel = Signal.like(ci, name="coord_wo_channel")
        wo_x = Signal(xw, name="coord_wo_x")
        wo_rate = Signal(p.rate_bits, name="coord_wo_rate")
        wo_peak = Signal(p.peak_rate_bits, name="coord_wo_peak")
        wo_active = Signal(name="coord_wo_active")
        m.d.sync += [wo_valid.eq(state == _State.OUT), wo_tenant.eq(ti), wo_channel.eq(ci), wo_x.eq(x_sel),
                     wo_rate.eq(t_rate), wo_peak.eq(t_peak_live), wo_active.eq(active)]
        r0 = Signal(xw + 1, name="coord_rate_sum")
        m.d.comb += r0.eq(fr + wo_x)
        r1 = Signal(p.rate_bits, name="coord_rate_out")
        m.d.comb += r1.eq(Mux(r0 > rmax, rmax, Mux(r0 == 0, wo_rate != 0, r0)))
        pk = Signal(range(-(1 << p.rate_bits), (1 << p.rate_bits) + (1 << p.peak_rate_bits)),
                    name="coord_peak_sum")
        m.d.comb += pk.eq(r1 + wo_peak - wo_rate)
        p1 = Signal(p.peak_rate_bits, name="coord_peak_out")
        m.d.comb += p1.eq(Mux(pk < 0, 0, Mux(pk > pmax, pmax, pk)))
        out_rate = Signal(p.rate_bits, name="coord_out_rate")
        out_peak = Signal(p.peak_rate_bits, name="coord_out_peak")
        m.d.comb += [out_rate.eq(Mux(wo_active, r1, wo_rate)), out_peak.eq(Mux(wo_active, p1, wo_peak))]

        results = []
        for i in range(n):
            mem = Memory(shape=p.rate_bits + p.peak_rate_bits, depth=nc, init=[])
            m.submodules[f"coord_result_{i}"] = mem
            wp = mem.write_port()
            rp = mem.read_port(domain="comb")
            m.d.comb += [wp.addr.eq(wo_channel), wp.data.eq(Cat(out_rate, out_peak)),
                         wp.en.eq(wo_valid & (wo_tenant == i))]
            results.append(rp)

        last_tenant = ti == n - 1
        last_pass = pass_no == passes - 1

        def next_tenant():
            with m.If(~last_tenant):
                m.d.sync += [ti.eq(ti + 1), state.eq(_State.LOAD)]
            with m.Elif(~last_pass):
                m.d.sync += [ti.eq(0), pass_no.eq(pass_no + 1), state.eq(_State.LOAD)]
            with m.Else():
                m.d.sync += [ti.eq(0), ci.eq(0), state.eq(_State.OUT)]

        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(epoch.end_d & self.enable):
                    m.d.sync += [state.eq(_State.LOAD), ti.eq(0), pass_no.eq(0)]
                    m.d.sync += [ld.eq(0) for ld in load]
            with m.Case(_State.LOAD):
                with m.If(active):
                    m.d.sync += [use.eq(Mux(t_rate == 0, 0, dem)), light.eq(dem & ~bkl),
                                 lev.eq(Mux((dem & bkl).any(), dem & bkl, dem)), hp.eq(0),
                                 probe.eq(1 << (lw - 1)), state.eq(_State.SEARCH)]
                with m.Else():
                    next_tenant()
            with m.Case(_State.SEARCH):
                with m.If(below):
                    m.d.sync += hp.eq(cand)
                m.d.sync += probe.eq(probe >> 1)
                with m.If(probe[0]):
                    m.d.sync += state.eq(_State.WRITE)
            with m.Case(_State.WRITE):
                for c in range(nc):
                    m.d.comb += [x_wr[c].data.eq(pos[c]), x_wr[c].en.eq(1)]
                    m.d.sync += load[c].eq(others[c] + pos[c])
                next_tenant()
            with m.Case(_State.OUT):
                with m.If(ci != nc - 1):
                    m.d.sync += ci.eq(ci + 1)
                with m.Elif(~last_tenant):
                    m.d.sync += [ci.eq(0), ti.eq(ti + 1)]
                with m.Else():
                    m.d.sync += state.eq(_State.IDLE)
        # Disabled: abandon the walk (its result is discarded).
        with m.If(~self.enable):
            m.d.sync += state.eq(_State.IDLE)
        return results

    # --- the rate registers ---------------------------------------------------------------
    def _outputs(self, m, epoch, results):
        """``rate``/``peak_rate`` registers: tenant i's on every channel from
        the register file when off or on a COMMIT (at the edge at which the
        active registers load), channel c's from the result RAMs at the edge
        into t_a + c for tenants whose result is still pending."""
        p = self.params
        n, nc = p.tenants, p.channels
        pending = Signal(name="coord_pending")
        keep = Signal(n, name="coord_keep")
        # Cycle t_a + c - 1 (ec = COORD_LATENCY - 1 + c) loads channel c at its
        # edge: `ach` counts the channels from the cycle ec = COORD_LATENCY - 1.
        applying = Signal(name="coord_applying")
        ach = Signal(range(max(nc, 2)), name="coord_apply_channel")
        m.d.comb += applying.eq(pending & self.enable & ((epoch.ec == COORD_LATENCY - 1) | (ach != 0)))
        with m.If(applying & (ach != nc - 1)):
            m.d.sync += ach.eq(ach + 1)
        with m.Else():
            m.d.sync += ach.eq(0)
        with m.If(~self.enable):
            m.d.sync += [pending.eq(0), keep.eq(0)]
        with m.Elif(epoch.end):
            # A COMMIT taking effect in t_e discards its tenant's result too.
            m.d.sync += [pending.eq(1), keep.eq(~self.commit)]
        with m.Else():
            with m.If(applying & (ach == nc - 1)):
                m.d.sync += pending.eq(0)
            m.d.sync += keep.eq(keep & ~self.commit)

        here = [Signal(name=f"coord_apply_{c}") for c in range(nc)]
        m.d.comb += [here[c].eq(applying & (ach == c)) for c in range(nc)]
        for i in range(n):
            cfg = self.tenant_cfg[i]
            preload = Signal(name=f"coord_preload_{i}")
            m.d.comb += preload.eq(self.commit[i] | ~self.enable_next)
            m.d.comb += results[i].addr.eq(ach)
            bus_rate = Signal(p.rate_bits, name=f"coord_bus_rate_{i}")
            bus_peak = Signal(p.peak_rate_bits, name=f"coord_bus_peak_{i}")
            # The active values of the next cycle: the staged ones a COMMIT of
            # this cycle copies (rate_after_next then), else the active ones.
            m.d.comb += [
                bus_rate.eq(Mux(preload, Mux(self.commit[i], self.rate_after_next[i], cfg.rate),
                                results[i].data[:p.rate_bits])),
                bus_peak.eq(Mux(preload, Mux(self.commit[i], self.peak_rate_after_next[i], cfg.peak_rate),
                                results[i].data[p.rate_bits:])),
            ]
            for c in range(nc):
                rate = Signal(p.rate_bits, name=f"coord_rate_{c}_{i}")
                peak = Signal(p.peak_rate_bits, name=f"coord_peak_rate_{c}_{i}")
                m.d.comb += [self.rate[c][i].eq(rate), self.peak_rate[c][i].eq(peak)]
                with m.If(preload | (here[c] & keep[i])):
                    m.d.sync += [rate.eq(bus_rate), peak.eq(bus_peak)]


def _tree_sum(values):
    """The sum of ``values`` as a balanced tree of adders."""
    values = list(values)
    while len(values) > 1:
        values = [values[k] + values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


@dataclass
class _Epoch:
    """The epoch counter and strobes (``end_d``, ``en_d``: the previous
    cycle's ``end`` and enable, for the demand bits, which see an acceptance
    one cycle late)."""

    ec: Signal
    end: Signal
    en_d: Signal
    end_d: Signal


@dataclass
class _Snapshot:
    """``coord_floor``, RATE and enable of t_e."""

    floor: Signal
    rate: list
    enable: Signal
