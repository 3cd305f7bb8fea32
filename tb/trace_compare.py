"""The trace testbench's port log: its one reader, and its comparison with the model.

The port log is the internal wire format of the plain-Verilog testbench
(tb/trace_tb.py writes it, :func:`read_sim_log` here is its only reader), not
a user format: ``G cycle channel tenant bytes id kind`` per transferred grant
(port id, kind code), ``A cycle address`` per AXI write at the cycle of its
later handshake, ``E cycle`` at the end, ``S cycle`` instead if a WAIT
stopped for lack of progress.  It records what the ports did, which a grant
log cannot: register-write handshakes, the end, grants of requests a reset
later makes unmatchable.  The grant log users see is the CSV of
:mod:`kvfabric.model.trace`, made from it by
:func:`kvfabric.model.replay.grant_log` (``kvfabric replay``, the
differential check).

Why the comparison is per channel: grants of different channels are independent, so each
channel's grants are compared in order and the mismatch reported is the
earliest cycle at which any channel differs, with the field that differs
(cycle, tenant, bytes, id, kind), the expected and actual values and the
grant's position on its channel.  Register writes (``A`` lines: the cycle of
each write's handshake) and the end of the run (``E``) are compared too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvfabric.model.trace import TraceError, parse_int
from kvfabric.spec import KIND_NAMES

__all__ = ["LogFormatError", "SimLog", "read_sim_log", "Mismatch", "first_mismatch"]

FIELDS = ("cycle", "channel", "tenant", "bytes", "id", "kind")


class LogFormatError(TraceError):
    """A malformed port log of the testbench; the message names file, line and field."""


#: The fields of each line kind of the testbench's port log (the module docstring).
LINE_FIELDS = {"G": FIELDS, "A": ("cycle", "address"), "E": ("cycle",), "S": ("cycle",)}


@dataclass
class SimLog:
    grants: list  # (cycle, channel, tenant, bytes, id, kind)
    writes: list  # (cycle, address)
    end: int | None
    stalled: int | None  # cycle of an S line (a WAIT stopped without progress)


def read_sim_log(path) -> SimLog:
    """Parse a port log written by the testbench."""
    grants, writes = [], []
    end = stalled = None
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            fields = LINE_FIELDS.get(parts[0]) if parts else None
            if fields is None:
                raise LogFormatError(f"{path}:{lineno}: not a port-log line (G, A, E or S): "
                                     f"{line.strip()!r}")
            if len(parts) != 1 + len(fields):
                raise LogFormatError(f"{path}:{lineno}: a {parts[0]} line has {len(fields)} fields "
                                     f"({' '.join(fields)}), got {len(parts) - 1}")
            try:
                values = tuple(parse_int(text, f"{path}:{lineno}: {parts[0]} {name}")
                               for name, text in zip(fields, parts[1:]))
            except TraceError as e:
                raise LogFormatError(str(e)) from None
            if parts[0] == "G":
                grants.append(values)
            elif parts[0] == "A":
                writes.append(values)
            elif parts[0] == "E":
                end = values[0]
            else:
                stalled = values[0]
    return SimLog(grants, writes, end, stalled)


@dataclass
class Mismatch:
    cycle: int
    channel: int | None
    field: str
    expected: object
    actual: object
    index: int

    def __str__(self) -> str:
        where = f"channel {self.channel} " if self.channel is not None else ""
        return (f"first mismatch at cycle {self.cycle} {where}field {self.field}: "
                f"expected {self.expected}, actual {self.actual} (entry {self.index} of that log)")


def _fmt(field, value):
    return KIND_NAMES.get(value, value) if field == "kind" else value


def first_mismatch(expected, actual: SimLog, channels: int) -> Mismatch | None:
    """The earliest difference between the model's run (``expected``, a
    trace_model.ModelRun) and the testbench's log, or None."""
    found: list[Mismatch] = []
    exp_by = [[] for _ in range(channels)]
    act_by = [[] for _ in range(channels)]
    for g in expected.grants:
        exp_by[g[1]].append(g)
    for g in actual.grants:
        if not 0 <= g[1] < channels:
            return Mismatch(g[0], g[1], "channel", f"0..{channels - 1}", g[1], 0)
        act_by[g[1]].append(g)
    for c in range(channels):
        e, a = exp_by[c], act_by[c]
        for i in range(min(len(e), len(a))):
            if e[i] != a[i]:
                k = next(k for k in range(6) if e[i][k] != a[i][k])
                found.append(Mismatch(min(e[i][0], a[i][0]), c, FIELDS[k],
                                      _fmt(FIELDS[k], e[i][k]), _fmt(FIELDS[k], a[i][k]), i))
                break
        else:
            if len(e) != len(a):
                i = min(len(e), len(a))
                extra = (e if len(e) > len(a) else a)[i]
                found.append(Mismatch(extra[0], c, "grant",
                                      "a grant " + str(e[i]) if len(e) > len(a) else "no grant",
                                      "a grant " + str(a[i]) if len(a) > len(e) else "no grant", i))
    ew, aw = expected.writes, actual.writes
    for i in range(max(len(ew), len(aw))):
        if i >= len(ew) or i >= len(aw) or ew[i] != aw[i]:
            e = ew[i] if i < len(ew) else None
            a = aw[i] if i < len(aw) else None
            found.append(Mismatch(min(x[0] for x in (e, a) if x is not None), None,
                                  "AXI write handshake (cycle, address)", e, a, i))
            break
    if actual.end != expected.end:
        found.append(Mismatch(min(expected.end, actual.end or 0), None, "end of run",
                              expected.end, actual.end, 0))
    return min(found, key=lambda m: m.cycle) if found else None
