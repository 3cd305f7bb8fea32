"""Coordinator of the per-channel rates (spec §13, issue #27).

Every channel refills tenant i's buckets with its own ``rate[c][i]`` and
``peak_rate[c][i]`` registers. With the coordinator off they follow the
active ``RATE_i``/``PEAK_RATE_i`` (loaded at the same edge as the active
registers, so they are equal in every cycle). With it on, every epoch of E
cycles measures each tenant's demand on each channel and, ``COORD_LATENCY``
cycles after the epoch's end, splits the tenant's total rate over the
channels in proportion to it (keeping ``coord_floor`` of the even share
everywhere).

Timing, exactly:

* Epoch counter ``coord_ec``: 0 in the first enabled cycle; the epoch ends in
  t_e when ``coord_ec >= E - 1`` (E = max(``coord_epoch_cycles``,
  COORD_MIN_EPOCH)), and ``coord_ec`` is 0 again in t_e + 1.
* Demand: a valid request accepted on channel c in an enabled cycle a adds
  ``ceil(bytes / TAG_UNIT)`` to ``d[i][c]`` of a's epoch. The acceptance is
  read from the channel's ingress register in a + 1 (a register, so the
  coordinator adds no load to the channel's request port); the counters of
  an epoch are complete from t_e + 2. They live in two banks per channel
  (a small RAM, ``coord_demand_<c>``): the ended epoch's bank is read by the
  datapath while the next epoch counts into the other. Each entry has a
  valid bit (``coord_dvalid_<c>``) so that a bank is cleared at once.
* ``coord_floor`` of t_e is held in ``coord_snap_floor``; RATE, PEAK_RATE
  and enable are read live (a COMMIT that changes them discards the
  tenant's result, so a result that applies saw the values of t_e).
* From t_e + 2 one serial datapath (two on the largest fabrics, each
  taking every other tenant) walks the tenants: the sum of the
  tenant's demand over the channels, ``floor(f * RATE / 256)`` and the same
  of PEAK_RATE on the multiplier, then per channel the share
  ``q = floor(Q * d / S)`` on a restoring divider (:func:`walk_plan`'s quotient
  bits per cycle, the fewest that fit the schedule in COORD_LATENCY), the
  two products on the multiplier and the rounding; each result goes to the
  pair's staging registers ``coord_staged_*``.
* At the edge into t_a = t_e + 1 + COORD_LATENCY every ``rate``/``peak_rate``
  register of a tenant whose result is still pending loads its staging
  register. A COMMIT of tenant i (any time) loads tenant i's registers with
  the new RATE/PEAK_RATE at the edge at which the active registers take them
  and discards its pending result (one taking effect in t_e included); a
  cycle with the coordinator disabled loads every register from the active
  ones and discards every pending result (so a disable taking effect in t_e,
  too, discards t_e's result).
* Every ``rate``/``peak_rate`` register loads only its staging register, so
  that it costs a flip-flop with a clock enable and no multiplexer (one
  LUT per bit otherwise: 2,048 at 8 x 8). The values a COMMIT or a disable
  loads go through the staging registers one cycle earlier: the register
  file gives the active RATE/PEAK_RATE and the enable two edges ahead
  (``rate_after_next``, ``enable_after_next``, from the register bus's
  write of this cycle), and a tenant whose COMMIT takes effect next cycle,
  or every tenant while the coordinator is off after the next edge, has its
  staging registers loaded with them, overriding the walker's result (which
  that COMMIT or disable discards). The choice between the walker's result
  and the register file's value is one per tenant, shared by its channels.

Area: the datapath is shared by every pair; what grows with N x C is the
demand RAM and the staging and output registers (flip-flops with a clock
enable).

All state is named ``coord_*``: the state-budget script reports it as its
own category.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import enum
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import FabricComponent
from .layouts import acceptance_layout, tenant_config_layout
from kvfabric.spec import (COORD_DEMAND_BITS, COORD_EPOCH_BITS, COORD_FLOOR_BITS, COORD_LATENCY,
                           COORD_MIN_EPOCH, COORD_Q_BITS, check_params)

__all__ = ["Coordinator", "schedule_cycles", "walk_plan"]

#: Quotient bits of q = floor(Q * d / S) for d <= S: q <= Q.
_Q_DIGITS = COORD_Q_BITS + 1


def _ceil_div(a, b):
    return -(-a // b)


def schedule_cycles(tenants, channels, steps, walkers=1):
    """Cycles the datapath takes for one epoch's result with ``steps``
    quotient bits per cycle and ``walkers`` copies of it (each walks every
    ``walkers``-th tenant): per tenant max(C, 2) cycles of sums and floor
    products, then per channel a load, the division, two products and the
    rounding."""
    per_pair = 1 + _ceil_div(_Q_DIGITS, steps) + 3
    return _ceil_div(tenants, walkers) * (max(channels, 2) + channels * per_pair)


def walk_plan(tenants, channels, walkers=None):
    """``(walkers, steps)``: the fewest copies of the datapath, then the
    fewest quotient bits per cycle, whose walk ends before the result is due
    (started in t_e + 2, staged by the edge into t_e + COORD_LATENCY, the
    cycle whose edge loads the rate registers). One walker, the serial
    datapath, up to about 200 tenant-channel pairs; a second one for the
    largest fabrics. ``walkers`` fixes their number.

    Raises
    ------
    :exc:`ValueError`
        If ``walkers`` walkers cannot fit the walk.
    """
    for w in ([walkers] if walkers is not None else range(1, tenants + 1)):
        for steps in range(1, _Q_DIGITS + 1):
            if schedule_cycles(tenants, channels, steps, w) <= COORD_LATENCY - 2:
                return w, steps
    raise ValueError(f"{walkers} coordinator walker(s) cannot walk {tenants} x {channels} "
                     f"(tenant, channel) pairs within COORD_LATENCY = {COORD_LATENCY} cycles")


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
    """The walk's step: sums and floor products of a tenant (SUM), then per
    channel the demand read (LOAD), the division, the two products and the
    peak's rounding (FIN)."""
    IDLE = 0
    SUM = 1
    LOAD = 2
    DIV = 3
    MUL_RATE = 4
    MUL_PEAK = 5
    FIN = 6


