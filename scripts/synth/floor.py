"""Floor cores: the least logic the spec's one-cycle selection keeps in a loop (issue #15).

Usage::

    python -m kvfabric.scripts.synth.floor --core allpairs|matrix|fast|stale|timestamp
                                            [--order-bits 24] [--tenants 8] --out build/floor.v

then ``python -m kvfabric.scripts.synth --verilog build/floor.v --top floor
--targets ecp5_1ch,generic``.  docs/synthesis.md "The wall" quotes the results.

Spec §6.2 and §11 make every grant's charge visible to the next cycle's
selection: the winner of cycle t is chosen from keys that already reflect the
winner of t - 1.  Whatever else a core does, that recurrence is one cycle of
logic.  These cores keep only it, so that their routed Fmax and gate depth are
an upper bound on what a core of the same structure can reach (a real core
adds buckets, eligibility, queues and configuration to the same cycle):

``allpairs``
    Today's structure (spec §11): per tenant a registered key (a 4-bit class,
    15 = not competing, and a ``order_bits`` order value compared modulo
    2^order_bits); per pair of tenants one order comparison and a class
    comparison; a one-hot winner (the smallest (class, order, index)); every
    key register loads one of two candidates chosen by the winner.  The
    candidates are inputs, so the logic that computes them from the state is
    left out.
``matrix``
    The comparisons taken out of the selection (PIFO, XiangShan's age
    matrix): per pair a registered precedence bit, so the winner is an AND
    of registered bits.  The exact rule then needs next cycle's bits from
    next cycle's keys, which depend on this cycle's winner: three
    comparisons per pair (neither, the higher or the lower tenant wins),
    chosen by the winner, of candidate keys computed from the state in the
    same cycle.  The least such computation is kept: a winner's order value
    grows by its next cost (an input), a kept one stays; every class may
    change (arrivals, bucket refills: inputs).
``fast``
    The same exact matrix with nothing but the winner in the loop (issue
    #25): per pair the class relation (less, equal) and the order bit
    registered, the precedence one LUT of them; the winner's next order
    value held in a register a cycle ahead, so that the next order bit is
    one subtraction from registers (two per pair, one for either winner,
    and the registered bit kept when neither wins) and the next class bits
    come from comparisons of the class inputs; all of them chosen by the
    winner.  The cost of a grant is an input one cycle earlier than in
    ``matrix`` (:class:`FastMatrixFloor`).
``timestamp``
    Not a selection floor but a whole channel (queues, buckets, tags, V,
    urgency, credits) under a candidate timestamp rule (GCRA buckets),
    selecting with ``fast``'s matrix: what the rest of the channel costs
    around the loop (:mod:`.floor_timestamp`; docs/synthesis.md "A timestamp
    rule").
``stale``
    Not the spec's rule: ``allpairs`` with the comparisons registered, so
    that the winner of cycle t is the smallest key of cycle t - 1 and a
    winner's new key counts one cycle late (it may win twice on one key).
    What one cycle of staleness would buy, for the wall's "what would move
    it".
"""

import argparse

from amaranth.back import verilog
from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .floor_timestamp import TimestampFloor

__all__ = ["CLASS_BITS", "IDLE_CLASS", "CORES", "AllPairsFloor", "MatrixFloor", "StaleFloor", "FastMatrixFloor",
           "generate", "main"]

#: Key classes as in hw/channel.py: 0 urgent, 1..4 guaranteed, 5 burst, 15 idle.
CLASS_BITS = 4
IDLE_CLASS = 15


def _class_less(cls_a, cls_b):
    """Class a below class b, in LUTs (as hw/keys.py's lt_logic), not a carry chain."""
    lt = C(0, 1)
    for k in range(CLASS_BITS):
        lt = (~cls_a[k] & cls_b[k]) | (~(cls_a[k] ^ cls_b[k]) & lt)
    return lt


def _order_less(order_a, order_b, bits):
    """Order a before order b modulo 2^bits: the sign bit of one subtraction."""
    return (order_a - order_b)[bits - 1]


def _precedes(cls_a, order_a, cls_b, order_b, bits):
    """Key a strictly before key b: smaller class, or the same class and an
    order value less modulo 2^bits (spec §6.1)."""
    return _class_less(cls_a, cls_b) | ((cls_a == cls_b) & _order_less(order_a, order_b, bits))


def _one_hot_winner(m, competes, first):
    """``win[i]``: i competes and nobody precedes it; ties go to the lower index.

    A tenant that does not compete has the idle class, after every other, so
    it precedes nobody (hw/channel.py's credit gate is left out)."""
    n = len(competes)
    win = []
    for i in range(n):
        terms = [competes[i]] + [first[i, lo] for lo in range(i)]
        terms += [~first[hi, i] for hi in range(i + 1, n)]
        w = Signal(name=f"win_{i}")
        m.d.comb += w.eq(Cat(*terms).all())
        win.append(w)
    return win


