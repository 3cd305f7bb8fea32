"""Register-based per-tenant queue with a first-word-fall-through head.

The queue is a shift register: entry 0 is always the head, so the head fields
that the selection logic compares come straight from flip-flops (no read-pointer
mux in the selection loop, spec §11). A pop shifts every entry down by one; the
pop strobe (derived from the arbitration winner, the latest signal of the
cycle) is the last mux select in front of each entry, everything else that
decides an entry's next value is computed from registers in parallel.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ShiftQueue"]


class ShiftQueue(wiring.Component):
    """Synchronous FIFO of ``depth`` register entries with the head in register 0.

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
        Push ``w_data``. The user guarantees room: ``level < depth`` or ``r_en``.
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
        mem = [Signal(self._shape, name=f"{self._prefix}_mem_{k}") for k in range(depth)]
        count = Signal(range(depth + 1), name=f"{self._prefix}_count")

        m.d.comb += [
            self.r_data.eq(mem[0]),
            self.r_rdy.eq(count != 0),
            self.level.eq(count),
        ]

        # Push position without and with a simultaneous pop, decoded from the
        # count register only, so that r_en selects between two ready values.
        for k in range(depth):
            at_tail = self.w_en & (count == k)
            at_tail_pop = self.w_en & (count == k + 1)
            above = mem[k + 1] if k + 1 < depth else mem[k]
            keep = Signal.like(mem[k], name=f"{self._prefix}_keep_{k}")
            shift = Signal.like(mem[k], name=f"{self._prefix}_shift_{k}")
            m.d.comb += [
                keep.eq(mem[k]),
                shift.eq(above),
            ]
            with m.If(at_tail):
                m.d.comb += keep.eq(self.w_data)
            with m.If(at_tail_pop):
                m.d.comb += shift.eq(self.w_data)
            with m.If(self.r_en):
                m.d.sync += mem[k].eq(shift)
            with m.Else():
                m.d.sync += mem[k].eq(keep)

        # Compare before subtracting: count - 1 would be signed.
        with m.If(self.w_en & ~self.r_en):
            m.d.sync += count.eq(count + 1)
        with m.Elif(self.r_en & ~self.w_en):
            m.d.sync += count.eq(count - 1)
        return m
