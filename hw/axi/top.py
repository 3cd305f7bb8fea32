"""kvfabric as AXI4 IP (spec §14): one subordinate port per tenant, one manager port per channel.

::

    s_axi[t] ─┬─ AR ─► ReadTracker t ──offer──┐            ┌─► ChannelIssue c ─► m_axi[c]
              └─ AW/W ► WriteTracker t ─offer─┤ RequestMux c ─► KvFabric ─grant[c]┘     │
                 R ◄── reorder buffer ◄───────┼─────────────── R, B by ID ◄────────────┘
                 B ◄── merged responses ◄─────┘

The tenant is the port: every request of port t is arbitrated as tenant t.
Each tenant's bursts are cut into per-channel sub-bursts
(:mod:`.splitter`); each sub-burst holds an entry of its tenant's read or
write side (:mod:`.read_tracker`, :mod:`.write_tracker`) from its address
handshake until the tenant has its data or response, and is one request of
``beats << size`` bytes on its channel's request port (:mod:`.request_mux`).
A channel's grant is issued on its manager port (:mod:`.issue`); responses
come back by the manager-side ID, and credits are returned as they complete.
The arbiter is :class:`kvfabric.hw.top.KvFabric`, unchanged: its register
port ``s_axil`` is this top's, and its request and grant streams are
internal.

With ``axi.shared_port`` the tenants share one port, ``s_axi``, and each
burst names its tenant in AxUSER (:mod:`.tenant_demux`).

With ``axi.mem_clock`` the manager ports run on ``mem_clk`` (reset
``mem_rst``), each behind an :class:`.clock_crossing.AxiClockCrossing`.

Manager ports see the tenant's byte addresses unchanged; a controller that
wants channel-local addresses drops the channel bits (spec §14.2).
"""

from amaranth.hdl import ClockDomain, Module, Signal, Cat
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from kvfabric.axi import TENANT_USER_BITS, AxiParams, check_axi_params
from kvfabric.spec import FabricParams, check_params
from ..axil import AXI4LiteSignature
from ..config import ADDR_WIDTH, DATA_WIDTH
from kvfabric.spec import CREDIT_CLASSES
from ..layouts import grant_layout, request_layout
from ..telemetry import AXI_ERROR_BITS
from ..top import KvFabric
from .bus import AXI4Signature
from .clock_crossing import AxiClockCrossing
from .issue import ChannelIssue
from .read_tracker import ReadTracker
from .request_mux import RequestMux
from .tenant_demux import TenantDemux
from .write_tracker import WriteTracker

__all__ = ["KvFabricAxi"]

#: Width of the per-tenant counters of unsupported bursts and WLAST errors.
COUNTER_BITS = AXI_ERROR_BITS


