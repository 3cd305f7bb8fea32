"""One channel's request port, shared by every tenant's read and write side (spec §14.3).

Each tenant offers at most one read and one write sub-burst at a time, the
oldest of each not yet requested, each aimed at one channel. A channel takes
one request a cycle, round robin among the offers aimed at it whose tenant's
queue in the channel has room (``queue_full``, spec §2), so a tenant with a
full queue never holds the port and the request offered is always accepted.
The request's ``id`` is ``{tenant, write, entry}``: the grant names the
entry to issue, and no two requests in flight on a channel share an id. A request the arbiter drops (its tenant disabled, spec §4) is
reported back to the side it came from in the same cycle.
"""

from amaranth.hdl import C, Module, Signal, Cat
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from kvfabric.axi import AxiParams
from kvfabric.spec import FabricParams
from ..layouts import request_signature
from .layouts import request_layout
from .round_robin import round_robin

__all__ = ["RequestMux"]


class RequestMux(wiring.Component):
    """Round-robin multiplexer of ``2 x tenants`` offers onto channel ``channel``'s request port.

    Parameters
    ----------
    axi : AxiParams
    fabric : FabricParams
    channel : int
        The channel this multiplexer feeds.

    Members
    -------
    offer : In(stream of request_layout).array(2 * tenants)
        Offer ``2 t`` is tenant t's read side, ``2 t + 1`` its write side.
        ``ready`` of an offer aimed at another channel is 0.
    dropped_to : Out(1).array(2 * tenants)
        The offer transferred in this cycle was dropped by the arbiter.
    req : Out(request_signature(fabric))
        The channel's request port.
    queue_full, dropped : In
        The channel's ``queue_full`` and ``dropped`` (spec §2, §4).
    """

    def __init__(self, axi: AxiParams, fabric: FabricParams, channel: int):
        self._axi, self._fabric, self._channel = axi, fabric, channel
        n = fabric.tenants
        super().__init__({
            "offer": In(stream.Signature(request_layout(axi, fabric.channels))).array(2 * n),
            "dropped_to": Out(1).array(2 * n),
            "req": Out(request_signature(fabric)),
            "queue_full": In(n),
            "dropped": In(1),
        })

    def elaborate(self, platform):
        axi, fab, c = self._axi, self._fabric, self._channel
        n = fab.tenants
        m = Module()
        wants = []
        for s in range(2 * n):
            o = self.offer[s]
            w = Signal(name=f"wants_{s}")
            m.d.comb += w.eq(o.valid & (o.payload.channel == c) & ~self.queue_full[s // 2])
            wants.append(w)
        grant, any_offer = round_robin(m, wants, self.req.ready, name=f"req_mux_{c}")
        m.d.comb += self.req.valid.eq(any_offer)
        for s in range(2 * n):
            o = self.offer[s]
            with m.If(grant[s]):
                m.d.comb += [
                    self.req.payload.tenant.eq(s // 2),
                    self.req.payload.bytes.eq(o.payload.bytes),
                    self.req.payload.id.eq(Cat(o.payload.entry, s % 2, C(s // 2, fab.tenant_bits))),
                ]
            m.d.comb += [
                o.ready.eq(grant[s] & self.req.ready),
                self.dropped_to[s].eq(grant[s] & self.req.ready & self.dropped),
            ]
        return m