class AllPairsFloor(wiring.Component):
    """Registered keys, all-pairs comparison, one-hot winner, two-way key load."""

    def __init__(self, tenants=8, order_bits=24):
        self.tenants, self.order_bits = tenants, order_bits
        super().__init__({
            "keep_class": In(CLASS_BITS).array(tenants), "keep_order": In(order_bits).array(tenants),
            "pop_class": In(CLASS_BITS).array(tenants), "pop_order": In(order_bits).array(tenants),
            "win": Out(tenants),
        })

    def elaborate(self, platform):
        m = Module()
        n, w = self.tenants, self.order_bits
        cls = [Signal(CLASS_BITS, name=f"key_class_{i}", init=IDLE_CLASS) for i in range(n)]
        order = [Signal(w, name=f"key_order_{i}") for i in range(n)]
        first = {}
        for hi in range(n):
            for lo in range(hi):
                f = Signal(name=f"first_{hi}_{lo}")
                m.d.comb += f.eq(_precedes(cls[hi], order[hi], cls[lo], order[lo], w))
                first[hi, lo] = f
        win = _one_hot_winner(m, [c != IDLE_CLASS for c in cls], first)
        for i in range(n):
            m.d.sync += [cls[i].eq(Mux(win[i], self.pop_class[i], self.keep_class[i])),
                         order[i].eq(Mux(win[i], self.pop_order[i], self.keep_order[i]))]
        m.d.comb += self.win.eq(Cat(*win))
        return m


class StaleFloor(AllPairsFloor):
    """:class:`AllPairsFloor` with registered comparisons: the selection sees keys one cycle old."""

    def elaborate(self, platform):
        m = Module()
        n, w = self.tenants, self.order_bits
        cls = [Signal(CLASS_BITS, name=f"key_class_{i}", init=IDLE_CLASS) for i in range(n)]
        order = [Signal(w, name=f"key_order_{i}") for i in range(n)]
        first = {}
        for hi in range(n):
            for lo in range(hi):
                f = Signal(name=f"first_{hi}_{lo}")
                m.d.sync += f.eq(_precedes(cls[hi], order[hi], cls[lo], order[lo], w))
                first[hi, lo] = f
        competes = [Signal(name=f"competes_{i}") for i in range(n)]
        m.d.sync += [competes[i].eq(cls[i] != IDLE_CLASS) for i in range(n)]
        win = _one_hot_winner(m, competes, first)
        for i in range(n):
            m.d.sync += [cls[i].eq(Mux(win[i], self.pop_class[i], self.keep_class[i])),
                         order[i].eq(Mux(win[i], self.pop_order[i], self.keep_order[i]))]
        m.d.comb += self.win.eq(Cat(*win))
        return m


class MatrixFloor(wiring.Component):
    """Registered precedence bits, AND winner, next bits from three comparisons per pair."""

    #: The port that says by how much a winner's order grows.
    COST_PORT = "cost"

    def __init__(self, tenants=8, order_bits=24):
        self.tenants, self.order_bits = tenants, order_bits
        super().__init__({
            self.COST_PORT: In(order_bits).array(tenants), "pop_class": In(CLASS_BITS).array(tenants),
            "keep_class": In(CLASS_BITS).array(tenants), "win": Out(tenants),
        })

    def elaborate(self, platform):
        m = Module()
        n, w = self.tenants, self.order_bits
        cls = [Signal(CLASS_BITS, name=f"key_class_{i}", init=IDLE_CLASS) for i in range(n)]
        order = [Signal(w, name=f"key_order_{i}") for i in range(n)]
        first = {(hi, lo): Signal(name=f"prec_{hi}_{lo}") for hi in range(n) for lo in range(hi)}
        win = _one_hot_winner(m, [c != IDLE_CLASS for c in cls], first)
        popped = [Signal(w, name=f"popped_order_{i}") for i in range(n)]
        m.d.comb += [popped[i].eq(order[i] + self.cost[i]) for i in range(n)]
        for hi in range(n):
            for lo in range(hi):
                pop, keep = self.pop_class, self.keep_class
                m.d.sync += first[hi, lo].eq(Mux(
                    win[hi], _precedes(pop[hi], popped[hi], keep[lo], order[lo], w),
                    Mux(win[lo], _precedes(keep[hi], order[hi], pop[lo], popped[lo], w),
                        _precedes(keep[hi], order[hi], keep[lo], order[lo], w))))
        for i in range(n):
            m.d.sync += cls[i].eq(Mux(win[i], self.pop_class[i], self.keep_class[i]))
            with m.If(win[i]):
                m.d.sync += order[i].eq(popped[i])
        m.d.comb += self.win.eq(Cat(*win))
        return m