class KvFabricAxi(wiring.Component):
    """The arbiter behind AXI4 tenant ports, in front of AXI4 memory ports.

    Parameters
    ----------
    params : FabricParams
        The arbiter's parameters (spec §1).
    axi : AxiParams
        The front end's parameters (spec §14.1).
    checks : bool or iterable of str
        The channels' safety properties (simulation only).

    Members
    -------
    s_axi : In(AXI4Signature(addr_width, data_width, id_width)).array(tenants)
        Tenant t's AXI4 subordinate port; with ``axi.shared_port`` one port,
        ``In(AXI4Signature(..., user_width=4))``, the tenant in AxUSER
        (:mod:`.tenant_demux`, spec §14.9).
    bad_tenant : Out(16)
        With ``axi.shared_port`` only: bursts answered SLVERR because AxUSER
        named no tenant, wrapping.
    m_axi : Out(AXI4Signature(addr_width, data_width, manager ID width)).array(channels)
        Channel c's AXI4 manager port toward its memory controller.
    s_axil : In(AXI4LiteSignature(16, 32))
        Configuration and telemetry (spec §9).
    now : Out(ts_bits)
        The fabric timestamp.
    mem_clk, mem_rst : In(1)
        With ``axi.mem_clock`` only: the manager ports' clock and its
        active-high synchronous reset (spec §14.8).
    unsupported : Out(16).array(tenants)
        Bursts of tenant t answered SLVERR because the front end does not
        carry them (spec §14.6), read and write, wrapping.
    wlast_errors : Out(16).array(tenants)
        W beats of tenant t whose WLAST disagreed with the burst length.

    Raises
    ------
    ValueError
        If the parameters do not fit together (:func:`kvfabric.axi.check_axi_params`).
    """

    def __init__(self, params: FabricParams, axi: AxiParams = AxiParams(), *, checks=False):
        check_params(params)
        check_axi_params(axi, params)
        self._params, self._axi, self._checks = params, axi, checks
        n, c = params.tenants, params.channels
        clocks = {"mem_clk": In(1), "mem_rst": In(1)} if axi.mem_clock else {}
        widths = dict(addr_width=axi.addr_width, data_width=axi.data_width, id_width=axi.id_width)
        if axi.shared_port:
            tenant_ports = {"s_axi": In(AXI4Signature(**widths, user_width=TENANT_USER_BITS)),
                            "bad_tenant": Out(COUNTER_BITS)}
        else:
            tenant_ports = {"s_axi": In(AXI4Signature(**widths)).array(n)}
        super().__init__({
            **clocks,
            **tenant_ports,
            "m_axi": Out(AXI4Signature(addr_width=axi.addr_width, data_width=axi.data_width,
                                       id_width=axi.manager_id_width(params))).array(c),
            "s_axil": In(AXI4LiteSignature(addr_width=ADDR_WIDTH, data_width=DATA_WIDTH)),
            "now": Out(params.ts_bits),
            "unsupported": Out(COUNTER_BITS).array(n),
            "wlast_errors": Out(COUNTER_BITS).array(n),
        })

    @property
    def params(self):
        return self._params

    @property
    def axi(self):
        return self._axi

    def elaborate(self, platform):
        p, axi = self._params, self._axi
        n, nch = p.tenants, p.channels
        m = Module()
        if axi.mem_clock:
            # The memory side's clock and reset, from the ports mem_clk and mem_rst.
            m.domains.mem = mem = ClockDomain("mem")
            m.d.comb += [mem.clk.eq(self.mem_clk), mem.rst.eq(self.mem_rst)]
        m.submodules.fabric = fabric = KvFabric(p, checks=self._checks, axi_errors=True)
        wiring.connect(m, wiring.flipped(self.s_axil), fabric.s_axil)
        m.d.comb += self.now.eq(fabric.now)

        if axi.shared_port:
            m.submodules.tenant_demux = demux = TenantDemux(axi, n)
            wiring.connect(m, wiring.flipped(self.s_axi), demux.shared)
            ports = demux.tenant
            bad = Signal(COUNTER_BITS, name="bad_tenant_count")
            m.d.sync += bad.eq(bad + demux.bad_tenant)
            m.d.comb += self.bad_tenant.eq(bad)
        else:
            ports = self.s_axi
        reads, writes = [], []
        for t in range(n):
            rd = m.submodules[f"read_{t}"] = ReadTracker(axi, nch)
            wr = m.submodules[f"write_{t}"] = WriteTracker(axi, nch)
            reads.append(rd)
            writes.append(wr)
            s = ports[t]
            for prefix, sink in (("ar", rd.ar), ("aw", wr.aw)):
                m.d.comb += [
                    sink.valid.eq(getattr(s, f"{prefix}valid")),
                    getattr(s, f"{prefix}ready").eq(sink.ready),
                    sink.payload.id.eq(getattr(s, f"{prefix}id")),
                    sink.payload.addr.eq(getattr(s, f"{prefix}addr")),
                    sink.payload.len.eq(getattr(s, f"{prefix}len")),
                    sink.payload.size.eq(getattr(s, f"{prefix}size")),
                    sink.payload.burst.eq(getattr(s, f"{prefix}burst")),
                ]
            m.d.comb += [
                wr.w.valid.eq(s.wvalid), s.wready.eq(wr.w.ready),
                wr.w.payload.data.eq(s.wdata), wr.w.payload.strb.eq(s.wstrb), wr.w.payload.last.eq(s.wlast),
                s.bvalid.eq(wr.b.valid), wr.b.ready.eq(s.bready),
                s.bid.eq(wr.b.payload.id), s.bresp.eq(wr.b.payload.resp),
                s.rvalid.eq(rd.r.valid), rd.r.ready.eq(s.rready),
                s.rid.eq(rd.r.payload.id), s.rdata.eq(rd.r.payload.data),
                s.rresp.eq(rd.r.payload.resp), s.rlast.eq(rd.r.payload.last),
            ]
            unsupported = Signal(COUNTER_BITS, name=f"unsupported_count_{t}")
            wlast = Signal(COUNTER_BITS, name=f"wlast_error_count_{t}")
            m.d.sync += [
                unsupported.eq(unsupported + rd.unsupported + wr.unsupported),
                wlast.eq(wlast + wr.wlast_mismatch),
            ]
            m.d.comb += [self.unsupported[t].eq(unsupported), self.wlast_errors[t].eq(wlast),
                         fabric.axi_unsupported[t].eq(unsupported), fabric.axi_wlast_errors[t].eq(wlast)]

        sides = [side for t in range(n) for side in (reads[t], writes[t])]
        ready_terms = [[] for _ in sides]
        dropped_terms = [[] for _ in sides]
        for c in range(nch):
            mux = m.submodules[f"request_mux_{c}"] = RequestMux(axi, p, c)
            issue = m.submodules[f"issue_{c}"] = ChannelIssue(axi, p)
            for s_idx, side in enumerate(sides):
                o = mux.offer[s_idx]
                m.d.comb += [o.valid.eq(side.req.valid), o.payload.eq(side.req.payload)]
                ready_terms[s_idx].append(o.ready)
                dropped_terms[s_idx].append(mux.dropped_to[s_idx])
            # The arbiter's streams pass through signals named as the bare
            # arbiter's ports (req__<c>__valid, grant__<c>__payload, ...), so
            # that the lockstep scoreboard of the bare arbiter's test bench
            # (tb/monitor.py, tb/scoreboard.py) reads them in the AXI top too.
            req_valid, req_ready = Signal(name=f"req__{c}__valid"), Signal(name=f"req__{c}__ready")
            req_payload = Signal(request_layout(p), name=f"req__{c}__payload")
            grant_valid, grant_ready = Signal(name=f"grant__{c}__valid"), Signal(name=f"grant__{c}__ready")
            grant_payload = Signal(grant_layout(p), name=f"grant__{c}__payload")
            credit_return = Signal(CREDIT_CLASSES, name=f"credit_return__{c}")
            queue_full = Signal(n, name=f"queue_full__{c}")
            m.d.comb += [
                req_valid.eq(mux.req.valid), req_payload.eq(mux.req.payload), mux.req.ready.eq(req_ready),
                fabric.req[c].valid.eq(req_valid), fabric.req[c].payload.eq(req_payload),
                req_ready.eq(fabric.req[c].ready),
                grant_valid.eq(fabric.grant[c].valid), grant_payload.eq(fabric.grant[c].payload),
                fabric.grant[c].ready.eq(grant_ready),
                issue.grant.valid.eq(grant_valid), issue.grant.payload.eq(grant_payload),
                grant_ready.eq(issue.grant.ready),
                queue_full.eq(fabric.queue_full[c]), mux.queue_full.eq(queue_full),
                mux.dropped.eq(fabric.dropped[c]),
                issue.grant_class.eq(fabric.grant_class[c]),
                *(issue.tenant_priority[t].eq(fabric.tenant_priority[t]) for t in range(n)),
                credit_return.eq(issue.credit_return), fabric.credit_return[c].eq(credit_return),
            ]
            if axi.mem_clock:
                cross = m.submodules[f"crossing_{c}"] = AxiClockCrossing(issue.m_axi.signature)
                wiring.connect(m, issue.m_axi, cross.s_axi)
                wiring.connect(m, cross.m_axi, wiring.flipped(self.m_axi[c]))
            else:
                wiring.connect(m, issue.m_axi, wiring.flipped(self.m_axi[c]))
            ebits_r = (axi.read_entries - 1).bit_length()
            ebits_w = (axi.write_entries - 1).bit_length()
            for t in range(n):
                rd, wr = reads[t], writes[t]
                m.d.comb += [
                    rd.lookup_entry[c].eq(issue.lookup_entry[:ebits_r]),
                    wr.lookup_entry[c].eq(issue.lookup_entry[:ebits_w]),
                    issue.read_desc[t].eq(rd.lookup[c]),
                    issue.write_desc[t].eq(wr.lookup[c]),
                    wr.read_entry[c].eq(issue.w_entry[:ebits_w]),
                    wr.read_beat[c].eq(issue.w_beat),
                    issue.w_beat_in[t].eq(wr.read[c]),
                    wr.done[c].eq(issue.done[t]),
                ]
                wiring.connect(m, issue.fill[t], rd.fill[c])
        for s_idx, side in enumerate(sides):
            ready = Signal(name=f"offer_ready_{s_idx}")
            dropped = Signal(name=f"offer_dropped_{s_idx}")
            m.d.comb += [
                ready.eq(Cat(*ready_terms[s_idx]).any()),
                dropped.eq(Cat(*dropped_terms[s_idx]).any()),
                side.req.ready.eq(ready),
                side.dropped.eq(dropped),
            ]
        return m
