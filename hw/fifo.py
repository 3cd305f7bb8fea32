"""Per-tenant queue: a head register in front of a small distributed-RAM ring.

The head that the selection logic compares comes straight from a register
(``q_head``), so no read-pointer mux sits in the selection loop (spec §11).
Entries behind the head live in a ``depth``-entry ring buffer (``q_ring``) with
one synchronous write port and one asynchronous read port: on FPGAs it maps to
LUT RAM (ECP5 ``DPR16X4``, 4 bits per cell), which costs a fraction of the
flip-flops and read multiplexers of a register file (issue #6 measured the
register form at about 570 LUT4s per queue on ECP5). A push while the queue is
non-empty always writes the ring, independently of the pop; the pop strobe
(derived from the arbitration winner, the latest signal of the cycle) only
selects the head register's next value and steps the read pointer and the
count.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["HeadQueue"]


class HeadQueue(wiring.Component):
    """Synchronous FIFO of ``depth`` entries whose head is a register.

    Parameters
    ----------
    shape : shape-like
        Shape of one entry.
    depth : int
        Number of entries, a positive integer.
    prefix : str
        Name prefix of the storage registers (the netlist state budget groups
        flip-flops by prefix; queue storage is ``q_*``).

    Members
    -------
    w_en : In(1)
        Push ``w_data``. The user guarantees room: ``level < depth`` (the
        channel's occupancy rule guarantees ``level <= depth - 1`` whenever it
        pushes, §4).
    w_data : In(shape)
    r_en : In(1)
        Pop the head. The user guarantees ``r_rdy``.
    r_rdy : Out(1)
        The queue is not empty (``r_data`` is valid).
    r_data : Out(shape)
        Head entry, driven directly by a register.
    pop_data : Out(shape)
        The head entry after a pop in this cycle (the oldest ring entry, or
        ``w_data`` when the ring is empty); valid when ``level >= 2`` or
        ``w_en``. The channel precomputes the next cycle's selection key from
        it (spec §11).
    ring_data : Out(shape)
        The ring's oldest entry (``pop_data`` when ``level >= 2``; ``w_data``
        at depth 1, which has no ring): for sums that take the ring's and the
        pushed entry's values apart and choose after adding (issue #42).
    level : Out(range(depth + 1))
        Number of entries.
    """

    def __init__(self, shape, depth, *, prefix="q"):
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise ValueError(f"Queue depth must be a positive integer, not {depth!r}")
        self._shape = shape
        self._depth = depth
        self._prefix = prefix
        super().__init__({
            "w_en":   In(1),
            "w_data": In(shape),
            "r_en":   In(1),
            "r_rdy":  Out(1),
            "r_data": Out(shape),
            "pop_data": Out(shape),
            "ring_data": Out(shape),
            "level":  Out(range(depth + 1)),
        })
        # The ring's pointers are attributes (not locals of elaborate) so that
        # the formal proof of FIFO order can state how they relate to the count.
        self.ring_read_ptr = Signal(range(depth), name=f"{prefix}_rd")
        self.ring_write_ptr = Signal(range(depth), name=f"{prefix}_wr")

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        pre = self._prefix
        # The head's payload needs no reset (r_rdy is 0 while count is 0):
        # without one, synthesis maps its load condition onto the flip-flops'
        # clock enable instead of a multiplexer per bit (ECP5: reset-over-enable
        # flip-flops cost a LUT4 and a PFUMX per bit).
        head = Signal(self._shape, name=f"{pre}_head", reset_less=True)
        count = Signal(range(depth + 1), name=f"{pre}_count")

        m.d.comb += [
            self.r_data.eq(head),
            self.r_rdy.eq(count != 0),
            self.level.eq(count),
        ]

        # The head after a pop: the ring's oldest entry, or w_data when the
        # ring is empty.
        on_pop = Signal.like(head, name=f"{pre}_head_on_pop")
        m.d.comb += [on_pop.eq(self.w_data), self.ring_data.eq(self.w_data)]

        if depth > 1:
            # The ring holds entries 1..count-1. Its depth is ``depth`` (a
            # power of two, spec §1) rather than depth - 1 so that the
            # pointers wrap by themselves; LUT RAM cells are 16 deep anyway.
            ring = Memory(shape=self._shape, depth=depth, init=[])
            m.submodules[f"{pre}_ring"] = ring
            wr_port = ring.write_port()
            rd_port = ring.read_port(domain="comb")
            rd, wr = self.ring_read_ptr, self.ring_write_ptr
            m.d.comb += [
                wr_port.addr.eq(wr),
                wr_port.data.eq(self.w_data),
                wr_port.en.eq(self.w_en & (count != 0)),
                rd_port.addr.eq(rd),
                self.ring_data.eq(rd_port.data),
            ]
            # A push while the queue is non-empty always lands in the ring; if
            # it also becomes the head (count == 1 with a pop) the read pointer
            # skips it.
            with m.If(self.w_en & (count != 0)):
                m.d.sync += wr.eq(wr + 1)
            with m.If(count >= 2):
                m.d.comb += on_pop.eq(rd_port.data)
            with m.If(self.r_en & ((count >= 2) | self.w_en)):
                m.d.sync += rd.eq(rd + 1)

        m.d.comb += self.pop_data.eq(on_pop)

        # Without a pop the head keeps its value unless the queue is empty,
        # when it takes w_data = on_pop: one two-way mux per bit and a clock
        # enable.
        with m.If(self.r_en | (count == 0)):
            m.d.sync += head.eq(on_pop)

        # Compare before subtracting: count - 1 would be signed.
        with m.If(self.w_en & ~self.r_en):
            m.d.sync += count.eq(count + 1)
        with m.Elif(self.r_en & ~self.w_en):
            m.d.sync += count.eq(count - 1)
        return m