class Coordinator(FabricComponent):
    """Per-(tenant, channel) rates from measured demand (spec §13).

    Parameters
    ----------
    params : :class:`kvfabric.spec.FabricParams`
    walkers : int or None
        Copies of the datapath; None: the fewest that fit (:func:`walk_plan`).

    Members
    -------
    enable, enable_next, enable_after_next : ``In(1)``
        ``COORD.coord_enable`` in this cycle, in the next one and in the one
        after it.
    floor : ``In(8)``
        ``COORD.coord_floor`` (UQ0.8) in this cycle.
    epoch_cycles : ``In(24)``
        ``COORD_EPOCH.coord_epoch_cycles`` in this cycle.
    tenant_cfg : ``In(tenant_config_layout(params)).array(tenants)``
        Active per-tenant configuration (``rate``, ``peak_rate``, ``enable``).
    rate_after_next, peak_rate_after_next : ``In(16).array(tenants)``
        The values the active ``rate``/``peak_rate`` have after the next two
        edges.
    commit, commit_next : ``In(tenants)``
        Bit i: a COMMIT of tenant i takes effect in this cycle, in the next one.
    accepted : ``In(acceptance_layout(params)).array(channels)``
        Each channel's ingress register: a valid request accepted in the
        previous cycle, its tenant and bytes.
    rate, peak_rate : ``Out(16).array(channels, tenants)``
        ``rate[c][i]``: tenant i's refill rate on channel c, a register.

    Raises
    ------
    :exc:`ValueError`
        If ``walkers`` copies of the datapath cannot walk the tenant-channel
        pairs within COORD_LATENCY (:func:`walk_plan`).
    """

    def __init__(self, params, *, walkers=None):
        check_params(params)
        self._walkers, self._steps = walk_plan(params.tenants, params.channels, walkers)
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
            "rate":           Out(params.rate_bits).array(c, n),
            "peak_rate":      Out(params.peak_rate_bits).array(c, n),
        })

    @property
    def walkers(self):
        """Copies of the datapath (:func:`walk_plan`)."""
        return self._walkers

    @property
    def div_steps(self):
        """Quotient bits each divider computes per cycle."""
        return self._steps

    def elaborate(self, platform):
        m = Module()
        p = self.params
        epoch = self._epoch(m)
        demand = self._demand(m, epoch)
        floor = self._floor(m, epoch)
        staged_rate = [[Signal(p.rate_bits, name=f"coord_staged_rate_{i}_{c}") for c in range(p.channels)]
                       for i in range(p.tenants)]
        staged_peak = [[Signal(p.peak_rate_bits, name=f"coord_staged_peak_{i}_{c}")
                        for c in range(p.channels)] for i in range(p.tenants)]
        with m.If(epoch.end):
            m.d.sync += demand.bank.eq(epoch.bank)
        writes = [self._datapath(m, epoch, demand.ports[w], floor, list(range(w, p.tenants, self._walkers)),
                                 "" if self._walkers == 1 else f"_w{w}")
                  for w in range(self._walkers)]
        self._staging(m, writes, staged_rate, staged_peak)
        self._outputs(m, epoch, staged_rate, staged_peak)
        return m

    # --- epochs ---------------------------------------------------------------------------
    def _epoch(self, m):
        """The epoch counter, the end strobe and its one-cycle-late copy, and
        the bank the current cycle's acceptances count into."""
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

        bank = Signal(name="coord_bank")
        en_d = Signal(name="coord_enable_prev")
        end_d = Signal(name="coord_epoch_end_prev")
        bank_d = Signal(name="coord_bank_prev")
        with m.If(end):
            m.d.sync += bank.eq(~bank)
        m.d.sync += [en_d.eq(self.enable), end_d.eq(end), bank_d.eq(bank)]
        return _Epoch(ec=ec, end=end, bank=bank, en_d=en_d, end_d=end_d, bank_d=bank_d)

    # --- demand ---------------------------------------------------------------------------
    def _demand(self, m, epoch):
        """Per channel: the demand RAM (two banks of one counter per tenant)
        with one saturating adder, fed by the channel's ingress register, and
        one read port per walker of the datapath."""
        p = self.params
        n = p.tenants
        tb = max(1, (n - 1).bit_length())
        depth = 2 << tb
        dmax = (1 << COORD_DEMAND_BITS) - 1
        walkers = self._walkers
        sfx = ["" if walkers == 1 else f"_w{w}" for w in range(walkers)]
        rd_bank = Signal(name="coord_rd_bank")
        ports = [_ReadPort(tenant=Signal(tb, name=f"coord_rd_tenant{sfx[w]}"), data=[])
                 for w in range(walkers)]
        for c in range(p.channels):
            mem = Memory(shape=COORD_DEMAND_BITS, depth=depth, init=[])
            m.submodules[f"coord_demand_{c}"] = mem
            wp = mem.write_port()
            rmw = mem.read_port(domain="comb")
            valid = Signal(depth, name=f"coord_dvalid_{c}")
            ev = self.accepted[c]
            units = Signal(range((p.max_request_bytes >> p.tag_shift) + 2), name=f"coord_units_{c}")
            addr = Signal(tb + 1, name=f"coord_waddr_{c}")
            old = Signal(COORD_DEMAND_BITS, name=f"coord_dold_{c}")
            total = Signal(COORD_DEMAND_BITS + 1, name=f"coord_dsum_{c}")
            we = Signal(name=f"coord_dwe_{c}")
            m.d.comb += [
                units.eq((ev.bytes >> p.tag_shift) + (ev.bytes[:p.tag_shift] != 0)),
                addr.eq(Cat(ev.tenant[:tb], epoch.bank_d)),
                rmw.addr.eq(addr),
                old.eq(Mux(_bit(m, valid, addr, f"coord_dvalid_rmw_{c}"), rmw.data, 0)),
                total.eq(old + units),
                we.eq(epoch.en_d & ev.valid),
                wp.addr.eq(addr),
                wp.data.eq(Mux(total > dmax, dmax, total)),
                wp.en.eq(we),
            ]
            # Clear the bank that starts counting (or all of them while the
            # coordinator is off), then mark the entry written this cycle.
            with m.If(~epoch.en_d):
                m.d.sync += valid.eq(0)
            with m.Elif(epoch.end_d):
                half = Const((1 << (depth // 2)) - 1, depth)
                m.d.sync += valid.eq(Mux(epoch.bank_d, valid & ~half, valid & half))
            with m.If(we):
                for e in range(depth):
                    with m.If(addr == e):
                        m.d.sync += valid[e].eq(1)

            for w, port in enumerate(ports):
                dp = mem.read_port(domain="comb")
                raddr = Cat(port.tenant, rd_bank)
                d = Signal(COORD_DEMAND_BITS, name=f"coord_rd_data_{c}{sfx[w]}")
                m.d.comb += [dp.addr.eq(raddr),
                             d.eq(Mux(_bit(m, valid, raddr, f"coord_dvalid_rd_{c}{sfx[w]}"), dp.data, 0))]
                port.data.append(d)
        return _Demand(bank=rd_bank, ports=ports)

    # --- the values of t_e ----------------------------------------------------------------
    def _floor(self, m, epoch):
        """``coord_floor`` of t_e, held for the walk. RATE, PEAK_RATE and enable
        are read live instead: a COMMIT that changes them in t_e .. t_a - 1
        discards that tenant's result, so a result that applies was computed
        from the values of t_e."""
        floor = Signal(COORD_FLOOR_BITS, name="coord_snap_floor")
        with m.If(epoch.end):
            m.d.sync += floor.eq(self.floor)
        return floor

    # --- the serial datapath --------------------------------------------------------------
    def _datapath(self, m, epoch, demand, floor, tenants, sfx):
        """One walker: the tenants ``tenants`` in turn, through the read
        port ``demand``; returns its :class:`_Write` of the staging registers."""
        p = self.params
        n, nc = len(tenants), p.channels
        steps = self._steps
        div_cycles = _ceil_div(_Q_DIGITS, steps)
        sum_bits = (nc * ((1 << COORD_DEMAND_BITS) - 1)).bit_length()
        rem_bits = sum_bits + 1
        Q = 1 << COORD_Q_BITS
        rmax = (1 << p.rate_bits) - 1
        pmax = (1 << p.peak_rate_bits) - 1
        op_bits = max(p.rate_bits, p.peak_rate_bits)

        state = Signal(_State, name=f"coord_state{sfx}")
        ti = Signal(range(n), name=f"coord_tenant{sfx}")
        ci = Signal(range(max(nc, 2)), name=f"coord_channel{sfx}")
        step = Signal(range(div_cycles + 1), name=f"coord_div_step{sfx}")
        total = Signal(sum_bits, name=f"coord_sum{sfx}")
        rem = Signal(rem_bits, name=f"coord_rem{sfx}")
        q = Signal(_Q_DIGITS, name=f"coord_q{sfx}")
        fr = Signal(p.rate_bits, name=f"coord_floor_rate{sfx}")
        fp = Signal(p.peak_rate_bits, name=f"coord_floor_peak{sfx}")
        pool_r = Signal(p.rate_bits, name=f"coord_share_rate{sfx}")
        pool_p = Signal(p.peak_rate_bits, name=f"coord_share_peak{sfx}")
        prod = Signal(op_bits + _Q_DIGITS, name=f"coord_prod{sfx}")
        rate_res = Signal(p.rate_bits, name=f"coord_rate_result{sfx}")
        even = Signal(name=f"coord_even{sfx}")

        # The tenant's active RATE, PEAK_RATE and enable (see _floor).
        t_rate = Signal(p.rate_bits, name=f"coord_t_rate{sfx}")
        t_peak = Signal(p.peak_rate_bits, name=f"coord_t_peak{sfx}")
        t_en = Signal(name=f"coord_t_enable{sfx}")
        with m.Switch(ti):
            for j, i in enumerate(tenants):
                cfg = self.tenant_cfg[i]
                with m.Case(j):
                    m.d.comb += [t_rate.eq(cfg.rate), t_peak.eq(cfg.peak_rate), t_en.eq(cfg.enable)]

        # The demand the datapath reads: tenant ti of the ended epoch's bank, channel ci.
        d = Signal(COORD_DEMAND_BITS, name=f"coord_d{sfx}")
        # The walker's j-th tenant is tenants[0] + j * step (every walkers-th).
        stride = tenants[1] - tenants[0] if len(tenants) > 1 else 1
        m.d.comb += demand.tenant.eq(tenants[0] + ti * stride)
        with m.Switch(ci):
            for c in range(nc):
                with m.Case(c):
                    m.d.comb += d.eq(demand.data[c])

        # One multiplier: f * RATE, f * PEAK_RATE, (RATE - fr) * q, (PEAK_RATE - fp) * q.
        mul_a = Signal(op_bits, name=f"coord_mul_a{sfx}")
        mul_b = Signal(_Q_DIGITS, name=f"coord_mul_b{sfx}")
        mul = Signal(op_bits + _Q_DIGITS, name=f"coord_mul{sfx}")
        with m.Switch(state):
            with m.Case(_State.SUM):
                m.d.comb += [mul_a.eq(Mux(ci == 0, t_rate, t_peak)), mul_b.eq(floor)]
            with m.Case(_State.MUL_RATE):
                m.d.comb += [mul_a.eq(pool_r), mul_b.eq(q)]
            with m.Default():
                m.d.comb += [mul_a.eq(pool_p), mul_b.eq(q)]
        m.d.comb += mul.eq(mul_a * mul_b)

        # The divider: `steps` restoring steps per cycle on (rem, q); the
        # first step of a pair compares d itself (q's bit COORD_Q_BITS is
        # d == S), each later one the doubled remainder.
        # When `steps` does not divide the digits, the last cycle's surplus
        # steps pass their inputs through.
        r_v, q_v = rem, q
        for s in range(steps):
            ge = Signal(name=f"coord_div_ge_{s}{sfx}")
            m.d.comb += ge.eq(r_v >= total)
            r_sub = Signal(rem_bits, name=f"coord_div_rem_{s}{sfx}")
            m.d.comb += r_sub.eq(Mux(ge, r_v - total, r_v))
            r_n = Signal(rem_bits, name=f"coord_div_next_rem_{s}{sfx}")
            q_n = Signal(_Q_DIGITS, name=f"coord_div_next_q_{s}{sfx}")
            m.d.comb += [r_n.eq(r_sub << 1), q_n.eq(Cat(ge, q_v))]
            if div_cycles * steps > _Q_DIGITS and s >= _Q_DIGITS - (div_cycles - 1) * steps:
                active = Signal(name=f"coord_div_active_{s}{sfx}")
                m.d.comb += active.eq(step != div_cycles - 1)
                r_n, q_n = Mux(active, r_n, r_v), Mux(active, q_n, q_v)
            r_v, q_v = r_n, q_n

        # Rounding (spec §13): rate = min(max(fr + ceil(C (R - fr) q / Q),
        # min(R, 1)), max), peak = min(max(fp + floor(C (P - fp) q / Q), rate), max).
        scaled = Signal(len(prod) + nc.bit_length(), name=f"coord_scaled{sfx}")
        m.d.comb += scaled.eq(prod * nc)
        rate_sum = Signal(p.rate_bits + len(scaled) - COORD_Q_BITS + 1, name=f"coord_rate_sum{sfx}")
        m.d.comb += rate_sum.eq(fr + ((scaled + (Q - 1)) >> COORD_Q_BITS))
        rate_fin = Signal(p.rate_bits, name=f"coord_rate_final{sfx}")
        # A tenant with a rate keeps at least 1 on every channel, so that a
        # request on a channel without demand share still refills its buckets.
        rate_least = Signal(len(rate_sum), name=f"coord_rate_least{sfx}")
        m.d.comb += rate_least.eq(Mux((rate_sum == 0) & (t_rate != 0), 1, rate_sum))
        m.d.comb += rate_fin.eq(Mux(even, t_rate, Mux(rate_least > rmax, rmax, rate_least)))
        peak_sum = Signal(p.peak_rate_bits + len(scaled) - COORD_Q_BITS + 1, name=f"coord_peak_sum{sfx}")
        m.d.comb += peak_sum.eq(fp + (scaled >> COORD_Q_BITS))
        peak_max = Signal(len(peak_sum), name=f"coord_peak_max{sfx}")
        m.d.comb += peak_max.eq(Mux(peak_sum > rate_res, peak_sum, rate_res))
        peak_fin = Signal(p.peak_rate_bits, name=f"coord_peak_final{sfx}")
        m.d.comb += peak_fin.eq(Mux(even, t_peak, Mux(peak_max > pmax, pmax, peak_max)))

        write_rate = Signal(name=f"coord_write_rate{sfx}")
        write_peak = Signal(name=f"coord_write_peak{sfx}")

        last_channel = ci == nc - 1
        last_tenant = ti == n - 1
        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(epoch.end_d & self.enable):
                    m.d.sync += [state.eq(_State.SUM), ti.eq(0), ci.eq(0), total.eq(0)]
            with m.Case(_State.SUM):
                # Cycle ci: S += d[ti][ci]; cycles 0 and 1 take the floor
                # products f * RATE / 256 and f * PEAK_RATE / 256.
                m.d.sync += total.eq(total + d)
                with m.If(ci == 0):
                    m.d.sync += fr.eq(mul >> COORD_FLOOR_BITS)
                with m.If(ci == 1):
                    m.d.sync += fp.eq(mul >> COORD_FLOOR_BITS)
                with m.If(ci == max(nc, 2) - 1):
                    m.d.sync += [state.eq(_State.LOAD), ci.eq(0)]
                with m.Else():
                    m.d.sync += ci.eq(ci + 1)
            with m.Case(_State.LOAD):
                m.d.sync += [
                    even.eq(~t_en | (total == 0)),
                    rem.eq(d), q.eq(0), step.eq(0),
                    pool_r.eq(t_rate - fr), pool_p.eq(t_peak - fp),
                    state.eq(_State.DIV),
                ]
            with m.Case(_State.DIV):
                m.d.sync += [rem.eq(r_v), q.eq(q_v), step.eq(step + 1)]
                with m.If(step == div_cycles - 1):
                    m.d.sync += state.eq(_State.MUL_RATE)
            with m.Case(_State.MUL_RATE):
                m.d.sync += [prod.eq(mul), state.eq(_State.MUL_PEAK)]
            with m.Case(_State.MUL_PEAK):
                # The rate product is in `prod`: round it and stage it.
                m.d.comb += write_rate.eq(1)
                m.d.sync += [rate_res.eq(rate_fin), prod.eq(mul), state.eq(_State.FIN)]
            with m.Case(_State.FIN):
                m.d.comb += write_peak.eq(1)
                with m.If(~last_channel):
                    m.d.sync += [ci.eq(ci + 1), state.eq(_State.LOAD)]
                with m.Elif(~last_tenant):
                    m.d.sync += [ti.eq(ti + 1), ci.eq(0), total.eq(0), state.eq(_State.SUM)]
                with m.Else():
                    m.d.sync += state.eq(_State.IDLE)
        # Disabled: abandon the computation (its result is discarded).
        with m.If(~self.enable):
            m.d.sync += state.eq(_State.IDLE)
        return _Write(tenants=tenants, tenant=ti, channel=ci, rate=rate_fin, peak=peak_fin,
                      write_rate=write_rate, write_peak=write_peak)

    # --- the staging registers ------------------------------------------------------------
    def _staging(self, m, writes, staged_rate, staged_peak):
        """Each pair's staging registers: the walker's result for it, or,
        when tenant i's COMMIT takes effect in the next cycle or the
        coordinator is off after the next edge, the active RATE/PEAK_RATE of
        two edges ahead, which the rate registers load at the next edge (see
        :meth:`_outputs`). That value wins: the COMMIT or the disable
        discards the result."""
        p = self.params
        for w in writes:
            for j, i in enumerate(w.tenants):
                preload = Signal(name=f"coord_preload_{i}")
                m.d.comb += preload.eq(self.commit_next[i] | ~self.enable_after_next)
                # One choice per tenant, fanned out to its channels' registers.
                rate_in = Signal(p.rate_bits, name=f"coord_staging_rate_{i}")
                peak_in = Signal(p.peak_rate_bits, name=f"coord_staging_peak_{i}")
                m.d.comb += [rate_in.eq(Mux(preload, self.rate_after_next[i], w.rate)),
                             peak_in.eq(Mux(preload, self.peak_rate_after_next[i], w.peak))]
                for c in range(p.channels):
                    here = (w.tenant == j) & (w.channel == c)
                    with m.If(preload | (w.write_rate & here)):
                        m.d.sync += staged_rate[i][c].eq(rate_in)
                    with m.If(preload | (w.write_peak & here)):
                        m.d.sync += staged_peak[i][c].eq(peak_in)

    # --- the rate registers ---------------------------------------------------------------
    def _outputs(self, m, epoch, staged_rate, staged_peak):
        """``rate``/``peak_rate`` registers, each loading its staging register:
        when off or on a COMMIT (at the edge at which the active registers
        load, the values :meth:`_staging` put there a cycle before), and at
        the edge into t_a for tenants whose result is still pending."""
        p = self.params
        n = p.tenants
        pending = Signal(name="coord_pending")
        keep = Signal(n, name="coord_keep")
        apply = Signal(name="coord_apply")
        m.d.comb += apply.eq(pending & self.enable & (epoch.ec == COORD_LATENCY - 1))
        with m.If(~self.enable):
            m.d.sync += [pending.eq(0), keep.eq(0)]
        with m.Elif(epoch.end):
            # A COMMIT taking effect in t_e discards its tenant's result too.
            m.d.sync += [pending.eq(1), keep.eq(~self.commit)]
        with m.Else():
            with m.If(apply):
                m.d.sync += pending.eq(0)
            m.d.sync += keep.eq(keep & ~self.commit)

        for c in range(p.channels):
            for i in range(n):
                rate = Signal(p.rate_bits, name=f"coord_rate_{c}_{i}")
                peak = Signal(p.peak_rate_bits, name=f"coord_peak_rate_{c}_{i}")
                m.d.comb += [self.rate[c][i].eq(rate), self.peak_rate[c][i].eq(peak)]
                with m.If(~self.enable_next | self.commit[i] | (apply & keep[i])):
                    m.d.sync += [rate.eq(staged_rate[i][c]), peak.eq(staged_peak[i][c])]


@dataclass
class _Epoch:
    """The epoch counter and strobes (``end_d``, ``en_d``, ``bank_d``: the
    previous cycle's ``end``, enable and bank, for the demand counters, which
    see an acceptance one cycle late)."""

    ec: Signal
    end: Signal
    bank: Signal
    en_d: Signal
    end_d: Signal
    bank_d: Signal


@dataclass
class _Write:
    """A walker's write of the staging registers: its tenants, the pair it
    is at (index into ``tenants``, channel), its results and write strobes."""

    tenants: list
    tenant: Signal
    channel: Signal
    rate: Signal
    peak: Signal
    write_rate: Signal
    write_peak: Signal


@dataclass
class _ReadPort:
    """A walker's read port of the demand counters: tenant (input), each
    channel's counter of it in the bank being walked (0 if not written in
    that epoch)."""

    tenant: Signal
    data: list


@dataclass
class _Demand:
    """The bank the walkers read (input) and each walker's read port."""

    bank: Signal
    ports: list
