"""hw/axi/splitter.py (spec §14.2) in Amaranth's simulator against the split
rule as the spec writes it (:func:`kvfabric.axi.split_burst`, and
:func:`split_unsupported` for §14.6's bursts): random bursts under random
backpressure on both sides, every piece's address, length, size, channel,
bytes, last flag and error flag compared, and the splitter's timing rule
checked: a burst accepted in cycle t yields its first piece in t+1, and with
the output always ready the pieces of back-to-back bursts leave one a cycle.

The parameters cover an interleave smaller than ``frag_beats`` full beats
(pieces end at interleave boundaries), one larger (pieces end after
``frag_beats`` beats inside a block), a 4 KiB interleave, and address
wrap-around at the top of a narrow address space."""

import random

import pytest
from amaranth.sim import Simulator

from kvfabric.axi import AxiParams, BURST_INCR, split_burst, split_unsupported
from kvfabric.hw.axi.splitter import BurstSplitter

SEED = 2026_11_28
BURSTS = 100

CASES = {
    # name: (AxiParams, channels)
    "il64_f8": (AxiParams(addr_width=16, data_width=64, id_width=4, interleave_bytes=64, frag_beats=8), 4),
    "il256_f4": (AxiParams(addr_width=20, data_width=32, id_width=3, interleave_bytes=256, frag_beats=4), 2),
    "il4k_f16": (AxiParams(addr_width=13, data_width=128, id_width=2, interleave_bytes=4096, frag_beats=16), 8),
    "il32_f1": (AxiParams(addr_width=12, data_width=256, id_width=1, interleave_bytes=32, frag_beats=1), 1),
}


def draw_burst(rng, axi):
    """A burst aimed at boundaries: addresses near interleave and 4 KiB edges
    and the top of the address space, some bursts unsupported."""
    kind = rng.random()
    burst = BURST_INCR if kind < 0.85 else rng.choice([0, 2, 3])
    size = rng.randrange(axi.max_size + 1) if rng.random() < 0.95 else rng.randrange(axi.max_size + 1, 8)
    top = 1 << axi.addr_width
    edge = rng.choice([axi.interleave_bytes, 4096, top])
    addr = (rng.randrange(0, top, edge) if edge < top else 0) - rng.randrange(0, 80)
    addr = addr % top if rng.random() < 0.7 else rng.randrange(top)
    length = rng.choice([0, 1, 2, 3, 7, 15, rng.randrange(64), rng.randrange(256), 255])
    if burst == BURST_INCR and size <= axi.max_size:
        # An INCR burst may not cross 4 KiB (AXI): keep the tenant honest
        # except for a few, which the rule also cuts.
        if rng.random() < 0.8:
            room = (4096 - addr % 4096) >> size
            length = min(length, max(0, room - 1))
    return dict(id=rng.randrange(1 << axi.id_width), addr=addr, len=length, size=size, burst=burst)


def expected_pieces(b, axi, channels):
    """(addr, len, size, channel, bytes, last, error) of each piece, from the spec's rule."""
    if b["burst"] == BURST_INCR and b["size"] <= axi.max_size:
        return [(p.addr, p.beats - 1, p.size, p.channel, p.bytes, int(p.last), 0)
                for p in split_burst(b["addr"], b["len"] + 1, b["size"], axi, channels)]
    beats = split_unsupported(b["len"] + 1, axi)
    # Unsupported pieces never reach memory: only their count, lengths and
    # last flag matter (spec §14.6).
    return [(None, n - 1, b["size"], None, None, int(k == len(beats) - 1), 1) for k, n in enumerate(beats)]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("pressure", ["none", "both"])
def test_splitter_matches_the_split_rule(case, pressure):
    axi, channels = CASES[case]
    rng = random.Random(f"{SEED}-{case}-{pressure}")
    print(f"seed {SEED}-{case}-{pressure}")
    bursts = [draw_burst(rng, axi) for _ in range(BURSTS)]
    dut = BurstSplitter(axi, channels)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got = []         # (burst index, piece fields)
    first_piece_late = []

    total = sum(len(expected_pieces(b, axi, channels)) for b in bursts)

    async def bench(ctx):
        i = 0
        accepted_at = None
        cycle = 0
        pending_first = None
        while len(got) < total and cycle < 200_000:
            offer = i < len(bursts) and (pressure == "none" or rng.random() < 0.7)
            ready = pressure == "none" or rng.random() < 0.6
            if offer:
                b = bursts[i]
                for name, value in b.items():
                    ctx.set(getattr(dut.burst.payload, name), value)
            ctx.set(dut.burst.valid, offer)
            ctx.set(dut.piece.ready, ready)
            if ctx.get(dut.piece.valid):
                if pending_first is not None:
                    if cycle != pending_first + 1:
                        first_piece_late.append((accepted_at, cycle))
                    pending_first = None
                if ready:
                    p = dut.piece.payload
                    got.append((ctx.get(p.id), ctx.get(p.addr), ctx.get(p.len), ctx.get(p.size),
                                ctx.get(p.channel), ctx.get(p.bytes), ctx.get(p.last), ctx.get(p.error)))
            elif pressure == "none" and i > 0 and cycle > 0 and got and not got[-1][6]:
                # Output always ready and a burst under way: a bubble.
                raise AssertionError(f"no piece in cycle {cycle} while burst {i - 1} still has pieces")
            if offer and ctx.get(dut.burst.ready):
                accepted_at = cycle
                pending_first = cycle
                i += 1
            await ctx.tick()
            cycle += 1
        assert i == len(bursts), f"only {i} of {len(bursts)} bursts accepted in {cycle} cycles"

    sim.add_testbench(bench)
    sim.run()
    assert not first_piece_late, f"first piece not in the cycle after acceptance: {first_piece_late[:5]}"
    expected = [(b["id"], *piece) for b in bursts for piece in expected_pieces(b, axi, channels)]
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        ok = all(ev is None or gv == ev for gv, ev in zip(g, e))
        assert ok, f"piece {k}: got {g}, expected {e} (None: any)"


def test_bursts_back_to_back_leave_one_piece_a_cycle():
    """Single-piece bursts offered every cycle, output always ready: one piece
    per cycle, no bubble between bursts (the next burst is taken in the cycle
    the last piece leaves)."""
    axi, channels = CASES["il64_f8"]
    dut = BurstSplitter(axi, channels)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    valid_cycles = []

    async def bench(ctx):
        ctx.set(dut.piece.ready, 1)
        ctx.set(dut.burst.valid, 1)
        ctx.set(dut.burst.payload.burst, BURST_INCR)
        ctx.set(dut.burst.payload.size, 3)
        for cycle in range(20):
            ctx.set(dut.burst.payload.addr, 0x40 * cycle)
            ctx.set(dut.burst.payload.len, 0)
            valid_cycles.append(ctx.get(dut.piece.valid))
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    assert valid_cycles == [0] + [1] * 19
