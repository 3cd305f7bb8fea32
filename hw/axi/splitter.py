"""Burst splitter (spec §14.2): a tenant's AR or AW burst in, sub-bursts out.

One sub-burst leaves per cycle while the output is ready, and the next burst
is taken in the cycle its last piece leaves, so a stream of bursts becomes a
stream of sub-bursts without a bubble. A piece ends at the next interleave
boundary (which is where the channel changes), the next 4 KiB boundary (no
AXI burst may cross one, and a manager port must not see one that does), or
after ``frag_beats`` beats (the size of an entry's data slot), whichever
comes first; :func:`kvfabric.axi.split_burst` is the same rule in Python.

The piece on the output is held in registers, computed one cycle ahead: from
the tenant's burst in the cycle it is accepted, and from the registered
remainder of the burst (next address, beats left) in the cycle a piece
leaves. The piece's arithmetic (alignment, beats to the boundary, the
minimum with what is left, the byte count) is then off the path that runs
from the piece through the entry table's request offer and the channel's
request multiplexer into the arbiter's ingress; and the next address needs
no wide adder: a piece that ends at the boundary makes it the boundary (the
address above the block incremented, the block offset 0), and one that ends
after ``frag_beats`` beats cannot cross the boundary, so only the block
offset moves, by a constant per AxSIZE.

Bursts the front end does not carry to memory (FIXED, WRAP, the reserved
burst type, or AxSIZE wider than the data bus, spec §14.6) are cut into
pieces of ``frag_beats`` beats marked ``error``: they take entries like any
other burst, so that their error responses come back in order with the rest,
but never reach the arbiter.
"""

from amaranth.hdl import C, Cat, Module, Signal, Mux
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
        Sub-bursts, in the order of the burst's beats; every field a register.
    """

    def __init__(self, axi: AxiParams, channels: int):
        self._axi = axi
        self._channels = channels
        super().__init__({
            "burst": In(stream.Signature(address_layout(axi))),
            "piece": Out(stream.Signature(sub_burst_layout(axi, channels))),
        })

    def _cut(self, m, addr, left, size, error):
        """The piece that starts at ``addr`` with ``left`` beats still to cut,
        and where the burst goes on after it: ``(beats, bytes, next_addr)``."""
        axi = self._axi
        block = min(axi.interleave_bytes, PAGE_BYTES)
        block_bits = block.bit_length() - 1
        f = axi.frag_beats
        fit = Signal(9, name="cut_fit")                   # beats to the boundary, when at_boundary
        at_boundary = Signal(name="cut_at_boundary")      # the boundary comes no later than F beats
        after_frag = Signal(block_bits, name="cut_after_frag")  # block offset F beats on
        with m.Switch(size):
            for s in range(axi.max_size + 1):
                with m.Case(s):
                    # AxSIZE selects by a case per size: plain multiplexers
                    # and constants, no shifter by a 3-bit amount. ``unit`` is
                    # the aligned address's block offset in beats.
                    step = min(block, f << s) >> s          # F beats, or the whole block
                    unit = addr[s:block_bits]
                    m.d.comb += [
                        fit.eq((block >> s) - unit),
                        at_boundary.eq(unit >= (block >> s) - step),
                        after_frag.eq(Cat(C(0, s), unit + step)),
                    ]
        cap = Signal(9, name="cut_cap")
        beats = Signal(9, name="cut_beats")
        nbytes = Signal(len(self.piece.payload.bytes), name="cut_bytes")
        m.d.comb += [
            cap.eq(Mux(at_boundary & ~error, fit, f)),
            beats.eq(Mux(left < cap, left, cap)),
        ]
        with m.Switch(size):
            for s in range(axi.max_size + 1):
                with m.Case(s):
                    m.d.comb += nbytes.eq(beats << s)
        above = addr[block_bits:]
        next_addr = Signal(axi.addr_width, name="cut_next_addr")
        m.d.comb += next_addr.eq(Mux(at_boundary, Cat(C(0, block_bits), above + 1),
                                     Cat(after_frag, above)))
        return beats, nbytes, next_addr

    def elaborate(self, platform):
        axi, c = self._axi, self._channels
        m = Module()

        busy = Signal()
        size = Signal(3)
        ident = Signal(axi.id_width)
        error = Signal()
        p_addr = Signal(axi.addr_width)
        p_len = Signal(8)
        p_channel = Signal(len(self.piece.payload.channel))
        p_bytes = Signal(len(self.piece.payload.bytes))
        p_last = Signal()
        next_addr = Signal(axi.addr_width)   # the first byte after the piece on the output
        next_left = Signal(9)                # beats of the burst after the piece on the output

        # The piece cut in this cycle: from the tenant's burst when one is
        # accepted, else from the remainder of the current one.
        take = Signal()
        cut_addr = Signal(axi.addr_width)
        cut_left = Signal(9)
        cut_size = Signal(3)
        cut_error = Signal()
        b = self.burst.payload
        m.d.comb += [
            cut_addr.eq(Mux(take, b.addr, next_addr)),
            cut_left.eq(Mux(take, b.len + 1, next_left)),
            cut_size.eq(Mux(take, b.size, size)),
            cut_error.eq(Mux(take, (b.burst != BURST_INCR) | (b.size > axi.max_size), error)),
        ]
        beats, nbytes, after = self._cut(m, cut_addr, cut_left, cut_size, cut_error)

        il_bits = axi.interleave_bytes.bit_length() - 1
        ch_bits = (c - 1).bit_length()
        leaves = Signal()
        m.d.comb += [
            self.piece.valid.eq(busy),
            leaves.eq(self.piece.valid & self.piece.ready),
            self.burst.ready.eq(~busy | (leaves & p_last)),
            take.eq(self.burst.valid & self.burst.ready),
        ]
        with m.If(take | (leaves & ~p_last)):
            m.d.sync += [
                busy.eq(1),
                p_addr.eq(cut_addr),
                p_len.eq(beats - 1),
                p_channel.eq(cut_addr[il_bits:il_bits + ch_bits] if ch_bits else 0),
                p_bytes.eq(nbytes),
                p_last.eq(beats == cut_left),
                next_addr.eq(after),
                next_left.eq(cut_left - beats),
            ]
        with m.Elif(leaves):
            m.d.sync += busy.eq(0)
        with m.If(take):
            m.d.sync += [size.eq(b.size), ident.eq(b.id), error.eq(cut_error)]
        out = self.piece.payload
        m.d.comb += [
            out.id.eq(ident),
            out.addr.eq(p_addr),
            out.len.eq(p_len),
            out.size.eq(size),
            out.channel.eq(p_channel),
            out.bytes.eq(p_bytes),
            out.last.eq(p_last),
            out.error.eq(error),
        ]
        return m
