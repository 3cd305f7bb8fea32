"""Clock crossing of one AXI4 port (spec §14.8): ``clk`` on one side, ``mem_clk`` on the other.

HBM controllers' AXI ports usually run faster than the logic in front of
them. Each of the five AXI channels crosses through an asynchronous FIFO
(Amaranth's :class:`~amaranth.lib.fifo.AsyncFIFO`, Cummings' Gray-pointer
design, synchronizers included): AW, W and AR from ``sync`` to the memory
domain, R and B back. A channel's payload is the FIFO word, so a beat is
never split across clocks; ``depth`` entries per channel let a channel move
one transfer per cycle of the slower clock despite the pointers' two-flop
synchronizers.

Reset: an AsyncFIFO is emptied by the reset of its write domain, so AW, W
and AR are emptied by ``rst`` and R and B by ``mem_rst``; the integrator
asserts both together (spec §14.8), each for at least two cycles of its clock.
"""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from .bus import AXI4Signature

__all__ = ["AxiClockCrossing", "FORWARD", "BACKWARD"]

#: Channels from the manager (this side, ``sync``) to the memory domain, with their payload fields.
FORWARD = {
    "aw": ("awid", "awaddr", "awlen", "awsize", "awburst", "awlock", "awcache", "awprot", "awqos"),
    "w": ("wdata", "wstrb", "wlast"),
    "ar": ("arid", "araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot", "arqos"),
}
#: Channels from the memory domain back.
BACKWARD = {"b": ("bid", "bresp"), "r": ("rid", "rdata", "rresp", "rlast")}


class AxiClockCrossing(wiring.Component):
    """An AXI4 manager port in ``sync`` re-timed into ``domain``.

    Parameters
    ----------
    signature : AXI4Signature
    domain : str
        The memory side's clock domain.
    depth : int
        Entries of each channel's FIFO (a power of two).

    Members
    -------
    s_axi : In(signature)
        The manager port in ``sync`` (from :class:`~.issue.ChannelIssue`).
    m_axi : Out(signature)
        The same port in ``domain``.
    """

    def __init__(self, signature: AXI4Signature, *, domain="mem", depth=8):
        self._domain, self._depth = domain, depth
        super().__init__({"s_axi": In(signature), "m_axi": Out(signature)})

    def elaborate(self, platform):
        m = Module()
        for ch, fields in (*FORWARD.items(), *BACKWARD.items()):
            forward = ch in FORWARD
            src, dst = (self.s_axi, self.m_axi) if forward else (self.m_axi, self.s_axi)
            payload_src = Cat(*(getattr(src, f) for f in fields))
            fifo = AsyncFIFO(width=len(payload_src), depth=self._depth,
                             w_domain="sync" if forward else self._domain,
                             r_domain=self._domain if forward else "sync")
            m.submodules[f"{ch}_fifo"] = fifo
            m.d.comb += [
                fifo.w_en.eq(getattr(src, f"{ch}valid")),
                getattr(src, f"{ch}ready").eq(fifo.w_rdy),
                fifo.w_data.eq(payload_src),
                getattr(dst, f"{ch}valid").eq(fifo.r_rdy),
                fifo.r_en.eq(getattr(dst, f"{ch}ready")),
                Cat(*(getattr(dst, f) for f in fields)).eq(fifo.r_data),
            ]
        return m
