"""kvfabric top level: C arbitration channels, configuration and telemetry.

::

    req[c] ──► ChannelArbiter c ──► grant[c]        (c = 0 .. C-1)
                 ▲  ▲   │ dropped, occupancy, grant_ts
    now ─────────┤  │   ▼
    RegisterFile ┤  │ Telemetry
         │       │  └─ Coordinator ◄── ingress registers (demand)
         │       └──── rate[c][i], peak_rate[c][i] (registers)
         ▲                ▲ r_addr / r_data
         └── AXI4LiteSlave┘◄── s_axil

``now`` counts cycles since reset modulo ``2^TS_BITS`` (spec §6: ``now = t mod
2^TS_BITS`` with cycle 0 the first cycle with reset low) and is the one
timestamp of the fabric: every channel stamps its arrivals with it and
telemetry measures SLO waits with it. It is also an output so that test
benches and trace tools can line cycles up with the RTL.

Register bus reads are decoded by both the register file and telemetry; each
returns 0 for addresses it does not own, so their data is ORed.

Each channel refills its buckets with its own per-tenant rate and peak rate,
registers of the coordinator (spec §13; the active RATE/PEAK_RATE while it is
off): the channel's ``tenant_cfg`` is the shared active configuration with
those two fields replaced, and ``burst_level = min(rate, capacity)`` is taken
per channel.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axil import AXI4LiteSignature, AXI4LiteSlave
from .channel import ChannelArbiter
from .checks import check_names
from .config import ADDR_WIDTH, DATA_WIDTH, FabricComponent, RegisterFile
from .coordinator import Coordinator
from .layouts import grant_signature, request_signature
from kvfabric.spec import CREDIT_CLASS_NAMES, CREDIT_CLASSES, check_params
from .telemetry import AXI_ERROR_BITS, Telemetry


__all__ = ["KvFabric"]


class KvFabric(FabricComponent):
    """The arbiter of spec §1–§2.

    Parameters
    ----------
    params : :class:`kvfabric.spec.FabricParams`
        Fabric parameters (spec §1).
    checks : bool or iterable of str
        Safety properties of every channel (:mod:`kvfabric.hw.checks`) as
        ``Assert`` statements; off for synthesis, on in simulation tests.
    axi_errors : bool
        Add the inputs ``axi_unsupported`` and ``axi_wlast_errors``: the AXI4
        front end's counters, snapshot into ``TEL.AXI_ERRORS`` (spec §14.6).
        Without them (the bare arbiter) the register reads 0.
    fpga : bool
        Every channel in its FPGA form (:class:`kvfabric.hw.channel.ChannelArbiter`'s
        ``fpga``: chained sums instead of carry-save trees, ``vmin`` as a
        tree): the same values in every cycle, less ECP5 logic, longer ASIC
        paths. Default ``False``.

    Members
    -------
    req : ``In(request_signature(params)).array(channels)``
        Request stream of each channel (sink); payload ``tenant``, ``bytes``, ``id``.
    grant : ``Out(grant_signature(params)).array(channels)``
        Grant stream of each channel (source); payload ``tenant``, ``bytes``, ``id``, ``kind``.
    credit_return : ``In(3).array(channels)``
        Bit k of ``credit_return[c]``: the memory side of channel c returns one
        credit of class k (0 urgent, 1 guaranteed, 2 burst; spec §6.6).
    grant_class : ``Out(3).array(channels)``
        One-hot credit class of channel c's grant (spec §6.6), for a memory
        side that returns credits by the grant it answers (spec §14.5).
    dropped : ``Out(1).array(channels)``
        Channel c drops an invalid request in this cycle (spec §4).
    queue_full : ``Out(tenants).array(channels)``
        Bit i of ``queue_full[c]``: tenant i's queue on channel c cannot accept (spec §4).
    axi_unsupported, axi_wlast_errors : ``In(16).array(tenants)``
        With ``axi_errors`` only: the AXI4 front end's live error counters.
    tenant_priority : ``Out(2).array(tenants)``
        Tenant i's active ``priority``, for a memory side that maps a grant
        to AxQOS (``11 - priority`` for guaranteed grants, spec §6.6).
    s_axil : ``In(AXI4LiteSignature(addr_width=16, data_width=32))``
        Configuration and telemetry (spec §9).
    now : ``Out(ts_bits)``
        Fabric timestamp: cycles since reset modulo ``2^TS_BITS``.

    Raises
    ------
    :exc:`TypeError`
        If ``params`` is not a :class:`kvfabric.spec.FabricParams`.
    """
    def __init__(self, params, *, checks=False, axi_errors=False, fpga=False):
        check_params(params)
        self._checks = check_names(checks)
        self._fpga = bool(fpga)
        self._axi_errors = axi_errors
        front_end = {"axi_unsupported": In(AXI_ERROR_BITS).array(params.tenants),
                     "axi_wlast_errors": In(AXI_ERROR_BITS).array(params.tenants)} if axi_errors else {}
        super().__init__(params, {
            **front_end,
            "req":        In(request_signature(params)).array(params.channels),
            "grant":      Out(grant_signature(params)).array(params.channels),
            "credit_return": In(CREDIT_CLASSES).array(params.channels),
            "grant_class": Out(CREDIT_CLASSES).array(params.channels),
            "dropped":    Out(1).array(params.channels),
            "queue_full": Out(params.tenants).array(params.channels),
            "tenant_priority": Out(params.priority_bits).array(params.tenants),
            "s_axil":     In(AXI4LiteSignature(addr_width=ADDR_WIDTH, data_width=DATA_WIDTH)),
            "now":        Out(params.ts_bits),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params

        m.submodules.axil = axil = AXI4LiteSlave(addr_width=ADDR_WIDTH, data_width=DATA_WIDTH)
        # One copy of the early configuration per channel (issue #42); the
        # FPGA form has one for all channels (the copies are equal in every
        # cycle, they only split the fan-out for an ASIC's wires).
        copies = 1 if self._fpga else p.channels
        m.submodules.regs = regs = RegisterFile(p, copies=copies)
        m.submodules.telemetry = tel = Telemetry(p)

        wiring.connect(m, wiring.flipped(self.s_axil), axil.axil)
        m.d.comb += [
            regs.bus.w_addr.eq(axil.bus.w_addr),
            regs.bus.w_data.eq(axil.bus.w_data),
            regs.bus.w_strb.eq(axil.bus.w_strb),
            regs.bus.w_stb.eq(axil.bus.w_stb),
            regs.bus.r_addr.eq(axil.bus.r_addr),
            tel.r_addr.eq(axil.bus.r_addr),
            axil.bus.r_data.eq(regs.bus.r_data | tel.r_data),
        ]

        now = Signal(p.ts_bits)
        m.d.sync += now.eq(now + 1)
        m.d.comb += self.now.eq(now)
        # now + 1 as a register of its own: the channels precompute next
        # cycle's starvation deadline from it (spec §6.2, §11).
        now_next = Signal(p.ts_bits, init=1)
        m.d.sync += now_next.eq(now_next + 1)

        m.d.comb += [
            tel.now.eq(now),
            tel.epoch_cycles.eq(regs.cfg_epoch_cycles),
            tel.snapshot.eq(regs.cfg_snapshot),
        ]
        for i in range(p.tenants):
            m.d.comb += [tel.tenant_cfg[i].eq(regs.cfg_tenant[i]),
                         self.tenant_priority[i].eq(regs.cfg_tenant[i].priority)]
            if self._axi_errors:
                m.d.comb += [tel.axi_unsupported[i].eq(self.axi_unsupported[i]),
                             tel.axi_wlast_errors[i].eq(self.axi_wlast_errors[i])]

        # The per-channel rates (spec §13).
        m.submodules.coord_rates = coord = Coordinator(p)
        m.d.comb += [getattr(coord, port).eq(getattr(regs, f"cfg_{field}"))
                     for port, field in [("enable", "coord_enable"), ("enable_next", "coord_enable_next"),
                                         ("enable_after_next", "coord_enable_after_next"),
                                         ("floor", "coord_floor"), ("epoch_cycles", "coord_epoch_cycles"),
                                         ("commit", "commit"), ("commit_next", "commit_next"),
                                         ("arrival_prio", "arrival_prio")]]
        for i in range(p.tenants):
            m.d.comb += [
                coord.tenant_cfg[i].eq(regs.cfg_tenant[i]),
                coord.rate_after_next[i].eq(regs.cfg_rate_after_next[i]),
                coord.peak_rate_after_next[i].eq(regs.cfg_peak_rate_after_next[i]),
            ]

        # min(rate, capacity) below (spec §6.3) is per channel now; a rate has
        # 16 bits, so it is the capacity only when the capacity fits 16 bits
        # and is below it: the high bits are 0 and the comparison is 16 bits wide.
        cap_fits = [Signal(name=f"capacity_fits_rate_{i}") for i in range(p.tenants)]
        for i, cfg in enumerate(regs.cfg_tenant):
            m.d.comb += cap_fits[i].eq(cfg.capacity[p.rate_bits:] == 0)

        for c in range(p.channels):
            ch = ChannelArbiter(p, checks=self._checks, fpga=self._fpga)
            cp = c if copies > 1 else 0  # this channel's copy of the early configuration
            m.submodules[f"channel_{c}"] = ch
            wiring.connect(m, wiring.flipped(self.req[c]), ch.req)
            wiring.connect(m, wiring.flipped(self.grant[c]), ch.grant)
            m.d.comb += [
                self.queue_full[c].eq(ch.queue_full),
                self.grant_class[c].eq(ch.grant_class),
                self.dropped[c].eq(ch.dropped),
                ch.fcfs_bypass.eq(regs.cfg_fcfs_bypass),
                ch.fcfs_bypass_next.eq(regs.cfg_fcfs_bypass_next_copy[cp]),
                ch.starve_limit_next.eq(regs.cfg_starve_limit_next_copy[cp]),
                ch.now.eq(now),
                ch.now_next.eq(now_next),
                ch.credit_return.eq(self.credit_return[c]),
                ch.bulk_prio_next.eq(regs.cfg_bulk_prio_next_copy[cp]),
                ch.arrival_prio_next.eq(regs.cfg_arrival_prio_next_copy[cp]),
                ch.bulk_run.eq(regs.cfg_bulk_run),
                *(ch.credit_limit[k].eq(getattr(regs, f"cfg_{name}"))
                  for k, name in enumerate(CREDIT_CLASS_NAMES)),
                *(ch.credit_limit_next[k].eq(getattr(regs, f"cfg_{name}_next_copy")[cp])
                  for k, name in enumerate(CREDIT_CLASS_NAMES)),
                tel.dropped[c].eq(ch.dropped),
                tel.grants[c].valid.eq(ch.grant.valid & ch.grant.ready),
                tel.grants[c].tenant.eq(ch.grant.payload.tenant),
                tel.grants[c].bytes.eq(ch.grant.payload.bytes),
                tel.grants[c].kind.eq(ch.grant.payload.kind),
                tel.grants[c].ts.eq(ch.grant_ts),
                coord.accepted[c].eq(ch.accepted),
                coord.queue_full[c].eq(ch.queue_full),
            ]
            for i in range(p.tenants):
                cfg = regs.cfg_tenant[i]
                rate, peak_rate = coord.rate[c][i], coord.peak_rate[c][i]
                burst_level = Signal(p.rate_bits, name=f"burst_level_{c}_{i}")
                cap_lo = cfg.capacity[:p.rate_bits]
                m.d.comb += [
                    ch.tenant_cfg[i].eq(cfg),
                    ch.tenant_cfg[i].rate.eq(rate),
                    ch.tenant_cfg[i].peak_rate.eq(peak_rate),
                    burst_level.eq(Mux(cap_fits[i] & (cap_lo < rate), cap_lo, rate)),
                    ch.burst_level[i].eq(burst_level),
                    ch.priority_next[i].eq(regs.cfg_priority_next_copy[cp][i]),
                    ch.guaranteed_next[i].eq(regs.cfg_guaranteed_next_copy[cp][i]),
                    tel.occupancy[c][i].eq(ch.occupancy[i]),
                ]

        return m