class FastMatrixFloor(MatrixFloor):
    """The exact precedence matrix with every next bit one carry chain, or none, from registers.

    Per pair (hi, lo) three registered bits: ``class_less`` (hi's class below
    lo's), ``class_equal`` and ``order_less`` (hi's order before lo's modulo
    2^order_bits); the precedence is one LUT of them.  Per tenant a registered
    ``competes`` bit, its order and ``next_order`` = order + the cost of its
    next grant, held one cycle ahead.  The next pair bits, chosen by the
    winner bits (a mux after the winner, the only logic in the loop):

    - the class bits from three candidate comparisons of the class inputs
      (neither, hi or lo wins), which do not depend on the winner;
    - the order bit: kept when neither wins (neither order changes), else the
      sign of ``next_order[hi] - order[lo]`` (hi wins) or ``order[hi] -
      next_order[lo]`` (lo wins): two subtractors per pair, from registers.

    ``next_order`` loads ``next_order + next_cost`` (the tenant wins: its new
    order is the old ``next_order``) or ``order + next_cost``: two adders per
    tenant from registers, chosen by the winner bit.

    Interface: as :class:`MatrixFloor`, but the cost of a grant is sampled one
    cycle earlier: ``next_cost[i]`` in cycle t is what tenant i's order grows
    by if it wins in cycle t + 1 (MatrixFloor's ``cost[i]`` of cycle t + 1).
    Nobody wins in cycle 0 (every class resets to idle), so with that shift
    the winners are MatrixFloor's, cycle for cycle.
    """

    COST_PORT = "next_cost"

    def elaborate(self, platform):
        m = Module()
        n, w = self.tenants, self.order_bits
        pop, keep, cost = self.pop_class, self.keep_class, self.next_cost
        order = [Signal(w, name=f"key_order_{i}") for i in range(n)]
        next_order = [Signal(w, name=f"next_order_{i}") for i in range(n)]
        competes = [Signal(name=f"competes_{i}") for i in range(n)]
        pair, first = {}, {}
        for hi in range(n):
            for lo in range(hi):
                less, equal, before = pair[hi, lo] = [Signal(name=f"{what}_{hi}_{lo}") for what in
                                                      ("class_less", "class_equal", "order_less")]
                first[hi, lo] = Signal(name=f"prec_{hi}_{lo}")
                m.d.comb += first[hi, lo].eq(less | (equal & before))
        win = _one_hot_winner(m, competes, first)

        for (hi, lo), (less, equal, before) in pair.items():
            def pick(if_hi, if_lo, if_neither):
                return Mux(win[hi], if_hi, Mux(win[lo], if_lo, if_neither))
            m.d.sync += [
                less.eq(pick(_class_less(pop[hi], keep[lo]), _class_less(keep[hi], pop[lo]),
                             _class_less(keep[hi], keep[lo]))),
                equal.eq(pick(pop[hi] == keep[lo], keep[hi] == pop[lo], keep[hi] == keep[lo])),
                before.eq(pick(_order_less(next_order[hi], order[lo], w),
                               _order_less(order[hi], next_order[lo], w), before)),
            ]
        for i in range(n):
            m.d.sync += [competes[i].eq(Mux(win[i], pop[i] != IDLE_CLASS, keep[i] != IDLE_CLASS)),
                         next_order[i].eq(Mux(win[i], next_order[i] + cost[i], order[i] + cost[i]))]
            with m.If(win[i]):
                m.d.sync += order[i].eq(next_order[i])
        m.d.comb += self.win.eq(Cat(*win))
        return m


CORES = {"allpairs": AllPairsFloor, "matrix": MatrixFloor, "stale": StaleFloor, "fast": FastMatrixFloor,
         "timestamp": TimestampFloor}


def generate(core, tenants=8, order_bits=24):
    """Verilog of one floor core, top module ``floor``."""
    text = verilog.convert(CORES[core](tenants, order_bits), name="floor", emit_src=False)
    return text.decode() if isinstance(text, (bytes, bytearray)) else text


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.synth.floor",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--core", choices=list(CORES), required=True)
    ap.add_argument("--tenants", type=int, default=8, help="tenants, 2..16 (default 8)")
    ap.add_argument("--order-bits", type=int, default=24,
                    help="order value width, 4..32 (default 24: spec §11's timestamp/finish-tag order)")
    ap.add_argument("--out", required=True, help="Verilog file to write")
    args = ap.parse_args(argv)
    if not 2 <= args.tenants <= 16:
        ap.error(f"--tenants {args.tenants}: allowed 2..16")
    if not 4 <= args.order_bits <= 32:
        ap.error(f"--order-bits {args.order_bits}: allowed 4..32")
    with open(args.out, "w", newline="\n") as f:
        f.write(generate(args.core, args.tenants, args.order_bits))
    print(f"wrote {args.out} ({args.core}, {args.tenants} tenants, {args.order_bits}-bit order)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
