"""The floor cores of docs/synthesis.md "The wall" select what the spec's rule selects.

Their Fmax is only an upper bound for the arbiter if they do the arbiter's
work: each cycle the one-hot winner must be the smallest (class, order
modulo 2^bits, index) among the competing keys, with keys that follow the
winner of the cycle before.  The oracle here is that definition, on keys
tracked in Python.
"""

import argparse
import json
import random

import pytest
from amaranth.sim import Simulator

from kvfabric.scripts.synth.floor import IDLE_CLASS, CORES, generate

N, BITS = 5, 8


def expected_winner(cls, order):
    """Index of the smallest competing key, or None; orders compare modulo 2^BITS."""
    best = None
    for i in range(len(cls)):
        if cls[i] == IDLE_CLASS:
            continue
        if best is None:
            best = i
            continue
        # i precedes best: smaller class, or same class and order_i - order_best wraps negative.
        before = cls[i] < cls[best] or (cls[i] == cls[best] and (order[i] - order[best]) % (1 << BITS)
                                       >= 1 << (BITS - 1))
        if before:
            best = i
    return best


def span_within_window(cls, order):
    """Whether the competing order values lie within a quarter of the modular
    range of each other, as spec §6.4's lag window keeps real tags (the floor
    cores have no clamp: outside it the modular order is not transitive)."""
    values = [o for c, o in zip(cls, order) if c != IDLE_CLASS]
    if not values:
        return True
    lo = max(values, key=lambda o: sum((o - v) % (1 << BITS) >= 1 << (BITS - 1) for v in values))
    return all((v - lo) % (1 << BITS) < 1 << (BITS - 2) for v in values)


def _random_class(rng):
    # Few classes so that ties on the class, and on the order, are common.
    return rng.choice([0, 1, 1, 5, 5, IDLE_CLASS])


def _order_near(rng, base):
    """An order value within an eighth of the modular range of ``base`` (as the lag window keeps tags)."""
    return (base + rng.randrange(-(1 << (BITS - 3)), 1 << (BITS - 3))) % (1 << BITS)


