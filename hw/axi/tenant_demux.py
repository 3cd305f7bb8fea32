"""One shared AXI4 port in, one port per tenant out: the tenant from AxUSER (spec §14.9).

::

    s_axi (AxUSER = tenant) ─ AR ─► tenant[AxUSER].ar   (or the error responder)
                            ─ AW ─► tenant[AxUSER].aw   ─► W route FIFO {target, id, len}
                            ─ W  ─► tenant[route head].w
                            ◄ R  ── round robin over tenants, a burst at a time
                            ◄ B  ── round robin over tenants

A manager that carries several tenants' traffic on one port (an accelerator
with one AXI4 master) names each burst's tenant in ``AxUSER[3:0]``, the
4-bit tenant id of spec §1. The demultiplexer hands each burst to that
tenant's side of the front end, exactly as if it had come in on the tenant's
own port, so everything after it (§14.2-§14.8) is unchanged.

What a single port adds, the way ``pulp-platform/axi``'s ``axi_demux`` does it:

* **Same ID, one tenant at a time.** AXI orders the responses of one ID;
  two tenants' sides answer independently, so an AR (AW) whose ID has reads
  (writes) in flight at another tenant waits until they are answered. IDs
  are told apart by their low ``LOOK_BITS`` bits (IDs that share them are
  treated as one: more waiting, never a reordering), a count per ID class
  saturating at ``2**COUNT_BITS - 1`` in flight.
* **W follows AW.** AXI4's W has no ID: beats belong to the bursts in AW
  order. Each AW pushes {target, ID, AWLEN} on the W route FIFO, and W beats
  go to its head's target, counted by AWLEN as the tenant sides count them
  (WLAST errors are counted by the tenant side, §14.6). W is not taken before
  its AW (AXI allows the subordinate to wait).
* **R a burst at a time.** R beats of one burst are never interleaved with
  another's (AXI4 would allow it across IDs; many managers do not expect it).
* **A tenant id with no tenant** (``AxUSER[3:0] >= N``) is answered by a small
  error responder: a read gets AxLEN + 1 beats of zero data with SLVERR, a
  write has its W beats taken and one SLVERR B; each such burst pulses
  ``bad_tenant``. It goes through the same ID ordering as the tenants.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from kvfabric.axi import RESP_SLVERR, TENANT_USER_BITS, AxiParams
from .bus import AXI4Signature
from .round_robin import round_robin

__all__ = ["TenantDemux", "LOOK_BITS", "COUNT_BITS", "W_ROUTES"]

#: Low ID bits that tell IDs apart for the ordering rule.
LOOK_BITS = 4
#: Bursts in flight per ID class and direction: up to 2**COUNT_BITS - 1.
COUNT_BITS = 6
#: AWs whose W beats have not all been routed.
W_ROUTES = 8
#: Bursts the error responder holds, per direction.
ERROR_DEPTH = 2

_ADDRESS = ("id", "addr", "len", "size", "burst", "lock", "cache", "prot", "qos")


class _IdOrder:
    """Per ID class: the target its bursts in flight went to, and how many."""

    def __init__(self, m, name, id_width, targets):
        look = min(LOOK_BITS, id_width)
        self.look = look
        self.target = Array(Signal(range(targets), name=f"{name}_target_{i}") for i in range(1 << look))
        self.count = Array(Signal(COUNT_BITS, name=f"{name}_count_{i}") for i in range(1 << look))
        self._m = m

    def blocked(self, ident, target):
        """A new burst of ``ident`` to ``target`` must wait."""
        k = ident[:self.look]
        return (((self.count[k] != 0) & (self.target[k] != target))
                | (self.count[k] == (1 << COUNT_BITS) - 1))

    def update(self, start, start_id, target, finish, finish_id):
        """A burst of ``start_id`` to ``target`` starts, one of ``finish_id`` finishes."""
        m = self._m
        for i in range(1 << self.look):
            up = start & (start_id[:self.look] == i)
            down = finish & (finish_id[:self.look] == i)
            with m.If(up & ~down):
                m.d.sync += [self.count[i].eq(self.count[i] + 1), self.target[i].eq(target)]
            with m.Elif(down & ~up):
                m.d.sync += self.count[i].eq(self.count[i] - 1)


def _merge(m, valids, valid, ready, last, name):
    """Index of the source driving a merged response channel: round robin
    among ``valids`` when a burst starts, then held until the burst's ``last``
    beat is taken, and while a presented beat waits for ``ready`` (AXI: the
    payload may not change while VALID waits)."""
    held = Signal(name=f"{name}_held")
    owner = Signal(range(len(valids)), name=f"{name}_owner")
    pick, _ = round_robin(m, valids, valid & ~held, name=name)
    sel = Signal(range(len(valids)), name=f"{name}_sel")
    with m.If(held):
        m.d.comb += sel.eq(owner)
    with m.Else():
        for i, g in enumerate(pick):
            with m.If(g):
                m.d.comb += sel.eq(i)
    with m.If(valid):
        m.d.sync += [held.eq(~(ready & last)), owner.eq(sel)]
    return sel


def _route_address(m, shared, tenants, ch, target, go, err_ready):
    """Hand the shared port's AR or AW (``ch`` = ``"ar"``/``"aw"``) to
    ``tenants[target]`` while ``go``; ``target`` = ``len(tenants)`` is the error
    responder, ready with ``err_ready``. Returns the chosen side's ready."""
    ready = Signal(name=f"{ch}_ready")
    for t, p in enumerate(tenants):
        for f in _ADDRESS:
            m.d.comb += getattr(p, f"{ch}{f}").eq(getattr(shared, f"{ch}{f}"))
        m.d.comb += getattr(p, f"{ch}valid").eq(go & (target == t))
        with m.If(target == t):
            m.d.comb += ready.eq(getattr(p, f"{ch}ready"))
    with m.If(target == len(tenants)):
        m.d.comb += ready.eq(err_ready)
    return ready


