"""The testbench program of the trace-driven co-simulation (issue #16): one
program file beside one CSV trace.

Why a program: for a 10 M-cycle soak nothing may pass through Python per
cycle on the simulator side.  Python writes every input once, the
plain-Verilog testbench of :mod:`kvfabric.tb.trace_tb` reads it with
``$fscanf`` as the simulation reaches each cycle, and the golden model
(:mod:`kvfabric.tb.trace_model`) reads the same files.  What a trace cannot
say (register writes, resets, driver modes, the memory side's rate, the seed
of the per-cycle draws, when to stop) is the program; the requests are a
trace in the one trace format of :mod:`kvfabric.model.trace` (``cycle,channel,
tenant,bytes``, a request's id is its row index), written by
:func:`kvfabric.model.trace.write_trace` and read back by
:func:`~kvfabric.model.trace.read_trace` (the one reader: same checks, same
errors, file, line, field and range) by every Python side; the Verilog reads
its rows with ``$fscanf("%d,%d,%d,%d")``.

Program (``stimulus.txt``): one event per line, seven decimal integers ``op
cycle a b c d e``, sorted by ``cycle`` (global cycles: cycle 0 is the first
cycle after the testbench's initial reset; resets inside the run do not
restart it):

====  =========  ==============================================================
op    name       fields
====  =========  ==============================================================
1     RESET      a = cycles: ``rst`` high in cycles cycle .. cycle+a-1
2     WRITE      a = address, b = data, c = strobes: an AXI4-Lite write presented
                 from ``cycle`` (AW and W together) until both handshakes
3     MODE       a = fcfs (upstream driver order), b = idle, c = backpressure,
                 d = credit_return probability, each in 1/4096
4     MEMORY     a / b = B, the memory side's bytes per cycle (spec §8)
5     TRACE      the trace starts: its row of cycle x arrives at the channel's
                 upstream driver in cycle ``cycle`` + x (at most one TRACE;
                 without one no request arrives); port id = row index mod
                 2^id_width
6     ZERO       every bucket level and previous-cycle enable deposited to 0
                 before ``cycle`` is driven
                 (the replay engine's alignment with the model, see
                 trace_stimulus.replay_stimulus)
7     SEED       a, b = low and high 32 bits of the per-cycle random draws' seed
8     WAIT       last event: from ``cycle`` on, stop when a grants have been
                 transferred in all (``E``), or after b cycles without one (``S``)
9     END        last event: the last simulated cycle is ``cycle - 1``
====  =========  ==============================================================

Trace (``stimulus.csv``, :func:`trace_file`): the CSV trace.  Index
(``stimulus.idx``, :func:`index_file`): where each row is, for the Verilog
only, derived from the written CSV by :func:`write_stimulus` and read nowhere
else.  It holds no request field, so it cannot disagree with the trace: the
driver looks only at the oldest waiting request of each (channel, tenant
tag), so the testbench keeps per queue ``q = channel * 16 + tag`` two
counters and that one head, and reads the head's row with ``$fseek`` when it
changes (issue #24: no per-(channel, tenant) limit).  Fixed-width records of
:data:`REQ_RECORD_BYTES` bytes, three 12-digit decimal fields each: record 0
is ``channels rows REQ_FILE_MAGIC``, records 1 .. ``16 * channels`` are
``first length q`` (queue q's rows are records ``1 + 16 * channels + first``
.. ``+ length - 1``), then per queue, in row order, ``row offset q`` with
``offset`` the byte offset of the row's line in the CSV.

Per-cycle randomness (idle insertion, extra backpressure, credit returns) is
not in the files: both sides draw it from :func:`draw`, a counter-based hash
(splitmix64's finaliser) of (seed, cycle, channel), so a side that skips idle
cycles skips the draws too, and 40 bits per channel per cycle never have to be
read from a file.

The testbench reports what its ports did in a port log of its own
(:mod:`kvfabric.tb.trace_compare`), which is not a user format: the grant log
users see is the CSV of :mod:`kvfabric.model.trace`, made from the port log
by :func:`kvfabric.model.replay.grant_log`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvfabric.model.trace import TraceError, parse_int, read_trace, write_trace

__all__ = [
    "RESET", "WRITE", "MODE", "MEMORY", "TRACE", "ZERO", "SEED", "WAIT", "END", "OP_NAMES",
    "PROB_ONE", "Event", "write_stimulus", "read_program", "read_stimulus", "trace_start", "draw",
    "split_draw", "NQ_TAGS", "REQ_RECORD_BYTES", "REQ_FILE_MAGIC", "trace_file", "index_file", "FIELD_NAMES",
]

RESET, WRITE, MODE, MEMORY, TRACE, ZERO, SEED, WAIT, END = 1, 2, 3, 4, 5, 6, 7, 8, 9
OP_NAMES = {RESET: "RESET", WRITE: "WRITE", MODE: "MODE", MEMORY: "MEMORY", TRACE: "TRACE",
            ZERO: "ZERO", SEED: "SEED", WAIT: "WAIT", END: "END"}
#: Probabilities are integers in 1/PROB_ONE (12-bit fields of one draw).
PROB_ONE = 4096

#: Tenant tags a request can carry (4 bits, spec §2): the index's queues per channel.
NQ_TAGS = 16
#: One record of the index: three 12-digit fields, two spaces, a newline.
REQ_RECORD_BYTES = 3 * 12 + 3
#: The third field of an index's record 0 ("KVF").
REQ_FILE_MAGIC = 0x4B5646
#: The testbench seeks with a 32-bit signed offset.
_SEEK_MAX = (1 << 31) - 1

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


def trace_file(stimulus) -> Path:
    """The CSV trace that :func:`write_stimulus` writes beside program ``stimulus``."""
    return Path(stimulus).with_suffix(".csv")


def index_file(stimulus) -> Path:
    """The testbench's row index that :func:`write_stimulus` writes beside ``stimulus``."""
    return Path(stimulus).with_suffix(".idx")


