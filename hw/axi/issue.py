"""One channel's manager port (spec §14.5): grants out as AR/AW and W, R and B back, credits.

::

    grant[c] ─► AR register ─► m_axi.ar         m_axi.r ─► tenant t's reorder buffer
             └► AW register ─► m_axi.aw         m_axi.b ─► tenant t's write entries
                W job FIFO ──► m_axi.w (beats from tenant t's write buffer)
                                            responses ─► credit_return[c]

A granted sub-burst goes into the AR or AW output register; the grant port is
ready whenever that register is empty or being emptied (and, for a write, the
W job queue has room), so a manager that takes an address every cycle sees
one every cycle in which one is granted, and ``ready`` of the manager never
reaches the arbiter through more than one gate. The W job queue has a
place for every write entry (:func:`w_jobs`), so it never holds a grant back.
A write's grant also pushes a *W job* (tenant, entry, beats);
the W channel sends the jobs' beats in AW order, back to back, from the
tenant's write buffer, where they all are already (store and forward). WVALID
never waits for AWREADY (AXI's dependency rule): the job is queued when the
AW register is loaded.

The manager-side ID is ``{class, tenant, entry}`` (class in the top two bits:
0 urgent, 1 guaranteed, 2 burst, 3 none, from the channel's grant register):
R and B carry it back, so routing a response and returning its credit (spec
§6.6) need no table. A credit is returned on a read's last R beat and on a
write's B; when both return one of a class in the same cycle the second is
returned the cycle after (a count per class), which §6.6 allows.

AxQOS is taken from the grant's kind and, for a guaranteed grant, its
tenant's active priority (spec §14.5, §6.6's ``11 - priority``); a burst
grant in the guaranteed credit class has AxQOS 5, the others 4.
"""

from amaranth.hdl import Module, Signal, Cat, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from kvfabric.axi import AxiParams, BURST_INCR, CLASS_NONE
from kvfabric.spec import BURST, CREDIT_CLASSES, CREDIT_GUARANTEED, GUARANTEED, FabricParams, axqos
from ..layouts import Kind, grant_signature
from .bus import AXI4Signature
from .layouts import beat_layout, descriptor_layout, done_layout, fill_layout

__all__ = ["ChannelIssue", "w_jobs"]

def w_jobs(axi: AxiParams, fabric: FabricParams) -> int:
    """W jobs a channel's queue holds: every write entry of every tenant.

    A job is queued when a write grant loads the AW register and leaves with
    its last W beat, and its entry is freed only after its B, so no channel
    can have more jobs than there are write entries: the queue never fills
    and a write grant never waits for it. (At 4 and 16 jobs a memory with
    deep address queues saw write grants, and the reads behind them, wait for
    the queue in 36 % and 8 % of channel-cycles.) Each job is a few bits.
    """
    return fabric.tenants * axi.write_entries