def _target(m, user, tenants, name):
    """The tenant AxUSER names, or ``tenants`` (the error responder) for an id with no tenant."""
    target = Signal(range(tenants + 1), name=name)
    m.d.comb += target.eq(Mux(user[:TENANT_USER_BITS] >= tenants, tenants, user[:TENANT_USER_BITS]))
    return target


class TenantDemux(wiring.Component):
    """A shared tenant port split into per-tenant ports by ``AxUSER`` (spec §14.9).

    Parameters
    ----------
    axi : AxiParams
    tenants : int

    Members
    -------
    shared : In(AXI4Signature(..., user_width=TENANT_USER_BITS))
        The shared subordinate port.
    tenant : Out(AXI4Signature(...)).array(tenants)
        One port per tenant, toward that tenant's read and write sides.
    bad_tenant : Out(1)
        A burst naming a tenant id with no tenant was accepted in this cycle.
    """

    def __init__(self, axi: AxiParams, tenants: int):
        self._axi, self._tenants = axi, tenants
        widths = dict(addr_width=axi.addr_width, data_width=axi.data_width, id_width=axi.id_width)
        super().__init__({
            "shared": In(AXI4Signature(**widths, user_width=TENANT_USER_BITS)),
            "tenant": Out(AXI4Signature(**widths)).array(tenants),
            "bad_tenant": Out(1),
        })

    def elaborate(self, platform):
        axi, n = self._axi, self._tenants
        s = self.shared
        err = n                      # the error responder's target number
        m = Module()

        # --- AR -------------------------------------------------------------
        ar_target = _target(m, s.aruser, n, "ar_target")
        rd_order = _IdOrder(m, "rd", axi.id_width, n + 1)
        err_rd = m.submodules.err_reads = SyncFIFO(width=axi.id_width + 8, depth=ERROR_DEPTH)
        ar_go = Signal()
        m.d.comb += ar_go.eq(s.arvalid & ~rd_order.blocked(s.arid, ar_target))
        ar_ready = _route_address(m, s, self.tenant, "ar", ar_target, ar_go, err_rd.w_rdy)
        m.d.comb += [
            s.arready.eq(ar_go & ar_ready),
            err_rd.w_en.eq(ar_go & (ar_target == err)),
            err_rd.w_data.eq(Cat(s.arid, s.arlen)),
        ]
        ar_hs = s.arvalid & s.arready

        # --- R: one burst at a time, round robin over the tenants and the responder.
        err_beat = Signal(8)
        err_r_valid = err_rd.r_rdy
        err_r_id = err_rd.r_data[:axi.id_width]
        err_r_last = err_beat == err_rd.r_data[axi.id_width:]
        r_valid = [self.tenant[t].rvalid for t in range(n)] + [err_r_valid]
        r_sel = _merge(m, r_valid, s.rvalid, s.rready, s.rlast, "r_merge")
        for t in range(n):
            p = self.tenant[t]
            with m.If(r_sel == t):
                m.d.comb += [s.rvalid.eq(p.rvalid), s.rid.eq(p.rid), s.rdata.eq(p.rdata),
                             s.rresp.eq(p.rresp), s.rlast.eq(p.rlast), p.rready.eq(s.rready)]
        with m.If(r_sel == err):
            m.d.comb += [s.rvalid.eq(err_r_valid), s.rid.eq(err_r_id), s.rdata.eq(0),
                         s.rresp.eq(RESP_SLVERR), s.rlast.eq(err_r_last)]
        r_hs = s.rvalid & s.rready
        err_r_hs = r_hs & (r_sel == err)
        m.d.comb += err_rd.r_en.eq(err_r_hs & err_r_last)
        with m.If(err_r_hs):
            m.d.sync += err_beat.eq(Mux(err_r_last, 0, err_beat + 1))
        rd_order.update(ar_hs, s.arid, ar_target, r_hs & s.rlast, s.rid)

        # --- AW and the W route ----------------------------------------------
        aw_target = _target(m, s.awuser, n, "aw_target")
        wr_order = _IdOrder(m, "wr", axi.id_width, n + 1)
        tbits = len(aw_target)
        route = m.submodules.w_route = SyncFIFO(width=tbits + axi.id_width + 8, depth=W_ROUTES)
        aw_go = Signal()
        m.d.comb += aw_go.eq(s.awvalid & ~wr_order.blocked(s.awid, aw_target) & route.w_rdy)
        aw_ready = _route_address(m, s, self.tenant, "aw", aw_target, aw_go, 1)
        m.d.comb += [
            s.awready.eq(aw_go & aw_ready),
            route.w_en.eq(s.awvalid & s.awready),
            route.w_data.eq(Cat(aw_target, s.awid, s.awlen)),
        ]
        aw_hs = s.awvalid & s.awready

        w_target = route.r_data[:tbits]
        w_id = route.r_data[tbits:tbits + axi.id_width]
        w_len = route.r_data[tbits + axi.id_width:]
        w_beat = Signal(8)
        w_end = Signal()
        err_b = m.submodules.err_writes = SyncFIFO(width=axi.id_width, depth=ERROR_DEPTH)
        w_ready = Signal()
        m.d.comb += w_end.eq(w_beat == w_len)
        for t in range(n):
            p = self.tenant[t]
            m.d.comb += [p.wdata.eq(s.wdata), p.wstrb.eq(s.wstrb), p.wlast.eq(s.wlast),
                         p.wvalid.eq(s.wvalid & route.r_rdy & (w_target == t))]
            with m.If(w_target == t):
                m.d.comb += w_ready.eq(p.wready)
        with m.If(w_target == err):
            m.d.comb += w_ready.eq(err_b.w_rdy)
        m.d.comb += s.wready.eq(route.r_rdy & w_ready)
        w_hs = s.wvalid & s.wready
        m.d.comb += [
            route.r_en.eq(w_hs & w_end),
            err_b.w_en.eq(w_hs & w_end & (w_target == err)),
            err_b.w_data.eq(w_id),
        ]
        with m.If(w_hs):
            m.d.sync += w_beat.eq(Mux(w_end, 0, w_beat + 1))

        # --- B: round robin over the tenants and the responder.
        b_valid = [self.tenant[t].bvalid for t in range(n)] + [err_b.r_rdy]
        b_sel = _merge(m, b_valid, s.bvalid, s.bready, Const(1), "b_merge")
        for t in range(n):
            p = self.tenant[t]
            with m.If(b_sel == t):
                m.d.comb += [s.bvalid.eq(p.bvalid), s.bid.eq(p.bid), s.bresp.eq(p.bresp), p.bready.eq(s.bready)]
        with m.If(b_sel == err):
            m.d.comb += [s.bvalid.eq(err_b.r_rdy), s.bid.eq(err_b.r_data), s.bresp.eq(RESP_SLVERR),
                         err_b.r_en.eq(s.bready & err_b.r_rdy)]
        wr_order.update(aw_hs, s.awid, aw_target, s.bvalid & s.bready, s.bid)

        m.d.comb += self.bad_tenant.eq((ar_hs & (ar_target == err)) | (aw_hs & (aw_target == err)))
        return m
