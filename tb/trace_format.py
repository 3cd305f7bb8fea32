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

Request file (``<stimulus>.reqs``, written by :func:`write_stimulus` beside the
stimulus): the payloads of the REQ events again, grouped by queue ``q =
channel * 16 + tag`` so that the testbench can read the head of any queue
with ``$fseek`` instead of holding every waiting request (issue #24: no
per-(channel, tenant) limit).  Fixed-width records of :data:`REQ_RECORD_BYTES`
bytes, three 12-digit decimal fields each: record 0 is ``channels 16
REQ_FILE_MAGIC``, records 1 .. ``16 * channels`` are ``first length q`` (queue
q's requests are records ``1 + 16 * channels + first`` .. ``+ length - 1``),
then per queue, in stimulus order,
``seq bytes id`` with ``seq`` the request's position among its channel's REQ
events (the upstream driver's row order, spec §8).

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

from kvfabric.model.trace import TraceError, parse_int

__all__ = [
    "RESET", "WRITE", "MODE", "MEMORY", "REQ", "ZERO", "SEED", "WAIT", "END", "OP_NAMES",
    "PROB_ONE", "Event", "write_stimulus", "read_stimulus", "draw", "split_draw",
    "NQ_TAGS", "REQ_RECORD_BYTES", "REQ_FILE_MAGIC", "request_file", "FIELD_NAMES",
]

RESET, WRITE, MODE, MEMORY, REQ, ZERO, SEED, WAIT, END = 1, 2, 3, 4, 5, 6, 7, 8, 9
OP_NAMES = {RESET: "RESET", WRITE: "WRITE", MODE: "MODE", MEMORY: "MEMORY", REQ: "REQ",
            ZERO: "ZERO", SEED: "SEED", WAIT: "WAIT", END: "END"}
#: Probabilities are integers in 1/PROB_ONE (12-bit fields of one draw).
PROB_ONE = 4096

#: Tenant tags a request can carry (4 bits, spec §2): the request file's queues per channel.
NQ_TAGS = 16
#: One record of the request file: three 12-digit fields, two spaces, a newline.
REQ_RECORD_BYTES = 3 * 12 + 3
_FIELD_MAX = 10 ** 12 - 1
#: The third field of a request file's record 0 ("KVF").
REQ_FILE_MAGIC = 0x4B5646
#: The testbench seeks with a 32-bit signed offset.
_REQ_FILE_MAX = (1 << 31) - 1

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


def request_file(stimulus) -> Path:
    """The request file that :func:`write_stimulus` writes beside ``stimulus``."""
    stimulus = Path(stimulus)
    return stimulus.with_name(stimulus.name + ".reqs")


def write_stimulus(path, events, channels: int) -> int:
    """Write ``events`` (sorted by cycle) to ``path`` and their requests to
    :func:`request_file` (``path``) for a design of ``channels`` channels;
    returns how many events.  A request outside the channels, or with a tag
    outside 0..15, is an error naming the event."""
    n = 0
    last = -1
    path = Path(path)
    queues: dict[int, list[tuple[int, int, int]]] = {}
    seq: dict[int, int] = {}
    with open(path, "w") as f:
        for ev in events:
            if ev.cycle < last:
                raise ValueError(f"{path}: event {n} ({OP_NAMES.get(ev.op, ev.op)}) at cycle "
                                 f"{ev.cycle} comes after cycle {last}; events must be sorted")
            last = ev.cycle
            if ev.op == REQ:
                if not (0 <= ev.a < channels and 0 <= ev.b < NQ_TAGS):
                    raise ValueError(f"{path}: event {n} (REQ at cycle {ev.cycle}): channel {ev.a}, "
                                     f"tag {ev.b}; allowed channels 0..{channels - 1}, tags 0..{NQ_TAGS - 1}")
                if not (0 <= ev.c <= _FIELD_MAX and 0 <= ev.d <= _FIELD_MAX):
                    raise ValueError(f"{path}: event {n} (REQ at cycle {ev.cycle}): bytes {ev.c} or id "
                                     f"{ev.d} outside 0..{_FIELD_MAX}")
                k = seq.get(ev.a, 0)
                seq[ev.a] = k + 1
                queues.setdefault(ev.a * NQ_TAGS + ev.b, []).append((k, ev.c, ev.d))
            f.write(f"{ev.op} {ev.cycle} {ev.a} {ev.b} {ev.c} {ev.d} {ev.e}\n")
            n += 1
    _write_requests(request_file(path), queues, channels)
    return n


def _write_requests(path: Path, queues: dict, channels: int) -> None:
    nq = channels * NQ_TAGS
    total = 1 + nq + sum(len(q) for q in queues.values())
    if total * REQ_RECORD_BYTES > _REQ_FILE_MAX:
        raise ValueError(f"{path}: {total - nq - 1:,} requests need {total * REQ_RECORD_BYTES:,} bytes of "
                         f"request file; the testbench seeks at most {_REQ_FILE_MAX:,} "
                         f"(split the trace into runs of at most "
                         f"{_REQ_FILE_MAX // REQ_RECORD_BYTES - nq - 1:,} requests)")
    with open(path, "w") as f:
        f.write(f"{channels:012d} {NQ_TAGS:012d} {REQ_FILE_MAGIC:012d}\n")
        first = 0
        for q in range(nq):
            length = len(queues.get(q, ()))
            f.write(f"{first:012d} {length:012d} {q:012d}\n")
            first += length
        for q in range(nq):
            for rec in queues.get(q, ()):
                f.write("%012d %012d %012d\n" % rec)


#: What fields a .. e of each op mean (the table above), for error messages.
FIELD_NAMES = {
    RESET: ("cycles",), WRITE: ("address", "data", "strobes"),
    MODE: ("fcfs", "idle", "backpressure", "credit_return"), MEMORY: ("bytes", "cycles"),
    REQ: ("channel", "tenant", "bytes", "id"), ZERO: (), SEED: ("seed_lo", "seed_hi"),
    WAIT: ("grants", "stall_cycles"), END: (),
}
_FIELDS = ("op", "cycle", "a", "b", "c", "d", "e")


def read_stimulus(path):
    """Yield the events of a stimulus file; a bad line is a
    :class:`kvfabric.model.trace.TraceError` naming the file, the line and the
    field (by its meaning for the line's op), like every reader of the trace
    and grant-log formats."""
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != len(_FIELDS):
                raise TraceError(f"{path}:{lineno}: expected {len(_FIELDS)} fields "
                                 f"'{' '.join(_FIELDS)}', got {len(parts)}: {line.strip()!r}")
            op = parse_int(parts[0], f"{path}:{lineno}: op")
            if op not in OP_NAMES:
                raise TraceError(f"{path}:{lineno}: op = {op} is not an op "
                                 f"(allowed: {', '.join(f'{k} {v}' for k, v in OP_NAMES.items())})")
            names = ("cycle", *FIELD_NAMES[op])
            values = []
            for k, text in enumerate(parts[1:]):
                name = names[k] if k < len(names) else f"{_FIELDS[k + 1]} (unused by {OP_NAMES[op]})"
                value = parse_int(text, f"{path}:{lineno}: {OP_NAMES[op]} {name}")
                if value < 0:
                    raise TraceError(f"{path}:{lineno}: {OP_NAMES[op]} {name} = {value} out of range >= 0")
                values.append(value)
            yield Event(op, *values)


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


