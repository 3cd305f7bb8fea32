"""Register-based per-tenant queue with a first-word-fall-through head register.

The head that the selection logic compares comes straight from a register
(``q_head``), so no read-pointer mux sits in the selection loop (spec §11).
Entries behind the head live in a circular buffer of ``depth - 1`` registers
that is written on every push while the queue is non-empty, independently of
the pop. The pop strobe (derived from the arbitration winner, the latest
signal of the cycle) therefore only selects the head register's next value and
steps the read pointer and the count: about 80 loads instead of the
``depth * width`` of a shift register.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
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
            "level":  Out(range(depth + 1)),
        })

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        m = Module()
        depth = self._depth
        pre = self._prefix
        head = Signal(self._shape, name=f"{pre}_head")
        count = Signal(range(depth + 1), name=f"{pre}_count")

        m.d.comb += [
            self.r_data.eq(head),
            self.r_rdy.eq(count != 0),
            self.level.eq(count),
        ]

        # Next head if popped / if not popped, both from registers and w_data;
        # r_en picks one at the very end.
        on_pop = Signal.like(head, name=f"{pre}_head_on_pop")
        on_keep = Signal.like(head, name=f"{pre}_head_on_keep")
        m.d.comb += [
            on_pop.eq(self.w_data),
            on_keep.eq(head),
        ]
        with m.If(count == 0):
            m.d.comb += on_keep.eq(self.w_data)

        if depth > 1:
            slots = depth - 1
            buf = [Signal(self._shape, name=f"{pre}_buf_{k}") for k in range(slots)]
            rd = Signal(range(slots), name=f"{pre}_rd")
            wr = Signal(range(slots), name=f"{pre}_wr")

            def step(ptr):
                # Wrap at slots (not a power of two in general).
                return 0 if slots == 1 else Mux(ptr == slots - 1, 0, ptr + 1)

            # The buffer holds entries 1..count-1. A push while the queue is
            # non-empty always lands in the buffer; if it also becomes the head
            # (count == 1 with a pop) the read pointer skips it.
            with m.If(self.w_en & (count != 0)):
                for k in range(slots):
                    with m.If(wr == k):
                        m.d.sync += buf[k].eq(self.w_data)
                m.d.sync += wr.eq(step(wr))
            with m.If(count >= 2):
                with m.Switch(rd):
                    for k in range(slots):
                        with m.Case(k):
                            m.d.comb += on_pop.eq(buf[k])
            with m.If(self.r_en & ((count >= 2) | self.w_en)):
                m.d.sync += rd.eq(step(rd))

        with m.If(self.r_en):
            m.d.sync += head.eq(on_pop)
        with m.Else():
            m.d.sync += head.eq(on_keep)

        # Compare before subtracting: count - 1 would be signed.
        with m.If(self.w_en & ~self.r_en):
            m.d.sync += count.eq(count + 1)
        with m.Elif(self.r_en & ~self.w_en):
            m.d.sync += count.eq(count - 1)
        return m