def trace_start(events) -> int | None:
    """The cycle of the program's TRACE event (its rows' cycle 0), or None; a
    second TRACE is an error."""
    starts = [e.cycle for e in events if e.op == TRACE]
    if len(starts) > 1:
        raise TraceError(f"the program has {len(starts)} TRACE events (at cycles {starts[:4]}); "
                         f"at most one is allowed")
    return starts[0] if starts else None


def write_stimulus(path, events, rows, params) -> int:
    """Write program ``events`` (sorted by cycle) to ``path``, trace ``rows``
    (``model.trace.TraceRow``, ids = row indices) to :func:`trace_file` and
    its index to :func:`index_file`; returns how many events.  The trace is
    read back with :func:`kvfabric.model.trace.read_trace`, so a row the
    design cannot take is refused as any trace's is (file, line, field,
    range)."""
    path = Path(path)
    if path.suffix in (".csv", ".idx"):
        raise ValueError(f"{path}: a program's name must not end in .csv or .idx (its trace and "
                         f"index are written beside it under those)")
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
    trace_start(events)
    csv_path = trace_file(path)
    for k, r in enumerate(rows):
        if r.id != k:
            raise ValueError(f"trace row {k} has id {r.id}; a trace's ids are its row indices")
    write_trace(csv_path, rows)
    rows = read_trace(csv_path, params, empty_ok=True)
    _write_index(index_file(path), csv_path, rows, params.channels)
    return n


def _write_index(path: Path, csv_path: Path, rows, channels: int) -> None:
    nq = channels * NQ_TAGS
    for what, nbytes in ((csv_path, csv_path.stat().st_size), (path, (1 + nq + len(rows)) * REQ_RECORD_BYTES)):
        if nbytes > _SEEK_MAX:
            raise ValueError(f"{what}: {len(rows):,} requests need {nbytes:,} bytes; the testbench "
                             f"seeks at most {_SEEK_MAX:,} bytes into it (split the trace into shorter runs)")
    offsets = []
    with open(csv_path, "rb") as f:
        at = len(f.readline())  # the header
        for line in f:
            if line.strip():
                offsets.append(at)
            at += len(line)
    assert len(offsets) == len(rows), (csv_path, len(offsets), len(rows))
    queues: dict[int, list[int]] = {}
    for r in rows:
        queues.setdefault(r.channel * NQ_TAGS + r.tenant, []).append(r.id)
    with open(path, "w") as f:
        f.write(f"{channels:012d} {len(rows):012d} {REQ_FILE_MAGIC:012d}\n")
        first = 0
        for q in range(nq):
            length = len(queues.get(q, ()))
            f.write(f"{first:012d} {length:012d} {q:012d}\n")
            first += length
        for q in range(nq):
            for row in queues.get(q, ()):
                f.write(f"{row:012d} {offsets[row]:012d} {q:012d}\n")


#: What fields a .. e of each op mean (the table above), for error messages.
FIELD_NAMES = {
    RESET: ("cycles",), WRITE: ("address", "data", "strobes"),
    MODE: ("fcfs", "idle", "backpressure", "credit_return"), MEMORY: ("bytes", "cycles"),
    TRACE: (), ZERO: (), SEED: ("seed_lo", "seed_hi"), WAIT: ("grants", "stall_cycles"), END: (),
}
_FIELDS = ("op", "cycle", "a", "b", "c", "d", "e")


def read_program(path):
    """Yield the events of a program file; a bad line is a
    :class:`kvfabric.model.trace.TraceError` naming the file, the line and the
    field (by its meaning for the line's op), like the trace's and the grant
    log's readers."""
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


def read_stimulus(path, params) -> tuple[list[Event], list]:
    """The program of ``path`` and its trace (:func:`trace_file`, read by
    :func:`kvfabric.model.trace.read_trace`)."""
    return list(read_program(path)), read_trace(trace_file(path), params, empty_ok=True)


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