class ChannelIssue(wiring.Component):
    """Issue one channel's grants on its AXI4 manager port and route its responses.

    Parameters
    ----------
    axi : AxiParams
    fabric : FabricParams

    Members
    -------
    grant : In(grant_signature(fabric))
        The channel's grant stream; ``id`` is ``{tenant, write, entry}``.
    grant_class : In(3)
        One-hot credit class of the grant in the grant register (none in fcfs mode).
    tenant_priority : In(2).array(tenants)
        Each tenant's active priority, for a guaranteed grant's AxQOS.
    lookup_entry : Out(entry)
        The granted entry, for every tenant's ``lookup``.
    read_desc, write_desc : In(descriptor_layout).array(tenants)
        Each tenant's read and write entry ``lookup_entry``: address, length, size.
    w_entry, w_beat : Out
        The W job's entry and beat, for every tenant's write buffer read port.
    w_beat_in : In(beat_layout).array(tenants)
        Each tenant's write buffer at (``w_entry``, ``w_beat``).
    fill : Out(stream of fill_layout).array(tenants)
        R beats for each tenant's reorder buffer.
    done : Out(done_layout).array(tenants)
        B responses for each tenant's write entries.
    credit_return : Out(3)
        To the channel's ``credit_return`` (spec §6.6).
    m_axi : Out(AXI4Signature)
        The manager port.
    """

    def __init__(self, axi: AxiParams, fabric: FabricParams):
        self._axi, self._fabric = axi, fabric
        n = fabric.tenants
        fbits = max(1, (axi.frag_beats - 1).bit_length())
        super().__init__({
            "grant": In(grant_signature(fabric)),
            "grant_class": In(CREDIT_CLASSES),
            "tenant_priority": In(fabric.priority_bits).array(n),
            "lookup_entry": Out(axi.entry_bits),
            "read_desc": In(descriptor_layout(axi)).array(n),
            "write_desc": In(descriptor_layout(axi)).array(n),
            "w_entry": Out(axi.entry_bits),
            "w_beat": Out(fbits),
            "w_beat_in": In(beat_layout(axi)).array(n),
            "fill": Out(stream.Signature(fill_layout(axi))).array(n),
            "done": Out(done_layout(axi)).array(n),
            "credit_return": Out(CREDIT_CLASSES),
            "m_axi": Out(AXI4Signature(addr_width=axi.addr_width, data_width=axi.data_width,
                                       id_width=axi.manager_id_width(fabric))),
        })

    def elaborate(self, platform):
        axi, fab = self._axi, self._fabric
        n = fab.tenants
        eb, tb = axi.entry_bits, axi.tenant_bits(fab)
        fbits = max(1, (axi.frag_beats - 1).bit_length())
        bus = self.m_axi
        m = Module()

        g = self.grant.payload
        is_write = Signal()
        entry = Signal(eb)
        m.d.comb += [is_write.eq(g.id[eb]), entry.eq(g.id[:eb]), self.lookup_entry.eq(entry)]
        desc = Signal(descriptor_layout(axi))
        priority = Signal(fab.priority_bits)
        with m.Switch(g.tenant):
            for t in range(n):
                with m.Case(t):
                    m.d.comb += [desc.eq(Mux(is_write, self.write_desc[t], self.read_desc[t])),
                                 priority.eq(self.tenant_priority[t])]
        cls = Signal(2)
        m.d.comb += cls.eq(Mux(self.grant_class[0], 0, Mux(self.grant_class[1], 1,
                                                          Mux(self.grant_class[2], 2, CLASS_NONE))))
        # AxQOS by spec §6.6's mapping (kvfabric.spec.axqos): a table of the
        # kind and, for a guaranteed grant, the granted tenant's priority.
        qos = Signal(4)
        with m.Switch(g.kind):
            for kind in Kind:
                with m.Case(kind):
                    if kind.value == GUARANTEED:
                        with m.Switch(priority):
                            for prio in range(1 << fab.priority_bits):
                                with m.Case(prio):
                                    m.d.comb += qos.eq(axqos(kind.value, prio))
                    elif kind.value == BURST:
                        # A burst grant in the guaranteed credit class (a
                        # latency-bound tenant past its guarantee) has its own AxQOS.
                        m.d.comb += qos.eq(Mux(self.grant_class[CREDIT_GUARANTEED],
                                               axqos(kind.value, 0, CREDIT_GUARANTEED), axqos(kind.value, 0)))
                    else:
                        m.d.comb += qos.eq(axqos(kind.value, 0))
        mid = Signal(len(bus.arid))
        m.d.comb += mid.eq(Cat(entry, g.tenant[:tb], cls))

        # Output registers (one per address channel).
        fifo = m.submodules.w_jobs = SyncFIFOBuffered(width=tb + eb + 8, depth=w_jobs(axi, fab))
        ar_take = Signal()
        aw_take = Signal()
        m.d.comb += [
            ar_take.eq(~bus.arvalid | bus.arready),
            aw_take.eq((~bus.awvalid | bus.awready) & fifo.w_rdy),   # w_rdy is never 0 (w_jobs)
            self.grant.ready.eq(Mux(is_write, aw_take, ar_take)),
        ]
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += bus.arvalid.eq(0)
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += bus.awvalid.eq(0)
        load = self.grant.valid & self.grant.ready
        for prefix, take in (("ar", ~is_write), ("aw", is_write)):
            with m.If(load & take):
                m.d.sync += [
                    getattr(bus, f"{prefix}valid").eq(1),
                    getattr(bus, f"{prefix}id").eq(mid),
                    getattr(bus, f"{prefix}addr").eq(desc.addr),
                    getattr(bus, f"{prefix}len").eq(desc.len),
                    getattr(bus, f"{prefix}size").eq(desc.size),
                    getattr(bus, f"{prefix}qos").eq(qos),
                ]
            m.d.comb += [
                getattr(bus, f"{prefix}burst").eq(BURST_INCR),
                getattr(bus, f"{prefix}lock").eq(0),
                getattr(bus, f"{prefix}cache").eq(0b0011),   # normal, non-cacheable, bufferable
                getattr(bus, f"{prefix}prot").eq(0),
            ]
        m.d.comb += [
            fifo.w_en.eq(load & is_write),
            fifo.w_data.eq(Cat(entry, g.tenant[:tb], desc.len)),
        ]

        # W: the head job's beats from its tenant's write buffer.
        job_entry = fifo.r_data[:eb]
        job_tenant = fifo.r_data[eb:eb + tb]
        job_len = fifo.r_data[eb + tb:]
        beat = Signal(fbits)
        m.d.comb += [self.w_entry.eq(job_entry), self.w_beat.eq(beat)]
        with m.Switch(job_tenant):
            for t in range(n):
                with m.Case(t):
                    m.d.comb += [bus.wdata.eq(self.w_beat_in[t].data), bus.wstrb.eq(self.w_beat_in[t].strb)]
        w_end = Signal()
        m.d.comb += [
            w_end.eq(beat == job_len[:fbits]),
            bus.wvalid.eq(fifo.r_rdy),
            bus.wlast.eq(w_end),
            fifo.r_en.eq(bus.wvalid & bus.wready & w_end),
        ]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += beat.eq(Mux(w_end, 0, beat + 1))

        # R and B back to their tenants by the ID's tenant bits.
        r_tenant, b_tenant = bus.rid[eb:eb + tb], bus.bid[eb:eb + tb]
        m.d.comb += bus.bready.eq(1)
        for t in range(n):
            m.d.comb += [
                self.fill[t].valid.eq(bus.rvalid & (r_tenant == t)),
                self.fill[t].payload.entry.eq(bus.rid[:eb]),
                self.fill[t].payload.data.eq(bus.rdata),
                self.fill[t].payload.resp.eq(bus.rresp),
                self.done[t].valid.eq(bus.bvalid & (b_tenant == t)),
                self.done[t].entry.eq(bus.bid[:eb]),
                self.done[t].resp.eq(bus.bresp),
            ]
            with m.If(r_tenant == t):
                m.d.comb += bus.rready.eq(self.fill[t].ready)

        # Credits: one per read (its last beat) and per write (its B).
        r_done = bus.rvalid & bus.rready & bus.rlast
        b_done = bus.bvalid & bus.bready
        r_cls, b_cls = bus.rid[eb + tb:], bus.bid[eb + tb:]
        for k in range(CREDIT_CLASSES):
            owed = Signal(range(n * (axi.read_entries + axi.write_entries) + 2), name=f"credit_owed_{k}")
            add = Signal(2)
            m.d.comb += [
                add.eq((r_done & (r_cls == k)) + (b_done & (b_cls == k))),
                self.credit_return[k].eq(owed != 0),
            ]
            m.d.sync += owed.eq(owed + add - (owed != 0))
        return m
