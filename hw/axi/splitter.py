"""Burst splitter (spec §14.2): a tenant's AR or AW burst in, sub-bursts out.

One sub-burst leaves per cycle while the output is ready, and the next burst
is taken in the cycle its last piece leaves, so a stream of bursts becomes a
stream of sub-bursts without a bubble. A piece ends at the next interleave
boundary (which is where the channel changes), the next 4 KiB boundary (no
AXI burst may cross one, and a manager port must not see one that does), or
after ``frag_beats`` beats (the size of an entry's data slot), whichever
comes first; :func:`kvfabric.axi.split_burst` is the same rule in Python.

Bursts the front end does not carry to memory (FIXED, WRAP, the reserved
burst type, or AxSIZE wider than the data bus, spec §14.6) are cut into
pieces of ``frag_beats`` beats marked ``error``: they take entries like any
other burst, so that their error responses come back in order with the rest,
but never reach the arbiter.
"""

from amaranth.hdl import Module, Signal, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from kvfabric.axi import BURST_INCR, PAGE_BYTES, AxiParams

__all__ = ["address_layout", "sub_burst_layout", "BurstSplitter"]


def address_layout(axi: AxiParams):
    """What the splitter takes from a tenant's AR or AW channel."""
    return data.StructLayout({
        "id": axi.id_width, "addr": axi.addr_width, "len": 8, "size": 3, "burst": 2,
    })


def sub_burst_layout(axi: AxiParams, channels: int):
    """One piece of a burst: where it goes and what it asks the arbiter for."""
    return data.StructLayout({
        "id": axi.id_width,          # the tenant burst's ID
        "addr": axi.addr_width,      # the piece's first byte (unaligned only for a burst's first piece)
        "len": 8,                    # beats - 1
        "size": 3,
        "channel": max(1, (channels - 1).bit_length()),
        "bytes": (axi.max_sub_bytes).bit_length(),  # beats << size, the arbiter request's bytes
        "last": 1,                   # the burst's last piece
        "error": 1,                  # an unsupported burst: answered SLVERR, never sent to memory
    })


class BurstSplitter(wiring.Component):
    """Cut AXI bursts into per-channel sub-bursts (spec §14.2).

    Parameters
    ----------
    axi : AxiParams
    channels : int
        Channels of the fabric, a power of two.

    Members
    -------
    burst : In(stream.Signature(address_layout(axi)))
        A tenant's AR or AW channel.
    piece : Out(stream.Signature(sub_burst_layout(axi, channels)))
        Sub-bursts, in the order of the burst's beats.
    """

    def __init__(self, axi: AxiParams, channels: int):
        self._axi = axi
        self._channels = channels
        super().__init__({
            "burst": In(stream.Signature(address_layout(axi))),
            "piece": Out(stream.Signature(sub_burst_layout(axi, channels))),
        })

    def elaborate(self, platform):
        axi, c = self._axi, self._channels
        m = Module()

        busy = Signal()
        addr = Signal(axi.addr_width)
        left = Signal(9)          # beats still to cut, 1..256 while busy
        size = Signal(3)
        ident = Signal(axi.id_width)
        error = Signal()

        block = min(axi.interleave_bytes, PAGE_BYTES)
        block_bits = block.bit_length() - 1
        # The piece's length: beats to the block boundary from the aligned
        # address, capped by frag_beats and by what is left.
        aligned = Signal(axi.addr_width)
        m.d.comb += aligned.eq(addr)
        # AxSIZE selects the aligned address with a case per size: a shift by a
        # 3-bit amount would also do, but the case is a plain multiplexer.
        with m.Switch(size):
            for s in range(axi.max_size + 1):
                with m.Case(s):
                    m.d.comb += aligned.eq(addr & ~((1 << s) - 1))
        to_boundary = Signal(block_bits + 1)      # bytes from the aligned address to the boundary
        m.d.comb += to_boundary.eq(block - aligned[:block_bits])
        fit = Signal(block_bits + 1)
        with m.Switch(size):
            for s in range(axi.max_size + 1):
                with m.Case(s):
                    m.d.comb += fit.eq(to_boundary >> s)
        cap = Signal(9)
        m.d.comb += cap.eq(Mux(error, axi.frag_beats, Mux(fit < axi.frag_beats, fit, axi.frag_beats)))
        beats = Signal(9)
        m.d.comb += beats.eq(Mux(left < cap, left, cap))
        nbytes = Signal(len(self.piece.payload.bytes))
        with m.Switch(size):
            for s in range(axi.max_size + 1):
                with m.Case(s):
                    m.d.comb += nbytes.eq(beats << s)

        il_bits = axi.interleave_bytes.bit_length() - 1
        ch_bits = (c - 1).bit_length()
        out = self.piece.payload
        m.d.comb += [
            self.piece.valid.eq(busy),
            out.id.eq(ident),
            out.addr.eq(addr),
            out.len.eq(beats - 1),
            out.size.eq(size),
            out.channel.eq(addr[il_bits:il_bits + ch_bits] if ch_bits else 0),
            out.bytes.eq(nbytes),
            out.last.eq(beats == left),
            out.error.eq(error),
        ]

        last_leaves = self.piece.valid & self.piece.ready & (beats == left)
        m.d.comb += self.burst.ready.eq(~busy | last_leaves)

        with m.If(self.piece.valid & self.piece.ready):
            m.d.sync += [
                left.eq(left - beats),
                addr.eq(aligned + nbytes),
            ]
            with m.If(beats == left):
                m.d.sync += busy.eq(0)
        with m.If(self.burst.valid & self.burst.ready):
            b = self.burst.payload
            m.d.sync += [
                busy.eq(1),
                addr.eq(b.addr),
                left.eq(b.len + 1),
                size.eq(b.size),
                ident.eq(b.id),
                error.eq((b.burst != BURST_INCR) | (b.size > axi.max_size)),
            ]
        return m
