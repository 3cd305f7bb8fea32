"""Telemetry counters and snapshots (spec §9, §10).

Timing, exactly as spec §10 states it:

- A grant transferred on any channel in cycle t is registered per channel
  with its lateness (the ``tel_st_*`` registers, written at the end of t),
  summed over the channels by a second stage (the ``tel_sum_*`` registers,
  end of t+1) and added to the tenant's live ``bytes``, ``grants``,
  ``burst_grants`` and ``slo_violations`` counters at the end of t+2: the
  counters include it from cycle t+3. Its wait ``(t - ts) mod 2^TS_BITS`` is
  compared in cycle t with the tenant's ``slo_cycles`` active in cycle t.
- ``queue_hwm[i]`` at t+1 is the maximum of itself and tenant i's occupancy on
  every channel at t.
- ``dropped[c]`` counts the channel's drop strobe of cycle t from t+2 (the strobe is registered first).
- ``axi_unsupported[i]`` and ``axi_wlast_errors[i]`` are not counted here:
  they are the AXI4 front end's live counters (spec §14.6), inputs, 0 in a
  fabric without the front end; a snapshot copies them like the others.
- A snapshot in cycle t copies every live counter's value at t into the
  snapshot registers read over AXI, and increments ``EPOCH_COUNT``, both
  visible from t+1. It happens when the epoch counter is at least
  ``E - 1`` with ``E`` the ``epoch_cycles`` input of cycle t-1 (the counter
  then restarts at 0), or when ``snapshot``
  is 1 (the cycle after a ``CTRL`` write with bit 1 set, see
  :mod:`hw.config`); both in one cycle make one snapshot. With
  ``E = 0`` the epoch counter stays at 0. So a write of ``EPOCH_CYCLES``
  taking effect in cycle t governs the epochs from t+2, one cycle after the
  channels use a configuration write (spec §9, §10).

All counters are free running and wrap at their width. The read decode is
elaborated from the register description (:data:`kvfabric.regmap.REGMAP`):
every snapshot or counter register, each field the value of its name (from bit
``kvf_value_lsb``) of the tenant or channel of its block element. Register
names start with ``tel_``: the state-budget script classifies flip-flops by name.
"""

import operator

from amaranth import *
from amaranth.lib import data
from amaranth.lib.wiring import In, Out

from .config import ADDR_WIDTH, DATA_WIDTH, FabricComponent, is_telemetry_register
from .layouts import Kind, tenant_config_layout
from .keys import sum_mod
from .readpipe import pipelined_read
from kvfabric.regmap import REGMAP
from kvfabric.spec import check_params


__all__ = ["BYTES_BITS", "COUNT_BITS", "AXI_ERROR_BITS", "telemetry_registers", "grant_event_layout", "Telemetry"]

#: Width of the per-tenant byte counters.
BYTES_BITS = 48
#: Width of the grant, burst grant, SLO violation, drop and epoch counters.
COUNT_BITS = 32
#: Width of the AXI4 front end's per-tenant error counters (``TEL.AXI_ERRORS``).
AXI_ERROR_BITS = 16


def telemetry_registers(params=None):
    """``(address, block, index, register)`` telemetry decodes (snapshots and counters)."""
    return [entry for entry in REGMAP.registers(params) if is_telemetry_register(entry[3])]


def grant_event_layout(params):
    """What telemetry sees of one channel's grant port in a cycle.

    ``valid`` is the transfer (``grant.valid & grant.ready``); ``ts`` is the
    granted request's arrival timestamp (``ChannelArbiter.grant_ts``).
    """
    check_params(params)
    return data.StructLayout({
        "valid":  1,
        "tenant": params.tenant_bits,
        "bytes":  params.bytes_bits,
        "kind":   Kind,
        "ts":     params.ts_bits,
    })


