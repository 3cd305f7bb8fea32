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
already served. A backlogged pair keeps half its rate of the previous
result, at most the even split (damped descent): a guarantee leaves a
channel halving in each epoch, not at once.

Timing, exactly:

* Epoch counter ``coord_ec``: 1 in the first enabled cycle; the epoch ends in
  t_e when ``coord_ec >= E`` (E = max(``coord_epoch_cycles``,
  COORD_MIN_EPOCH)), and ``coord_ec`` is 1 again in t_e + 1.
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
  active tenant (enabled, with demand) taking two load cycles (its lower
  bounds, from its demand and backlog bits and its previous rates in the
  per-channel RAM ``coord_prev_<c>``, which the write-out writes; then the
  other tenants' loads on every channel, ``o[c] = load[c] - x[i][c]``), one cycle
  per bit of its water level (a binary search of the smallest level h whose
  fill reaches its total: over its channels, ``max(lo[c], h - o[c])`` on
  the levelled ones (its backlogged channels, or all of them if none is)
  and ``lo[c]`` on the others, lo[c] = RATE - fr on a light channel,
  min(p >> 1, RATE - fr) on a backlogged one, p its previous rate there;
  all channels in parallel) and a write cycle (``x[i][c]`` into the per-channel
  allocation RAM ``coord_alloc_<c>``, the loads updated); an inactive
  tenant takes two cycles (LOAD, SKIP); then it waits (WAIT) for the
  write-out (OUT), from t_a - 3 (t_a = t_e + 1 + COORD_LATENCY): one pair
  per cycle, tenant by tenant, its rate before the lower clamp into
  ``coord_prev_<c>`` one pipeline stage later, and its rate and peak rate
  two stages later straight into its registers.
* Pair (i, c)'s registers load the result at the edge into t_a + i·C + c:
  no copy of the results waits between the walk and the channels (issue
  #43's area: a per-tenant result RAM held them before, 2 x 16 bits per
  pair, as many as the registers). A COMMIT of tenant i loads tenant i's
  registers on every channel with the new RATE/PEAK_RATE at the edge at
  which the active registers take them and discards the rest of its result
  (one taking effect in t_e included); a cycle with the coordinator
  disabled loads every register from the active ones and discards every
  pending result (so a disable taking effect in t_e, too, discards t_e's
  result).
* Every ``rate``/``peak_rate`` register loads one value per tenant, the
  tenant's bus (shared by its channels): the register file's RATE/PEAK_RATE
  of the next cycle while it is being reloaded from them, the write-out's
  pair otherwise. So a register costs a flip-flop with a clock enable and
  no multiplexer of its own.

Area: the walk's datapath (C gap registers, each with one stepper, and a
carry-save sum) is shared by every tenant; what grows with N x C is
the rate registers, the demand bits and the two RAMs (allocation and
previous rates).

