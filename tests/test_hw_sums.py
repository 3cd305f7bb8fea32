"""keys.sum_mod, keys.ge_sum and keys.ge_sum_wide against Python integers (Amaranth simulator).

The carry-save sums stand in for chains of additions on the channel's bucket,
starvation and telemetry paths (issue #42), so each operand count and
one-bit-addend placement they are used with is checked here directly: random
operands, biased towards the extremes where a dropped carry or a lost +1
shows. The seed is random, printed, and taken from ``KVFABRIC_SEED`` when set
(the ``seed`` fixture).
"""

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from kvfabric.hw.keys import ge_sum, ge_sum_wide, sum_mod

# (widths of pos, widths of neg, widths of the one-bit addends' count, result width)
SHAPES = [
    ((28, 16), (16,), 0, 29),
    ((28, 16), (16, 16), 0, 30),
    ((24,), (23, 24), 0, 24),
    ((24,), (24, 1, 24), 0, 26),
    ((16, 16, 16), (), 2, 18),
    ((16, 16), (16,), 2, 18),
    ((12,), (12, 12, 12, 12), 0, 14),
    ((8,), (8,), 0, 8),
]


def _value(rng, bits):
    r = rng.random()
    if r < 0.2:
        return 0
    if r < 0.4:
        return (1 << bits) - 1
    return rng.randrange(1 << bits)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{len(s[0])}p{len(s[1])}n{s[2]}o")
def test_sum_mod_and_ge_sum_match_integers(shape, seed):
    pos_w, neg_w, n_ones, width = shape
    rng = random.Random(seed)
    m = Module()
    pos = [Signal(w, name=f"p{k}") for k, w in enumerate(pos_w)]
    neg = [Signal(w, name=f"n{k}") for k, w in enumerate(neg_w)]
    ones = [Signal(name=f"o{k}") for k in range(n_ones)]
    total = sum_mod(m, "total", pos, neg, width, ones=ones)
    ge = ge_sum(m, "ge", pos, neg)
    sim = Simulator(m)

    async def testbench(ctx):
        for _ in range(400):
            pv = [_value(rng, w) for w in pos_w]
            nv = [_value(rng, w) for w in neg_w]
            ov = [rng.randrange(2) for _ in ones]
            for s, v in zip(pos + neg + ones, pv + nv + ov):
                ctx.set(s, v)
            where = f"pos {pv}, neg {nv}, ones {ov}"
            assert ctx.get(total) == (sum(pv) - sum(nv) + sum(ov)) % (1 << width), where
            assert ctx.get(ge) == (sum(pv) >= sum(nv)), where

    sim.add_testbench(testbench)
    sim.run()


def test_rounds_up_is_the_products_low_bits(seed):
    """hw.ingress.rounds_up (trailing zeros of bytes and weight) against the
    product's low WFRAC + TAG_SHIFT bits, on every power-of-two boundary."""
    from kvfabric.hw.ingress import rounds_up
    from kvfabric.spec import FabricParams

    p = FabricParams()
    k = p.wfrac + p.tag_shift
    rng = random.Random(seed)
    m = Module()
    b = Signal(p.bytes_bits)
    w = Signal(p.inv_weight_bits)
    up = Signal()
    m.d.comb += up.eq(rounds_up(p, b, w))
    cases = [(x << i, y << j) for i in range(p.bytes_bits) for j in range(p.inv_weight_bits)
             for x, y in ((1, 1), (3, 1), (1, 5))]
    cases += [(0, rng.randrange(1 << p.inv_weight_bits)), (rng.randrange(1 << p.bytes_bits), 0)]
    cases += [(rng.randrange(1 << p.bytes_bits), rng.randrange(1 << p.inv_weight_bits)) for _ in range(300)]
    sim = Simulator(m)

    async def testbench(ctx):
        for bv, wv in cases:
            bv &= (1 << p.bytes_bits) - 1
            wv &= (1 << p.inv_weight_bits) - 1
            ctx.set(b, bv)
            ctx.set(w, wv)
            assert ctx.get(up) == ((bv * wv) % (1 << k) != 0), (bv, wv)

    sim.add_testbench(testbench)
    sim.run()


# (width of the wide operand, widths of the other pos, widths of neg): the
# committed level against one or two heads' sizes (hw.keys' bucket tests).
WIDE_SHAPES = [(28, (16,), (16,)), (28, (16,), (16, 16)), (12, (16,), (16,))]


@pytest.mark.parametrize("shape", WIDE_SHAPES, ids=lambda s: f"w{s[0]}p{len(s[1])}n{len(s[2])}")
def test_ge_sum_wide_matches_integers(shape, seed):
    """ge_sum_wide decides by the wide operand's high bits above 2^k: values
    around 2^k and sums that land just either side of the right side are
    where a wrong k or a dropped bit would show."""
    wide_w, pos_w, neg_w = shape
    rng = random.Random(seed)
    m = Module()
    wide = Signal(wide_w, name="wide")
    pos = [Signal(w, name=f"p{k}") for k, w in enumerate(pos_w)]
    neg = [Signal(w, name=f"n{k}") for k, w in enumerate(neg_w)]
    ge = ge_sum_wide(m, "ge", wide, pos, neg)
    k = sum((1 << w) - 1 for w in neg_w).bit_length()
    sim = Simulator(m)
    counts = {"true": 0, "false": 0}

    async def testbench(ctx):
        for _ in range(600):
            nv = [_value(rng, w) for w in neg_w]
            pv = [_value(rng, w) for w in pos_w]
            r = rng.random()
            if r < 0.3:
                # Just either side of the right side.
                wv = max(0, sum(nv) - sum(pv) + rng.randrange(-2, 3))
            elif r < 0.6:
                wv = (1 << k) + rng.randrange(-3, 4)
            else:
                wv = _value(rng, wide_w)
            wv = min(max(wv, 0), (1 << wide_w) - 1)
            for s, v in zip([wide] + pos + neg, [wv] + pv + nv):
                ctx.set(s, v)
            want = wv + sum(pv) >= sum(nv)
            counts["true" if want else "false"] += 1
            assert ctx.get(ge) == want, f"wide {wv}, pos {pv}, neg {nv}"

    sim.add_testbench(testbench)
    sim.run()
    assert min(counts.values()) > 25, counts
