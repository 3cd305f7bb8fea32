"""The stimulus file and grant log of the trace-driven co-simulation (issue #16).

Why a file format of its own: for a 10 M-cycle soak nothing may pass through
Python per cycle on the simulator side.  Python writes every input event once
(this format), the plain-Verilog testbench of :mod:`kvfabric.tb.trace_tb` reads
it with ``$fscanf`` as the simulation reaches each event's cycle and writes
the grant log with ``$fwrite``; the golden model (:mod:`kvfabric.tb.trace_model`)
reads the same events, and :mod:`kvfabric.tb.trace_compare` compares the logs.

Stimulus: one event per line, seven decimal integers ``op cycle a b c d e``,
sorted by ``cycle`` (global cycles: cycle 0 is the first cycle after the
testbench's initial reset; resets inside the run do not restart it):

====  =========  ==============================================================
op    name       fields
====  =========  ==============================================================
1     RESET      a = cycles: ``rst`` high in cycles cycle .. cycle+a-1
2     WRITE      a = address, b = data, c = strobes: an AXI4-Lite write presented
                 from ``cycle`` (AW and W together) until both handshakes
3     MODE       a = fcfs (upstream driver order), b = idle, c = backpressure,
                 d = credit_return probability, each in 1/4096
4     MEMORY     a / b = B, the memory side's bytes per cycle (spec §8)
5     REQ        a = channel, b = tenant tag, c = bytes, d = id: a request that
                 arrives at the channel's upstream driver in ``cycle``
6     ZERO       every bucket level deposited to 0 before ``cycle`` is driven
                 (the replay engine's alignment with the model, see trace_sim)
7     SEED       a, b = low and high 32 bits of the per-cycle random draws' seed
8     WAIT       last event: from ``cycle`` on, stop when a grants have been
                 transferred in all (``E``), or after b cycles without one (``S``)
9     END        last event: the last simulated cycle is ``cycle - 1``
====  =========  ==============================================================

Per-cycle randomness (idle insertion, extra backpressure, credit returns) is
not in the file: both sides draw it from :func:`draw`, a counter-based hash
(splitmix64's finaliser) of (seed, cycle, channel), so a side that skips idle
cycles skips the draws too, and 40 bits per channel per cycle never have to be
read from a file.

Grant log (written by the testbench, and in the same form by the model):
``G cycle channel tenant bytes id kind`` per transferred grant, ``A cycle
address`` per AXI write at the cycle of its later handshake, ``E cycle`` at
the end, ``S cycle`` instead if a WAIT stopped for lack of progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "RESET", "WRITE", "MODE", "MEMORY", "REQ", "ZERO", "SEED", "WAIT", "END", "OP_NAMES",
    "PROB_ONE", "Event", "write_stimulus", "read_stimulus", "draw", "split_draw",
    "pending_depth",
]

RESET, WRITE, MODE, MEMORY, REQ, ZERO, SEED, WAIT, END = 1, 2, 3, 4, 5, 6, 7, 8, 9
OP_NAMES = {RESET: "RESET", WRITE: "WRITE", MODE: "MODE", MEMORY: "MEMORY", REQ: "REQ",
            ZERO: "ZERO", SEED: "SEED", WAIT: "WAIT", END: "END"}
#: Probabilities are integers in 1/PROB_ONE (12-bit fields of one draw).
PROB_ONE = 4096

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


@dataclass(frozen=True, slots=True)
class Event:
    op: int
    cycle: int
    a: int = 0
    b: int = 0
    c: int = 0
    d: int = 0
    e: int = 0


def write_stimulus(path, events) -> int:
    """Write ``events`` (sorted by cycle) to ``path``; returns how many."""
    n = 0
    last = -1
    with open(path, "w") as f:
        for ev in events:
            if ev.cycle < last:
                raise ValueError(f"{path}: event {n} ({OP_NAMES.get(ev.op, ev.op)}) at cycle "
                                 f"{ev.cycle} comes after cycle {last}; events must be sorted")
            last = ev.cycle
            f.write(f"{ev.op} {ev.cycle} {ev.a} {ev.b} {ev.c} {ev.d} {ev.e}\n")
            n += 1
    return n


def read_stimulus(path):
    """Yield the events of a stimulus file, naming file and line on a bad one."""
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 7 or not all(p.isdigit() for p in parts):
                raise ValueError(f"{path}:{lineno}: expected seven unsigned decimal integers "
                                 f"'op cycle a b c d e', got {line.strip()!r}")
            op, cycle, a, b, c, d, e = map(int, parts)
            if op not in OP_NAMES:
                raise ValueError(f"{path}:{lineno}: unknown op {op} (allowed: {sorted(OP_NAMES)})")
            yield Event(op, cycle, a, b, c, d, e)


def draw(seed: int, cycle: int, channel: int, channels: int) -> int:
    """64 random bits of (cycle, channel): splitmix64's output function of
    ``seed + (cycle * channels + channel + 1) * golden``; the testbench computes
    exactly this in Verilog (tb/trace_tb.py)."""
    z = (seed + (cycle * channels + channel + 1) * _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def split_draw(z: int) -> tuple[int, int, int, int, int]:
    """The five 12-bit fields of a draw: idle, backpressure, credit_return bits 0..2.
    A field below the probability threshold means "yes"."""
    return (z & 0xFFF, z >> 12 & 0xFFF, z >> 24 & 0xFFF, z >> 36 & 0xFFF, z >> 48 & 0xFFF)


def pending_depth() -> int:
    """Requests the testbench can hold per channel and tenant tag before they are
    presented (its upstream driver's buffer); the model reports a stimulus that
    needs more as a stimulus error rather than letting the testbench overflow."""
    return 1024