All state is named ``coord_*``: the state-budget script reports it as its
own category.
"""

from dataclasses import dataclass

from amaranth.hdl import C, Cat, Module, Mux, Signal, Value
from amaranth.lib import enum
from amaranth.lib.memory import Memory

from amaranth.lib.wiring import In, Out

from .config import FabricComponent
from .keys import _priority_marked, or_all, sum_mod
from .layouts import acceptance_layout, tenant_config_layout
from kvfabric.spec import (ARRIVAL_PRIO_BITS, COORD_EPOCH_BITS, COORD_FLOOR_BITS, COORD_LATENCY, COORD_MIN_EPOCH,
                           check_params, coord_level_bits, coord_passes)

__all__ = ["Coordinator", "walk_cycles"]


def walk_cycles(params):
    """Cycles of the walk when every tenant is active (the most it takes):
    ``coord_passes`` passes of ``N * (coord_level_bits + 3)`` cycles, and
    the write-out of ``N * C`` pairs and its two pipeline stages' cycles.
    The passes start in t_e + 2; the write-out starts in t_a - 3, so the
    walk fits its latency when this is at most COORD_LATENCY - 2 (spec
    §13.2's passes keep the write-out's cycles in hand)."""
    n, c = params.tenants, params.channels
    return coord_passes(params) * n * (coord_level_bits(params) + 3) + n * c + 2


def _popcount(m, name, bits):
    """The number of 1s among ``bits``, an adder tree of pairs."""
    vals = [Value.cast(b) for b in bits]
    level = 0
    while len(vals) > 1:
        nxt = []
        for k in range(0, len(vals) - 1, 2):
            s = Signal(len(vals[k]) + 1, name=f"{name}_{level}_{k // 2}")
            m.d.comb += s.eq(vals[k] + vals[k + 1])
            nxt.append(s)
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
        level += 1
    out = Signal(len(bits).bit_length(), name=name)
    m.d.comb += out.eq(vals[0])
    return out


def _place(value, onehot, width):
    """``value * onehot`` for a one-hot (or zero) ``onehot``: ``value``
    shifted to its 1 bit, an OR of ANDs per bit (no multiplier)."""
    return or_all(Mux(onehot[j], value << j, 0) for j in range(len(onehot)))[:width]


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
    """The walk's step: a tenant's two load cycles (LOAD: its lower bounds;
    BASE: the loads without it), the search of its water level (SEARCH)
    and its write cycle (WRITE), or an inactive tenant's second cycle
    (SKIP: a visit lasts two cycles at least, the time the next tenant's
    RATE - fr takes); then the wait for t_a - 3 (WAIT) and the write-out
    of the results (OUT)."""
    IDLE = 0
    LOAD = 1
    SEARCH = 2
    WRITE = 3
    OUT = 4
    SKIP = 5
    BASE = 6
    WAIT = 7


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
    arrival_prio : ``In(4)``
        ``CREDITS.arrival_prio`` in this cycle: a tenant whose priority it
        marks (latency-bound, spec §6.2) has no backlogged pair (§13.4); read
        in t_e with the other values of the epoch's end.
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
            "arrival_prio":   In(ARRIVAL_PRIO_BITS),
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
        # coord_ec counts the epoch's cycles, this one included (1 in the
        # first enabled cycle): the end test ec >= max(epoch_cycles, MIN) is
        # then two comparisons of registers, ec >= epoch_cycles and
        # ec >= MIN, with no decrement and no multiplexer of the configured
        # length in front of them (issue #42: the end strobe loads every
        # snapshot register, and the path from coord_epoch_cycles through
        # the decrement was the coordinator's longest at 8 x 8).
        ec = Signal(COORD_EPOCH_BITS, name="coord_ec")
        end = Signal(name="coord_epoch_end")
        m.d.comb += end.eq(self.enable & (ec >= self.epoch_cycles) & (ec >= COORD_MIN_EPOCH))
        with m.If(~self.enable | end):
            m.d.sync += ec.eq(1)
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
        the request took the queue's last free slot and none left. A
        latency-bound tenant's backlog bits (``coord_snap_latency``, its
        priority arrival-ordered in t_e) are masked where the walk reads
        them: its pairs are light."""
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
        """``256 - coord_floor`` and every tenant's RATE and enable of t_e,
        held for the walk. The walk needs the floor only as the part of a
        tenant's RATE it levels, RATE - fr = ceil((256 - f) * RATE / 256),
        so the snapshot holds 256 - f (9 bits) and that part is one product
        with no subtraction behind it."""
        p = self.params
        cofloor = Signal(COORD_FLOOR_BITS + 1, name="coord_snap_cofloor")
        rate = [Signal(p.rate_bits, name=f"coord_snap_rate_{i}") for i in range(p.tenants)]
        en = Signal(p.tenants, name="coord_snap_enable")
        latency = Signal(p.tenants, name="coord_snap_latency")
        with m.If(epoch.end):
            m.d.sync += latency.eq(Cat(_priority_marked(m, f"coord_latency_mark_{i}", self.tenant_cfg[i].priority,
                                                        self.arrival_prio, ARRIVAL_PRIO_BITS)
                                       for i in range(p.tenants)))
            m.d.sync += cofloor.eq((1 << COORD_FLOOR_BITS) - self.floor)
            m.d.sync += [rate[i].eq(self.tenant_cfg[i].rate) for i in range(p.tenants)]
            m.d.sync += en.eq(Cat(self.tenant_cfg[i].enable for i in range(p.tenants)))
        return _Snapshot(cofloor=cofloor, rate=rate, enable=en, latency=latency)

    # --- the walk -------------------------------------------------------------------------
    def _walk(self, m, epoch, mask, backlog, snap):
        """The allocation's passes and the write-out; returns the write-out's
        second stage (:class:`_WriteOut`), which the rate registers load.

        Every path of the walk starts and ends in registers of its own and
        holds one multiply or at most two carry chains (issue #42's ASAP7
        ruler): the search
        runs on per-tenant values that the tenant's first cycle (LOAD) or
        the cycle before it registered, not on ``coord_tenant``'s
        multiplexers and the allocation RAM's read."""
        p = self.params
        n, nc = p.tenants, p.channels
        lw = coord_level_bits(p)
        xw = lw                                     # x[i][c] <= max(RATE, the level) < 2^W
        # A channel's load: the sum of N allocations of W bits (a floor lifts
        # one above the level).
        ldw = (n * ((1 << lw) - 1)).bit_length()
        nw = ((nc << p.rate_bits) - 1).bit_length()  # a tenant's total C·(RATE - fr)
        fw = (nc * ((1 << lw) - 1)).bit_length()     # the levelled part of a fill
        passes = coord_passes(p)
        rmax = (1 << p.rate_bits) - 1
        pmax = (1 << p.peak_rate_bits) - 1

        state = Signal(_State, name="coord_state")
        pass_no = Signal(range(max(passes, 2)), name="coord_pass")
        ti = Signal(range(max(n, 2)), name="coord_tenant")
        ti_next = Signal.like(ti, name="coord_tenant_next")   # its value after the edge
        m.d.comb += ti_next.eq(ti)
        m.d.sync += ti.eq(ti_next)
        ci = Signal(range(max(nc, 2)), name="coord_channel")
        hp = Signal(lw, name="coord_level")        # the largest level found whose fill is below the total
        hi = Signal(lw, name="coord_level_up")     # the least probed level whose fill reaches it (or 2^W - 1)
        probe = Signal(lw, name="coord_probe")     # one-hot: the level bit being decided
        # Channel c's load, the sum of its allocations; from a LOAD to its
        # tenant's WRITE the other tenants' load plus the tenant's lower bound
        # there, b[c] = load[c] - x[i][c] + lo[c].
        load = [Signal(ldw, name=f"coord_load_{c}") for c in range(nc)]
        # Per channel, from LOAD to WRITE: the tenant's lower bound lo[c]
        # (RATE - fr on a light pair, the damped floor on a backlogged one).
        low = [Signal(p.rate_bits, name=f"coord_lo_{c}") for c in range(nc)]
        lev = Signal(nc, name="coord_levelled")    # the channels it levels (backlogged, or all if none is)
        sw = max(fw, nw) + 1                        # the search's sum, signed: fill and rest < 2^max(fw, nw)
        # minus the rest of the total: sum lo - C·(RATE - fr), the sum's start
        minus_rest = Signal(sw, name="coord_minus_rest")

        # The tenant's values of t_e: RATE, enable, and the live PEAK_RATE for
        # the write-out (equal to t_e's unless a COMMIT discards the result).
        t_rate = Signal(p.rate_bits, name="coord_t_rate")
        t_en = Signal(name="coord_t_enable")
        t_peak_live = Signal(p.peak_rate_bits, name="coord_t_peak")
        t_latency = Signal(name="coord_t_latency")   # latency-bound in t_e: no backlogged pair (§13.4)
        with m.Switch(ti):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += [t_rate.eq(snap.rate[i]), t_en.eq(snap.enable[i]),
                                 t_latency.eq(snap.latency[i]),
                                 t_peak_live.eq(self.tenant_cfg[i].peak_rate)]
        # The tenant's demand bits of the ended epoch, per channel.
        dem = Signal(nc, name="coord_demand_bits")
        m.d.comb += dem.eq(Cat(_bit(m, mask[c], ti, f"coord_dbit_{c}") for c in range(nc)))
        bkl = Signal(nc, name="coord_backlog_bits")
        m.d.comb += bkl.eq(Cat(_bit(m, backlog[c], ti, f"coord_bbit_{c}") & ~t_latency for c in range(nc)))
        active = Signal(name="coord_active")
        m.d.comb += active.eq(t_en & dem.any())

        # unit = RATE - fr (fr = floor(f * RATE / 256)), a light pair's lower
        # bound, and the total to place C * unit. LOAD already needs unit, so
        # it is computed one tenant ahead: `coord_next_rate` holds the RATE of
        # the tenant after coord_tenant (of tenant 0 from t_e + 1, when the
        # snapshot is not loaded yet: the register file's), and `coord_even`
        # takes its product at the edge at which coord_tenant advances (`adv`).
        # A tenant's visit lasts two cycles at least (an inactive one's LOAD
        # and SKIP), so the next RATE is registered when the product uses it.
        # The product is thus the only logic between two registers, and
        # coord_tenant's multiplexer is not in front of it (the multiply was
        # the top's longest path on ECP5 and, behind that multiplexer, too
        # long for issue #42's ASAP7 ruler).
        nxt_rate = Signal(p.rate_bits, name="coord_next_rate")
        with m.If(epoch.end):
            m.d.sync += nxt_rate.eq(self.tenant_cfg[0].rate)
        with m.Else():
            # The tenant after coord_tenant's next value: in the write-out of a
            # single channel coord_tenant advances in every cycle.
            with m.Switch(ti_next):
                for i in range(n):
                    with m.Case(i):
                        m.d.sync += nxt_rate.eq(snap.rate[(i + 1) % n])
        unit = Signal(p.rate_bits, name="coord_even")
        adv = Signal(name="coord_advance")
        with m.If(adv):
            m.d.sync += unit.eq((snap.cofloor * nxt_rate + ((1 << COORD_FLOOR_BITS) - 1)) >> COORD_FLOOR_BITS)

        # The allocation RAMs: x[i][c] in channel c's, at address i. The
        # previous-rate RAMs (damped descent, spec §13.5): the rates the walk
        # computed, min(fr + x[i][c], 2^16 - 1) before the write-out's lower
        # clamp (0 for an inactive tenant), written by the write-out (one
        # adder for all pairs, not one per channel in the last pass), so that
        # every pass of the next walk reads p[i][c], the previous epoch's
        # rate. `coord_prev_valid`: they hold a finished walk's rates since
        # the coordinator was last turned on.
        x_old = []
        x_wr = []
        p_old = []
        p_wr = []
        for c in range(nc):
            # Channels 2k and 2k + 1's RAMs read and write at coord_tenant,
            # from a copy of it of their own (issue #42: one address decode
            # driving all 2 C RAMs' read multiplexers was a chain of buffers
            # on ASAP7). Equal
            # to coord_tenant in every cycle. coord_tenant holds in LOAD,
            # BASE and SEARCH, so copy k takes coord_tenant itself rather
            # than its next value in the states of a set of its own (the
            # subsets of the three, by the bits of k): no two copies are the
            # same logic, and synthesis keeps them apart (a copy that held
            # its own value instead would be a clock enable, the same for all).
            if c % 2 == 0:
                k = c // 2
                addr = Signal.like(ti, name=f"coord_tenant_copy_{k}")
                held = [s for b, s in enumerate((_State.LOAD, _State.BASE, _State.SEARCH)) if (k % 8) >> b & 1]
                same = Cat(*(state == s for s in held)).any() if held else C(0, 1)
                m.d.sync += addr.eq(Mux(same, ti, ti_next))
            for name, olds, wrs in (("alloc", x_old, x_wr), ("prev", p_old, p_wr)):
                mem = Memory(shape=xw, depth=n, init=[])
                m.submodules[f"coord_{name}_{c}"] = mem
                rp = mem.read_port(domain="comb")
                wp = mem.write_port()
                m.d.comb += rp.addr.eq(addr)
                if name == "alloc":
                    # (The previous rates are written by the write-out's
                    # second stage, at its registered pair: below.)
                    m.d.comb += wp.addr.eq(addr)
                olds.append(rp.data)
                wrs.append(wp)
        prev_valid = Signal(name="coord_prev_valid")

        # LOAD: the lower bounds, lo[c] = unit on a light channel,
        # min(p[i][c] >> 1, unit) on a backlogged one (0 without a previous
        # walk; the sign of one subtraction per channel chooses), 0 outside
        # the set. BASE: b[c] = load[c] - x[i][c] + lo[c] (the tenant's own
        # allocation taken out, none yet in the first pass) into the load
        # register itself and the gap register (below), as one carry-save
        # sum, and the rest of the total, C·unit - sum lo, negated, as another.
        first = Signal(name="coord_first_pass")
        m.d.comb += first.eq(pass_no == 0)
        lite_now = Signal(nc, name="coord_light_next")
        m.d.comb += lite_now.eq(dem & ~bkl)
        lo_next = []
        for c in range(nc):
            half = Signal(xw - 1, name=f"coord_half_{c}")
            over = Signal(name=f"coord_over_{c}")         # half > unit: the floor is unit
            damp = Signal(name=f"coord_damped_{c}")
            m.d.comb += [half.eq(p_old[c][1:]), over.eq(half > unit),
                         damp.eq(prev_valid & dem[c] & bkl[c])]
            lo_c = Signal(p.rate_bits, name=f"coord_lo_next_{c}")
            m.d.comb += lo_c.eq(Mux(lite_now[c] | (damp & over), unit, Mux(damp, half, 0)))
            lo_next.append(lo_c)
        base_next = []
        for c in range(nc):
            xm = Signal(xw, name=f"coord_own_{c}")
            m.d.comb += xm.eq(Mux(first, 0, x_old[c]))
            base_next.append(sum_mod(m, f"coord_base_next_{c}", [load[c], low[c]], [xm], ldw))
        minus_rest_next = sum_mod(m, "coord_minus_rest_next", list(low), [unit * nc], sw)

        # The fill at the level `cand` (SEARCH: hp with the probed bit; WRITE:
        # the level h, the least one whose fill reaches the total). On a
        # levelled channel x = max(lo, cand - o) = lo + max(0, cand - b), on
        # the others lo (or 0, the tenant's total being 0); so the fill
        # reaches the total exactly when sum over the levelled channels of
        # max(0, cand - b) reaches `rest`: a carry-save sum whose sign decides
        # (no comparison with the lower bound, no multiplexer of the tenant
        # in between).
        #
        # h: the search starts from hp = 0, as if the fill at 0 were below the
        # total (it is not only when the tenant is light on all C channels,
        # and then each x is RATE - fr >= 1 at the levels 0 and 1 alike), and
        # sets the bits of the largest level whose fill is below it; h is one
        # above it, or the highest level if it is that one. `coord_level_up`
        # holds it without an incrementer: it starts at 2^W - 1 and takes
        # every probed level whose fill reaches the total (each one below the
        # previous such); hp + 1 is the one probed at hp's lowest 0 bit.
        # `coord_writing` is 1 exactly in WRITE: a register.
        #
        # No subtraction lies in front of the sum (issues #42 and #43: the C
        # subtractions cand - b[c] did, and the sum grows with C; registering
        # the differences themselves cost two steppers per channel, over the
        # area target). Each channel keeps its gap u[c] = b[c] - hp in a
        # register, `coord_gap_<c>`: BASE loads b[c] (hp = 0), and a SEARCH
        # cycle whose fill is below the total (hp takes the probed bit)
        # subtracts the probe, one stepper computed from registers while the
        # sum decides. The probed level cand = hp + 2^k is above b[c] exactly
        # when u[c] < 2^k: u[c] negative, or no bit of it at k or above (a
        # mask, `coord_probe_mask`, holds the bits from k up); that test is a
        # register too, `coord_above_<c>`, computed for both of the next
        # cycle's values of u[c] and chosen with them. Its excess
        # cand - b[c] = 2^k - u[c] is, for 0 <= u[c] < 2^k, the bits of
        # ~u[c] below k plus 1 (no carry either), and for
        # u[c] < 0 (a channel the level has passed), 2^k + ~u[c] + 1 with
        # ~u[c] = -u[c] - 1 < 2^W. The sum takes those bits of every channel
        # above the level, a 1 for each (one-bit addends of the tree), and
        # the passed channels' count times 2^k: `coord_passed` counts them in
        # a register (u[c] only falls, so it is 0 from BASE and takes the
        # count of the stepped values when the probe's fill is below the
        # total), placed at the probed bit by the one-hot probe.
        writing = Signal(name="coord_writing")
        m.d.sync += writing.eq((state == _State.SEARCH) & probe[0] & self.enable)
        cand = Signal(lw, name="coord_cand")
        m.d.comb += cand.eq(Mux(writing, hi, hp | probe))
        mask = Signal(ldw, name="coord_probe_mask")    # bits k and up (all of them in WRITE)
        mask_next = Signal(ldw, name="coord_probe_mask_next")
        m.d.comb += mask_next.eq(mask | (mask >> 1))
        # In WRITE the probe register holds h - hp, 1 unless hp is the
        # highest level (then h = hp): the last probe sets it (hp is the
        # highest level when that probe's fill is below the total and hp's
        # other bits are all 1). So the stepper gives u[c] - (h - hp) = b - h.
        step_top = Signal(name="coord_step_top")   # a fill below the total now leaves hp the highest level
        m.d.comb += step_top.eq(probe[0] & hp[1:].all())
        above = []
        gaps = []
        excess = []
        for c in range(nc):
            u = Signal(ldw + 1, name=f"coord_gap_{c}")
            up = Signal(name=f"coord_above_{c}")      # cand > b[c] on a levelled channel
            # cand - b[c] - 1, less 2^k if u[c] < 0 (below 2^W either way)
            inv = Signal(lw, name=f"coord_gap_inv_{c}")
            m.d.comb += inv.eq(Mux(up, ~u[:lw] & Mux(u[ldw], (1 << lw) - 1, ~mask[:lw]), 0))
            excess.append(inv)
            above.append(up)
            gaps.append(u)
        passed = Signal(range(nc + 1), name="coord_passed")
        placed = Signal(sw, name="coord_passed_placed")   # passed * 2^k
        m.d.comb += placed.eq(_place(passed, probe, sw))
        # sum over the channels above the level of (cand - b[c]), less the
        # rest: negative, the fill is below the total (the channels' 1s are
        # one-bit addends of the tree)
        short = sum_mod(m, "coord_short", [*excess, minus_rest, placed], [], sw, ones=above)
        below = Signal(name="coord_below")
        m.d.comb += below.eq(short[-1])
        gap_step = []
        above_below = []   # coord_above_<c> of the next cycle if the fill is below the total
        above_hold = []    # ... and if it reaches it
        for c, u in enumerate(gaps):
            st = Signal(ldw + 1, name=f"coord_gap_step_{c}")
            m.d.comb += st.eq(u - probe)
            gap_step.append(st)
            ab = Signal(name=f"coord_above_below_{c}")
            ah = Signal(name=f"coord_above_hold_{c}")
            m.d.comb += [ab.eq(lev[c] & (st[ldw] | ~(st[:ldw] & mask_next).any())),
                         ah.eq(lev[c] & (u[ldw] | ~(u[:ldw] & mask_next).any()))]
            above_below.append(ab)
            above_hold.append(ah)
        passed_step = _popcount(m, "coord_passed_step", [lev[c] & st[ldw] for c, st in enumerate(gap_step)])

        # WRITE: x = lo + max(0, h - b) = max(lo, h - o) < 2^W on a levelled
        # channel, lo on the others, and the load b + max(0, h - b) =
        # max(b, h) on a levelled channel, b on the others. In WRITE the
        # probe register holds d = h - hp, 0 or 1 (above), and the gap
        # u[c] = b - hp, so h - b = d - u[c] = ~u[c] + 1 + d < 2^W where h is
        # above b, which is where u[c] < d: u[c] negative, or 0 with d = 1.
        # Both are read from registers, not from the stepper u[c] - d
        # (issue #42: the stepper's carry chain in front of the sum's was the
        # coordinator's longest path): one carry-save level and one chain.
        last_pass = pass_no == passes - 1
        x_new = []
        raised = []
        d = probe[0]
        for c, u in enumerate(gaps):
            r = Signal(name=f"coord_raised_{c}")    # h > b[c] on a levelled channel
            m.d.comb += r.eq(lev[c] & (u[ldw] | (d & ~u.any())))
            raised.append(r)
            x_new.append(sum_mod(m, f"coord_x_new_{c}", [low[c], Mux(r, ~u[:xw], 0), r & d], [],
                                 xw, ones=[r]))

        # The write-out: rate = min(max(fr + x, min(RATE, 1)), max),
        # peak = min(max(rate + PEAK_RATE - RATE, 0), max); RATE and PEAK_RATE
        # when inactive. Two pipeline stages. The OUT cycle of pair (i, c)
        # reads x[i][c] (0 for an inactive tenant) and registers it with the
        # tenant's base, fr = RATE - unit (RATE when inactive; `coord_even`
        # follows the tenant in OUT as in the passes), whether RATE is 0 and
        # PEAK_RATE - RATE (coord_wo0_*): the allocation RAM's read and the
        # channel's multiplexer, which grows with C, end in registers
        # (issue #42: with the sum behind them, the write-out was the 8 x 8
        # top's second longest path). The next cycle adds base and x,
        # saturates, writes the sum into the previous-rate RAM at the
        # registered pair (0 for an inactive tenant) and registers the rate
        # and the gap (coord_wo_*); the cycle after adds those, clamps the
        # peak, and pair (i, c)'s registers load both at its edge. So the
        # last pair loads two cycles after the walk's OUT cycles (walk_cycles
        # counts them).
        x_sel = Signal(xw, name="coord_x_sel")
        with m.Switch(ci):
            for c in range(nc):
                with m.Case(c):
                    m.d.comb += x_sel.eq(x_old[c])
        s_valid = Signal(name="coord_wo0_valid")
        s_tenant = Signal.like(ti, name="coord_wo0_tenant")
        s_channel = Signal.like(ci, name="coord_wo0_channel")
        s_x = Signal(xw, name="coord_wo0_x")
        s_base = Signal(p.rate_bits, name="coord_wo0_base")
        s_nonzero = Signal(name="coord_wo0_rate_nonzero")
        s_active = Signal(name="coord_wo0_active")
        s_gap = Signal(range(-(1 << p.rate_bits), 1 << p.peak_rate_bits), name="coord_wo0_gap")
        m.d.sync += [s_valid.eq(state == _State.OUT), s_tenant.eq(ti), s_channel.eq(ci),
                     s_x.eq(Mux(active, x_sel, 0)), s_base.eq(Mux(active, t_rate - unit, t_rate)),
                     s_nonzero.eq(t_rate != 0), s_active.eq(active), s_gap.eq(t_peak_live - t_rate)]
        fx_sum = Signal(xw + 1, name="coord_fx_sum")
        m.d.comb += fx_sum.eq(s_base + s_x)
        fx = Signal(xw, name="coord_fx")    # min(fr + x, 2^W - 1); RATE when inactive
        m.d.comb += fx.eq(Mux(fx_sum[xw], rmax, fx_sum[:xw]))
        for c in range(nc):
            m.d.comb += [p_wr[c].addr.eq(s_tenant), p_wr[c].data.eq(Mux(s_active, fx, 0)),
                         p_wr[c].en.eq(s_valid & (s_channel == c))]
        wo_valid = Signal(name="coord_wo_valid")
        wo_tenant = Signal.like(ti, name="coord_wo_tenant")
        wo_channel = Signal.like(ci, name="coord_wo_channel")
        wo_rate = Signal(p.rate_bits, name="coord_wo_rate")
        wo_gap = Signal.like(s_gap, name="coord_wo_gap")
        # An inactive tenant's fx is RATE itself, 0 exactly when RATE is.
        m.d.sync += [wo_valid.eq(s_valid), wo_tenant.eq(s_tenant), wo_channel.eq(s_channel),
                     wo_rate.eq(Mux(fx == 0, s_nonzero, fx)), wo_gap.eq(s_gap)]
        pk = Signal(range(-(1 << p.rate_bits), (1 << p.rate_bits) + (1 << p.peak_rate_bits)),
                    name="coord_peak_sum")
        m.d.comb += pk.eq(wo_rate + wo_gap)
        out_peak = Signal(p.peak_rate_bits, name="coord_out_peak")
        m.d.comb += out_peak.eq(Mux(pk < 0, 0, Mux(pk > pmax, pmax, pk)))

        # The write-out's pair, rate and peak rate in the cycle after its OUT
        # cycle: the rate registers of that pair load them at its edge (§13.5).
        written = _WriteOut(valid=wo_valid, tenant=wo_tenant, channel=wo_channel, rate=wo_rate, peak=out_peak)

        last_tenant = ti == n - 1

        def next_tenant():
            m.d.comb += adv.eq(1)
            with m.If(~last_tenant):
                m.d.comb += ti_next.eq(ti + 1)
                m.d.sync += state.eq(_State.LOAD)
            with m.Elif(~last_pass):
                m.d.comb += ti_next.eq(0)
                m.d.sync += [pass_no.eq(pass_no + 1), state.eq(_State.LOAD)]
            with m.Else():
                m.d.comb += ti_next.eq(0)
                m.d.sync += [ci.eq(0), state.eq(_State.WAIT)]

        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(epoch.end_d & self.enable):
                    m.d.comb += adv.eq(1)
                    m.d.comb += ti_next.eq(0)
                    m.d.sync += [state.eq(_State.LOAD), pass_no.eq(0)]
                    m.d.sync += [ld.eq(0) for ld in load]
            with m.Case(_State.LOAD):
                with m.If(active):
                    # No channel is levelled when the total is 0 (RATE = 0).
                    use_next = Mux(t_rate == 0, 0, dem)
                    m.d.sync += [lo.eq(v) for lo, v in zip(low, lo_next)]
                    m.d.sync += [lev.eq(use_next & Mux((dem & bkl).any(), dem & bkl, dem)), state.eq(_State.BASE)]
                with m.Else():
                    m.d.sync += state.eq(_State.SKIP)
            with m.Case(_State.BASE):
                m.d.sync += [ld.eq(b) for ld, b in zip(load, base_next)]
                m.d.sync += [u.eq(b) for u, b in zip(gaps, base_next)]
                first_mask = ((1 << ldw) - 1) & ~((1 << (lw - 1)) - 1)
                m.d.sync += [mask.eq(first_mask), passed.eq(0)]
                # b[c] >= 0 is above 2^(W-1) unless its bits from W-1 up are 0
                m.d.sync += [up.eq(lev[c] & ~(b & first_mask).any())
                             for c, (up, b) in enumerate(zip(above, base_next))]
                m.d.sync += [minus_rest.eq(minus_rest_next), hp.eq(0), hi.eq((1 << lw) - 1),
                             probe.eq(1 << (lw - 1)),
                             state.eq(_State.SEARCH)]
            with m.Case(_State.SKIP):
                next_tenant()
            with m.Case(_State.SEARCH):
                with m.If(below):
                    m.d.sync += hp.eq(cand)
                with m.Else():
                    m.d.sync += hi.eq(cand)
                m.d.sync += probe.eq(probe >> 1)
                m.d.sync += [u.eq(Mux(below, st, u)) for u, st in zip(gaps, gap_step)]
                m.d.sync += passed.eq(Mux(below, passed_step, passed))
                m.d.sync += [up.eq(Mux(below, ab, ah)) for up, ab, ah in zip(above, above_below, above_hold)]
                m.d.sync += mask.eq(mask | (mask >> 1))
                with m.If(probe[0]):
                    m.d.sync += [state.eq(_State.WRITE), probe.eq(~(below & step_top))]
            with m.Case(_State.WRITE):
                for c in range(nc):
                    m.d.comb += [x_wr[c].data.eq(x_new[c]), x_wr[c].en.eq(1)]
                    m.d.sync += load[c].eq(Mux(raised[c], cand, load[c]))
                next_tenant()
            with m.Case(_State.WAIT):
                # The first pair's OUT cycle is t_a - 3 (ec = COORD_LATENCY - 2,
                # ec being 1 in t_e + 1): its registers load at the edge into t_a.
                with m.If(epoch.ec == COORD_LATENCY - 3):
                    m.d.sync += state.eq(_State.OUT)
            with m.Case(_State.OUT):
                with m.If(ci != nc - 1):
                    m.d.sync += ci.eq(ci + 1)
                with m.Elif(~last_tenant):
                    m.d.comb += adv.eq(1)
                    m.d.comb += ti_next.eq(ti + 1)
                    m.d.sync += ci.eq(0)
                with m.Else():
                    m.d.sync += [state.eq(_State.IDLE), prev_valid.eq(1)]
        # Disabled: abandon the walk (its result is discarded) and forget the
        # previous rates.
        with m.If(~self.enable):
            m.d.sync += [state.eq(_State.IDLE), prev_valid.eq(0)]
        return written

    # --- the rate registers ---------------------------------------------------------------
    def _outputs(self, m, epoch, written):
        """``rate``/``peak_rate`` registers: tenant i's on every channel from
        the register file when off or on a COMMIT (at the edge at which the
        active registers load), pair (i, c)'s from the write-out at the edge
        into t_a + i·C + c while tenant i's result is kept."""
        p = self.params
        n, nc = p.tenants, p.channels
        keep = Signal(n, name="coord_keep")
        with m.If(~self.enable):
            m.d.sync += keep.eq(0)
        with m.Elif(epoch.end):
            # A COMMIT taking effect in t_e discards its tenant's result too.
            m.d.sync += keep.eq(~self.commit)
        with m.Else():
            m.d.sync += keep.eq(keep & ~self.commit)

        here = [Signal(name=f"coord_apply_{c}") for c in range(nc)]
        m.d.comb += [here[c].eq(written.valid & self.enable & (written.channel == c)) for c in range(nc)]
        for i in range(n):
            cfg = self.tenant_cfg[i]
            preload = Signal(name=f"coord_preload_{i}")
            mine = Signal(name=f"coord_apply_tenant_{i}")
            m.d.comb += [preload.eq(self.commit[i] | ~self.enable_next),
                         mine.eq(keep[i] & (written.tenant == i))]
            bus_rate = Signal(p.rate_bits, name=f"coord_bus_rate_{i}")
            bus_peak = Signal(p.peak_rate_bits, name=f"coord_bus_peak_{i}")
            # The active values of the next cycle: the staged ones a COMMIT of
            # this cycle copies (rate_after_next then), else the active ones.
            m.d.comb += [
                bus_rate.eq(Mux(preload, Mux(self.commit[i], self.rate_after_next[i], cfg.rate), written.rate)),
                bus_peak.eq(Mux(preload, Mux(self.commit[i], self.peak_rate_after_next[i], cfg.peak_rate),
                                written.peak)),
            ]
            for c in range(nc):
                rate = Signal(p.rate_bits, name=f"coord_rate_{c}_{i}")
                peak = Signal(p.peak_rate_bits, name=f"coord_peak_rate_{c}_{i}")
                m.d.comb += [self.rate[c][i].eq(rate), self.peak_rate[c][i].eq(peak)]
                with m.If(preload | (here[c] & mine)):
                    m.d.sync += [rate.eq(bus_rate), peak.eq(bus_peak)]


@dataclass
class _WriteOut:
    """The write-out's second stage: the pair whose registers load at this
    cycle's edge (``valid``), its rate and peak rate."""

    valid: Signal
    tenant: Signal
    channel: Signal
    rate: Signal
    peak: Signal


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
    """256 - ``coord_floor``, RATE, enable and whether latency-bound, of t_e."""

    cofloor: Signal
    rate: list
    enable: Signal
    latency: Signal