def _simulate(dut, testbench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("core", [c for c in CORES if c not in ("fast", "timestamp")])
def test_floor_core_grants_the_smallest_key(core, seed):
    """allpairs and matrix: the smallest key of this cycle; stale: of the cycle before."""
    rng = random.Random(seed)
    dut = CORES[core](N, BITS)
    counts = {"grants": 0, "class_ties": 0, "unchecked": 0}

    async def testbench(ctx):
        cls, order = [IDLE_CLASS] * N, [0] * N
        seen = (list(cls), list(order))   # the keys the selection compares
        base = 0
        for cycle in range(600):
            won = [i for i in range(N) if ctx.get(dut.win) >> i & 1]
            assert len(won) <= 1, f"cycle {cycle}: winners {won}"
            if core != "stale":
                seen = (cls, order)
            want = expected_winner(*seen)
            if span_within_window(*seen):
                assert won == ([] if want is None else [want]), f"cycle {cycle}: keys {cls} {order}"
            else:
                counts["unchecked"] += 1
                want = won[0] if won else None
            counts["grants"] += want is not None
            counts["class_ties"] += want is not None and sum(c == cls[want] for c in cls) > 1
            base = (base + rng.randrange(4)) % (1 << BITS)
            if core == "stale":
                seen = (list(cls), list(order))   # next cycle compares this cycle's keys
            for i in range(N):
                keep_cls, pop_cls = _random_class(rng), _random_class(rng)
                ctx.set(dut.keep_class[i], keep_cls)
                ctx.set(dut.pop_class[i], pop_cls)
                if core != "matrix":
                    keep_ord, pop_ord = _order_near(rng, base), _order_near(rng, base)
                    ctx.set(dut.keep_order[i], keep_ord)
                    ctx.set(dut.pop_order[i], pop_ord)
                else:
                    cost = rng.randrange(1 << (BITS - 4))
                    ctx.set(dut.cost[i], cost)
                    keep_ord, pop_ord = order[i], (order[i] + cost) % (1 << BITS)
                cls[i], order[i] = (pop_cls, pop_ord) if i == want else (keep_cls, keep_ord)
            await ctx.tick()

    _simulate(dut, testbench)
    assert counts["grants"] > 400 and counts["class_ties"] > 100 and counts["unchecked"] < 60, counts


def test_fast_core_grants_the_smallest_key_with_the_cost_a_cycle_ahead(seed):
    """fast: the smallest key every cycle, over 4,000 cycles of 8 tenants, where
    a winner's order grows by the ``next_cost`` it was given the cycle before
    it won (FastMatrixFloor's interface: MatrixFloor's cost, one cycle earlier)."""
    n, cycles = 8, 4000
    rng = random.Random(seed)
    dut = CORES["fast"](n, BITS)
    counts = {"grants": 0, "class_ties": 0, "order_ties": 0, "wraps": 0, "unchecked": 0}

    async def testbench(ctx):
        cls, order, cost_given, ref = [IDLE_CLASS] * n, [0] * n, [0] * n, 0
        for cycle in range(cycles):
            won = [i for i in range(n) if ctx.get(dut.win) >> i & 1]
            want = expected_winner(cls, order)
            if span_within_window(cls, order):
                assert won == ([] if want is None else [want]), \
                    f"cycle {cycle}: classes {cls} orders {order}, won {won}, want {want}"
            else:
                counts["unchecked"] += 1
                want = won[0] if won else None
            if want is not None:
                counts["grants"] += 1
                rivals = [i for i in range(n) if i != want and cls[i] == cls[want]]
                counts["class_ties"] += bool(rivals)
                counts["order_ties"] += any(order[i] == order[want] for i in rivals)
                counts["wraps"] += order[want] + cost_given[want] >= 1 << BITS
            ref = order[want] if want is not None else ref
            for i in range(n):
                keep_cls, pop_cls = _random_class(rng), _random_class(rng)
                if 1 << (BITS - 3) <= (order[i] - ref) % (1 << BITS) < 1 << (BITS - 1):
                    keep_cls = pop_cls = IDLE_CLASS   # far ahead: held back, as spec §6.4's lag window would
                cost = rng.choice([0, 0, rng.randrange(1 << (BITS - 4))])
                ctx.set(dut.keep_class[i], keep_cls)
                ctx.set(dut.pop_class[i], pop_cls)
                ctx.set(dut.next_cost[i], cost)
                if i == want:
                    cls[i], order[i] = pop_cls, (order[i] + cost_given[i]) % (1 << BITS)
                else:
                    cls[i] = keep_cls
                cost_given[i] = cost   # charged if i wins next cycle
            await ctx.tick()

    _simulate(dut, testbench)
    print(counts)
    assert (counts["grants"] > 3000 and counts["class_ties"] > 1000 and counts["order_ties"] > 50
            and counts["wraps"] > 20 and counts["unchecked"] < cycles // 100), counts


def test_floor_verilog_has_the_top_module_and_rejects_bad_widths(tmp_path):
    from kvfabric.scripts.synth.floor import main

    assert "module floor(" in generate("matrix", 4, 8)
    out = tmp_path / "f.v"
    assert main(["--core", "allpairs", "--tenants", "4", "--order-bits", "8", "--out", str(out)]) == 0
    assert "module floor(" in out.read_text()
    for bad in (["--tenants", "1"], ["--order-bits", "40"]):
        with pytest.raises(SystemExit):
            main(["--core", "allpairs", "--out", str(out), *bad])


def test_floor_report_lists_every_core_with_its_seeds(tmp_path):
    from kvfabric.scripts.synth.floor_report import merge_rows, order_widths, write_reports

    rows = [dict(core="allpairs", order_bits=24, fmax_by_seed={"1": 127.4, "2": None}, fmax_median_mhz=127.4,
                 critical_path_ns=7.8, routing_ns=5.6, carry_steps=18, luts=990, carry=336, ffs_with_harness=680,
                 gates_default=4092, levels_default=28.0, revision="d53bcba632cc",
                 **{"levels_kogge-stone": 24.0, "gates_kogge-stone": 4163})]
    write_reports(rows, tmp_path / "f.json", tmp_path / "f.md")
    md = (tmp_path / "f.md").read_text()
    assert ("| allpairs | 24 | 127.4 | 1: 127.4, 2: timeout | 7.8 (5.6) | 18 | 990 | 336 | 680 | 28 / 24 | "
            "4092 / 4163 | d53bcba632cc |") in md
    assert json.loads((tmp_path / "f.json").read_text())["cores"] == rows
    assert order_widths("24, 8") == [24, 8]
    for bad in ("3", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            order_widths(bad)


def test_floor_report_merge_replaces_what_it_measures_again_and_keeps_the_rest():
    from kvfabric.scripts.synth.floor_report import merge_rows

    old = [{"core": "allpairs", "order_bits": 24, "at": "old"}, {"core": "matrix", "order_bits": 24, "at": "old"},
           {"core": "matrix", "order_bits": 8, "at": "old"}]
    new = [{"core": "fast", "order_bits": 24, "at": "new"}, {"core": "matrix", "order_bits": 24, "at": "new"}]
    assert [(r["core"], r["order_bits"], r["at"]) for r in merge_rows(old, new)] == [
        ("allpairs", 24, "old"), ("matrix", 24, "new"), ("matrix", 8, "old"), ("fast", 24, "new")]
    assert merge_rows([], new) == new
