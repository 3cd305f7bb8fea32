"""Trace and grant-log CSV formats (issue #2, spec §8).

Trace: header ``cycle,channel,tenant,bytes``, one request per row, sorted by
cycle; a request's id is its 0-based row index. Grant log: header
``id,arrival_cycle,grant_cycle,channel,tenant,bytes,kind``, one row per
request, sorted by id; dropped requests (invalid tenant tag, disabled tenant,
bytes 0 or above LMAX) have kind ``dropped`` and an empty grant cycle.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from .compat import frozen_record
from kvfabric.spec import KIND_NAMES

TRACE_HEADER = ["cycle", "channel", "tenant", "bytes"]
LOG_HEADER = ["id", "arrival_cycle", "grant_cycle", "channel", "tenant", "bytes", "kind"]
#: The ``kind`` column: a grant's kind (spec §6.2) or ``dropped``.
LOG_KINDS = (*KIND_NAMES.values(), "dropped")


class TraceError(ValueError):
    """A malformed trace; the message names the file, line and field."""


# Plain decimal digits (a minus sign only so a negative value gets its range
# message): int() alone would also take "1_000", "+5", " 7" and "٣".
_DECIMAL = re.compile(r"-?[0-9]+")


def parse_int(text: str, where: str) -> int:
    """``text`` as a decimal integer, or a TraceError naming ``where``."""
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        raise TraceError(f"{where} must be an integer in decimal digits "
                         f"(0-9, no sign but -, no _), not {text!r}")
    return int(stripped, 10)


@frozen_record
class TraceRow:
    id: int
    cycle: int
    channel: int
    tenant: int
    bytes: int


@frozen_record
class LogRow:
    id: int
    arrival_cycle: int
    grant_cycle: int | None
    channel: int
    tenant: int
    bytes: int
    kind: str


def parse_trace(lines, params, source: str = "trace", *, empty_ok: bool = False) -> list[TraceRow]:
    """Parse trace CSV text lines, checking every field against the port widths.
    A trace without rows is an error unless ``empty_ok`` (a testbench
    program's trace, which may carry none)."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise TraceError(f"{source}: empty file, expected header {','.join(TRACE_HEADER)}")
    if [h.strip() for h in header] != TRACE_HEADER:
        raise TraceError(f"{source}:1: header must be {','.join(TRACE_HEADER)}, got {','.join(header)}")
    limits = {
        "cycle": (0, None),
        "channel": (0, params.channels - 1),
        "tenant": (0, (1 << params.tenant_bits) - 1),
        "bytes": (0, (1 << params.bytes_bits) - 1),
    }
    rows: list[TraceRow] = []
    last_cycle = 0
    for line_no, fields in enumerate(reader, start=2):
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(TRACE_HEADER):
            raise TraceError(f"{source}:{line_no}: expected {len(TRACE_HEADER)} fields "
                             f"({','.join(TRACE_HEADER)}), got {len(fields)}")
        values = {}
        for name, text in zip(TRACE_HEADER, fields):
            value = parse_int(text, f"{source}:{line_no}: {name}")
            lo, hi = limits[name]
            if value < lo or (hi is not None and value > hi):
                allowed = f"{lo}..{hi}" if hi is not None else f">= {lo}"
                raise TraceError(f"{source}:{line_no}: {name} = {value} out of range {allowed}")
            values[name] = value
        if values["cycle"] < last_cycle:
            raise TraceError(f"{source}:{line_no}: cycle {values['cycle']} is before the previous "
                             f"row's cycle {last_cycle}; the trace must be sorted by cycle")
        last_cycle = values["cycle"]
        rows.append(TraceRow(len(rows), **values))
    if not rows and not empty_ok:
        raise TraceError(f"{source}: no requests after the header; a trace needs at least one row "
                         f"({','.join(TRACE_HEADER)})")
    return rows


def read_trace(path: str | Path, params, *, empty_ok: bool = False) -> list[TraceRow]:
    with open(path, newline="") as f:
        return parse_trace(f, params, source=str(path), empty_ok=empty_ok)


def write_trace(path: str | Path, rows) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(TRACE_HEADER)
        for r in rows:
            w.writerow([r.cycle, r.channel, r.tenant, r.bytes])


def write_log(path: str | Path, rows: list[LogRow]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(LOG_HEADER)
        for r in rows:
            w.writerow([r.id, r.arrival_cycle, "" if r.grant_cycle is None else r.grant_cycle,
                        r.channel, r.tenant, r.bytes, r.kind])


def read_log(path: str | Path) -> list[LogRow]:
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != LOG_HEADER:
            raise TraceError(f"{path}:1: header must be {','.join(LOG_HEADER)}, got "
                             f"{'nothing (empty file)' if header is None else ','.join(header)}")
        out = []
        for line_no, r in enumerate(reader, start=2):
            if len(r) != len(LOG_HEADER):
                raise TraceError(f"{path}:{line_no}: expected {len(LOG_HEADER)} fields "
                                 f"({','.join(LOG_HEADER)}), got {len(r)}")
            where = {name: f"{path}:{line_no}: {name}" for name in LOG_HEADER}
            if r[6] not in LOG_KINDS:
                raise TraceError(f"{where['kind']} = {r[6]!r} is not a kind "
                                 f"(allowed: {', '.join(LOG_KINDS)})")
            if (r[6] == "dropped") != (r[2] == ""):
                raise TraceError(f"{where['grant_cycle']}: {'empty' if not r[2] else repr(r[2])} with kind "
                                 f"{r[6]!r}; a dropped request has an empty grant cycle, a granted one "
                                 f"a cycle")
            out.append(LogRow(parse_int(r[0], where["id"]), parse_int(r[1], where["arrival_cycle"]),
                              parse_int(r[2], where["grant_cycle"]) if r[2] else None,
                              parse_int(r[3], where["channel"]), parse_int(r[4], where["tenant"]),
                              parse_int(r[5], where["bytes"]), r[6]))
        return out