def _tree(values, op):
    # Balanced reduction: log2(n) adder/comparator levels instead of n.
    values = list(values)
    while len(values) > 1:
        values = [op(values[k], values[k + 1]) if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


def _max(a, b):
    return Mux(a > b, a, b)


class Telemetry(FabricComponent):
    """Per-tenant and per-channel counters with AXI-readable snapshots.

    Parameters
    ----------
    params : :class:`hw.params.FabricParams`
        Fabric parameters.

    Members
    -------
    grants : ``In(grant_event_layout(params)).array(channels)``
        Grant transfers of every channel.
    now : ``In(ts_bits)``
        Fabric timestamp, cycle count modulo ``2^TS_BITS``.
    tenant_cfg : ``In(tenant_config_layout(params)).array(tenants)``
        Active configuration (``slo_cycles`` is used).
    occupancy : ``In(range(queue_depth + 1)).array(channels, tenants)``
        ``occupancy[c][i]``, spec §4.
    dropped : ``In(1).array(channels)``
        1 in the cycle a channel accepts an invalid request.
    epoch_cycles : ``In(32)``
        Snapshot period, 0 = off: the ``EPOCH_CYCLES`` register. The epoch
        rule of cycle t uses its value of cycle t-1 (spec §10).
    snapshot : ``In(1)``
        Take a snapshot this cycle.
    axi_unsupported, axi_wlast_errors : ``In(16).array(tenants)``
        The AXI4 front end's live counters of tenant i (spec §14.6): bursts
        answered SLVERR as unsupported, W beats with a wrong WLAST. Left
        undriven (0) in a fabric without the front end.
    r_addr : ``In(16)``
        Register bus read address.
    r_data : ``Out(32)``
        Read data, one cycle after ``r_addr``: in cycle s+1 the word at the
        ``r_addr`` of cycle s, with the values of cycle s (:mod:`hw.readpipe`);
        0 for addresses that are not telemetry registers.

    Raises
    ------
    :exc:`TypeError`
        If ``params`` is not a :class:`hw.params.FabricParams`.
    """
    def __init__(self, params):
        check_params(params)
        super().__init__(params, {
            "grants":       In(grant_event_layout(params)).array(params.channels),
            "now":          In(params.ts_bits),
            "tenant_cfg":   In(tenant_config_layout(params)).array(params.tenants),
            "occupancy":    In(range(params.queue_depth + 1)).array(params.channels,
                                                                    params.tenants),
            "dropped":      In(1).array(params.channels),
            "epoch_cycles": In(params.epoch_bits),
            "snapshot":     In(1),
            "axi_unsupported":  In(AXI_ERROR_BITS).array(params.tenants),
            "axi_wlast_errors": In(AXI_ERROR_BITS).array(params.tenants),
            "r_addr":       In(ADDR_WIDTH),
            "r_data":       Out(DATA_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        N, C = p.tenants, p.channels

        # Cycle t: per channel, is the transfer late for its tenant's SLO?
        # wait = (now - ts) mod 2^T > slo, without the subtraction in front of
        # the comparison (issue #42: the two carry chains and the sum over
        # the channels were the 8 x 8 top's telemetry path): with
        # y = now - ts - slo - 1 (one carry-save sum and one carry chain,
        # T + 2 bits), wait > slo is y >= 0 when now >= ts, and
        # y + 2^T >= 0 when now < ts (wait = now - ts + 2^T), whose sign is
        # y[T+1] ^ y[T] (slo < 2^T: y + 2^T fits in T + 2 bits). The
        # comparison now < ts runs beside the sum.
        T = p.ts_bits
        assert p.slo_bits <= T
        late = []
        for c, g in enumerate(self.grants):
            slo = Array(cfg.slo_cycles for cfg in self.tenant_cfg)[g.tenant]
            slo_sel = Signal(p.slo_bits, name=f"tel_slo_{c}")
            m.d.comb += slo_sel.eq(slo)
            # slo, behind the tenant's multiplexer, enters the carry-save
            # tree last (sum_mod adds its operands in order).
            y = sum_mod(m, f"tel_late_diff_{c}", [self.now], [g.ts, Const(1, 1), slo_sel], T + 2)
            wrapped = Signal(name=f"tel_wrapped_{c}")
            m.d.comb += wrapped.eq(self.now < g.ts)
            is_late = Signal(name=f"tel_late_{c}")
            m.d.comb += is_late.eq(Mux(wrapped, ~(y[T + 1] ^ y[T]), ~y[T + 1]))
            late.append(is_late)

        # Stage 1 registers (cycle t+1): per channel, the transfer's fields,
        # its tenant one-hot and whether it is late (issue #42: the lateness
        # sign behind the SLO multiplexer and a count over the channels behind
        # it were the 8 x 8 top's longest path, logic that grows with C).
        st_hit, st_bytes, st_burst, st_late = [], [], [], []
        for c, g in enumerate(self.grants):
            hit = Signal(N, name=f"tel_st_hit_{c}")
            nbytes = Signal.like(g.bytes, name=f"tel_st_bytes_{c}")
            burst = Signal(name=f"tel_st_burst_{c}")
            slow = Signal(name=f"tel_st_late_{c}")
            m.d.sync += [hit.eq(Cat(g.valid & (g.tenant == i) for i in range(N))), nbytes.eq(g.bytes),
                         burst.eq(g.kind == Kind.BURST), slow.eq(late[c])]
            st_hit.append(hit)
            st_bytes.append(nbytes)
            st_burst.append(burst)
            st_late.append(slow)

        # Stage 2 registers (cycle t+2): per-tenant sums over the channels.
        # At most C grants of at most LMAX bytes per cycle.
        sum_bytes = [Signal(range(C * p.max_request_bytes + 1), name=f"tel_sum_bytes_{i}")
                     for i in range(N)]
        sum_grants = [Signal(range(C + 1), name=f"tel_sum_grants_{i}") for i in range(N)]
        sum_burst = [Signal(range(C + 1), name=f"tel_sum_burst_{i}") for i in range(N)]
        sum_late = [Signal(range(C + 1), name=f"tel_sum_late_{i}") for i in range(N)]
        for i in range(N):
            hit = [st_hit[c][i] for c in range(C)]
            m.d.sync += [
                sum_bytes[i].eq(_tree((Mux(hit[c], st_bytes[c], 0) for c in range(C)), operator.add)),
                sum_grants[i].eq(_tree(hit, operator.add)),
                sum_burst[i].eq(_tree((hit[c] & st_burst[c] for c in range(C)), operator.add)),
                sum_late[i].eq(_tree((hit[c] & st_late[c] for c in range(C)), operator.add)),
            ]

        # Live counters.
        live_bytes  = [Signal(BYTES_BITS, name=f"tel_bytes_{i}") for i in range(N)]
        live_grants = [Signal(COUNT_BITS, name=f"tel_grants_{i}") for i in range(N)]
        live_burst  = [Signal(COUNT_BITS, name=f"tel_burst_grants_{i}") for i in range(N)]
        live_late   = [Signal(COUNT_BITS, name=f"tel_slo_violations_{i}") for i in range(N)]
        # Occupancy never exceeds D, so the marks are as wide as an occupancy;
        # QUEUE_HWM zero-extends them to its 8 bits.
        live_hwm    = [Signal(range(p.queue_depth + 1), name=f"tel_queue_hwm_{i}") for i in range(N)]
        live_drop   = [Signal(COUNT_BITS, name=f"tel_dropped_{c}") for c in range(C)]
        for i in range(N):
            hwm = _tree([live_hwm[i]] + [self.occupancy[c][i] for c in range(C)], _max)
            m.d.sync += [
                live_bytes[i].eq(live_bytes[i] + sum_bytes[i]),
                live_grants[i].eq(live_grants[i] + sum_grants[i]),
                live_burst[i].eq(live_burst[i] + sum_burst[i]),
                live_late[i].eq(live_late[i] + sum_late[i]),
                live_hwm[i].eq(hwm),
            ]
        # The drop strobe is registered before it is counted (a drop at t counts
        # from t+2, spec §10): the strobe is decided late in its cycle (it
        # depends on the request the channel is offered), and a 32-bit
        # increment enabled by a late signal was the AXI4 top's longest path.
        for c in range(C):
            strobe = Signal(name=f"tel_drop_strobe_{c}")
            m.d.sync += strobe.eq(self.dropped[c])
            with m.If(strobe):
                m.d.sync += live_drop[c].eq(live_drop[c] + 1)

        # Epoch counter and snapshots (spec §10). The epoch rule of cycle t
        # uses E(t), the EPOCH_CYCLES register's value of cycle t-1, so that
        # whether cycle t ends an epoch is itself a register (tel_epoch_end),
        # computed in cycle t-1 from registers: the register's value then is
        # E(t), the counter's next value ctr(t) is 0 after a restart, else
        # ctr + 1. The counter is kept plus one (tel_epoch_ctr = ctr + 1,
        # reset 1), so that "ctr >= E - 1" is "tel_epoch_ctr >= E" and no
        # decrement of E lies before the comparison. The snapshot registers
        # and EPOCH_COUNT are enabled by registers only.
        epoch_ctr   = Signal(p.epoch_bits, name="tel_epoch_ctr", init=1)
        epoch_on    = Signal(name="tel_epoch_on")    # E(t) != 0
        epoch_end   = Signal(name="tel_epoch_end")   # cycle t ends an epoch
        epoch_count = Signal(COUNT_BITS, name="tel_epoch_count")
        ctr_next    = Signal(p.epoch_bits, name="tel_epoch_ctr_next")
        # ctr + 1 never wraps: a counter at 2^32 - 1 is >= every E != 0 (the
        # epoch ends) and E = 0 restarts it.
        m.d.comb += ctr_next.eq(Mux(~epoch_on | epoch_end, 1, epoch_ctr + 1))
        m.d.sync += [
            epoch_ctr.eq(ctr_next),
            epoch_on.eq(self.epoch_cycles.any()),
            # `>=` rather than `==`: lowering EPOCH_CYCLES below the running
            # count ends the epoch at once instead of after a 2^32-cycle wrap.
            epoch_end.eq(self.epoch_cycles.any() & (ctr_next >= self.epoch_cycles)),
        ]

        snap_bytes  = [Signal(BYTES_BITS, name=f"tel_snap_bytes_{i}") for i in range(N)]
        snap_grants = [Signal(COUNT_BITS, name=f"tel_snap_grants_{i}") for i in range(N)]
        snap_burst  = [Signal(COUNT_BITS, name=f"tel_snap_burst_grants_{i}") for i in range(N)]
        snap_late   = [Signal(COUNT_BITS, name=f"tel_snap_slo_violations_{i}") for i in range(N)]
        snap_hwm    = [Signal(range(p.queue_depth + 1), name=f"tel_snap_queue_hwm_{i}")
                       for i in range(N)]
        snap_drop   = [Signal(COUNT_BITS, name=f"tel_snap_dropped_{c}") for c in range(C)]
        snap_unsup  = [Signal(AXI_ERROR_BITS, name=f"tel_snap_axi_unsupported_{i}") for i in range(N)]
        snap_wlast  = [Signal(AXI_ERROR_BITS, name=f"tel_snap_axi_wlast_errors_{i}") for i in range(N)]
        with m.If(epoch_end | self.snapshot):
            m.d.sync += epoch_count.eq(epoch_count + 1)
            for snap, live in ((snap_bytes, live_bytes), (snap_grants, live_grants),
                               (snap_burst, live_burst), (snap_late, live_late),
                               (snap_hwm, live_hwm), (snap_drop, live_drop),
                               (snap_unsup, self.axi_unsupported), (snap_wlast, self.axi_wlast_errors)):
                m.d.sync += [s.eq(v) for s, v in zip(snap, live)]

        # Reads: each field of a telemetry register is the value of its name
        # (per tenant or per channel, by its block), from bit kvf_value_lsb.
        values = {
            "bytes": snap_bytes, "grants": snap_grants, "burst_grants": snap_burst,
            "slo_violations": snap_late, "queue_hwm": snap_hwm, "dropped": snap_drop,
            "axi_unsupported": snap_unsup, "axi_wlast_errors": snap_wlast,
            "epoch_count": [epoch_count],
        }
        entries = []
        for addr, block, i, reg in telemetry_registers(p):
            word = Const(0, DATA_WIDTH)
            for f in reg.fields:
                if f.name not in values:
                    raise NameError(f"register {block.name}.{reg.name}: field {f.name!r} names "
                                    f"no telemetry value (known: {', '.join(values)})")
                value = Value.cast(values[f.name][i])
                bits = value[f.value_lsb:min(f.value_lsb + f.width, len(value))]
                word = word | (bits << f.lsb)[:DATA_WIDTH]
            entries.append((addr, block, i, reg, word))
        # r_data in cycle s+1: the word at r_addr of cycle s, values of cycle s.
        m.d.comb += self.r_data.eq(pipelined_read(m, self.r_addr, entries, name="tel_rd"))

        return m
