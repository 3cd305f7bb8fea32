"""Reading what the tools wrote: Yosys's ``stat`` and ``ltp``, nextpnr's log and report.

Pure functions of the tools' output (text or parsed JSON), plus thin readers
of the files under ``build/synth/<target>/``, so that the tests can feed them
fixture texts without running a tool.
"""

from __future__ import annotations

import json
import re

from .. import netlist_paths
from .tools import ROOT

__all__ = ["UTIL_ROW", "FMAX_LINE", "yosys_cells", "count_cells", "cell_counts",
           "utilisation_from_text", "utilisation_from_log", "with_percent", "over_capacity",
           "fmax_from_report", "parse_ltp", "critical_path"]

#: A row of nextpnr's "Device utilisation" table: ``Info: <resource>: <used>/ <available> <pct>%``.
UTIL_ROW = re.compile(r"^Info:\s+([A-Z0-9_]+):\s+(\d+)/\s*(\d+)\s+(\d+)%")
#: nextpnr's Fmax line (printed after placement and again after routing).
FMAX_LINE = re.compile(r"Max frequency for clock .*?: ([\d.]+) MHz")


# --------------------------------------------------------------------------
# Yosys

def yosys_cells(stat_json):
    """``{cell type: count}`` of the design from ``stat -json`` output (project-relative path)."""
    with open(ROOT / stat_json) as f:
        data = json.load(f)
    return dict(data["design"]["num_cells_by_type"])


def count_cells(cells, *prefixes):
    """Cells whose type starts with any of ``prefixes``."""
    return sum(n for t, n in cells.items() if t.startswith(prefixes))


def cell_counts(cells, columns):
    """``{column: count}`` for a family's ``{column: prefixes}`` table, in its order."""
    return {column: count_cells(cells, *prefixes) for column, prefixes in columns.items()}


def parse_ltp(text):
    """``ltp -noff``'s output: ``(length, [net names from start to end])``;
    length ``None`` if the text has no ``(length=N)``."""
    m = re.search(r"\(length=(\d+)\)", text)
    nets = re.findall(r"^\s*\d+: (\S+)(?: \[(\d+)\])?", text, re.M)
    names = [n.lstrip("\\") + (f"[{i}]" if i else "") for n, i in nets]
    return (int(m.group(1)) if m else None), names


# --------------------------------------------------------------------------
# nextpnr

def utilisation_from_text(text):
    """nextpnr's last "Device utilisation" table in a log:
    ``{resource: {"used": n, "available": n}}``."""
    rows, inside = {}, False
    for line in text.splitlines():
        if "Device utilisation" in line:
            inside, rows = True, {}
            continue
        m = UTIL_ROW.match(line)
        if inside and m:
            rows[m.group(1)] = {"used": int(m.group(2)), "available": int(m.group(3))}
        elif inside and rows:
            inside = False
    return rows


def utilisation_from_log(path):
    """:func:`utilisation_from_text` of a log file (project-relative path)."""
    return utilisation_from_text((ROOT / path).read_text(errors="replace"))


def with_percent(util):
    """The used resources of a utilisation table, sorted, with their percentage."""
    return {k: {"used": v["used"], "available": v["available"],
                "percent": round(100.0 * v["used"] / v["available"], 1) if v["available"] else None}
            for k, v in sorted(util.items()) if v["used"]}


def over_capacity(util):
    """The resources of a utilisation table used beyond what the device has."""
    return {k: v for k, v in util.items() if v["used"] > v["available"]}


def fmax_from_report(report):
    """The routed Fmax of a nextpnr ``--report`` (the slowest clock), or ``None``."""
    fmax = [v["achieved"] for v in report.get("fmax", {}).values()]
    return round(min(fmax), 2) if fmax else None


def _cell_register(cell, net, rename):
    """The register a nextpnr path cell belongs to: its Q net if Yosys knows the
    cell, else the readable part of its (packed) name."""
    c = net.cells.get(cell) if net is not None else None
    if c is not None:
        for port in ("Q", "DO0", "DOA0"):
            bits = c["connections"].get(port)
            if bits and isinstance(bits[0], int) and net.reg_name(bits[0]):
                name = rename(net.reg_name(bits[0]))
                return netlist_paths.readable(name) or name
    return netlist_paths.readable(rename(cell)) or cell


def critical_path(report, net=None, rename=lambda n: n):
    """Summary of nextpnr's worst register-to-register path (clock to same clock)."""
    best = None
    for p in report.get("critical_paths", []):
        if "<async>" in (p.get("from", ""), p.get("to", "")) or p["from"] != p["to"]:
            continue
        delay = sum(h["delay"] for h in p["path"])
        if best is None or delay > best[0]:
            best = (delay, p)
    if best is None:
        return None
    delay, p = best
    hops = p["path"]
    routing = sum(h["delay"] for h in hops if h["type"] == "routing")
    logic = sum(h["delay"] for h in hops if h["type"] == "logic")
    carry = sum(1 for h in hops if h["type"] == "logic" and
                h["from"]["port"] in ("FCI", "CIN") and h["to"]["port"] in ("FCO", "COUT"))
    levels = sum(1 for h in hops if h["type"] == "logic") - carry
    nets = [h.get("net") for h in hops if h["type"] == "routing" and h.get("net")]
    start = _cell_register(hops[0]["from"]["cell"], net, rename)
    end = _cell_register(hops[-1]["to"]["cell"], net, rename)
    through = []
    for n in nets[1:-1]:
        r = netlist_paths.readable(rename(n))
        if r and r not in through and r not in (start, end):
            through.append(r)
    sources = []
    for h in hops:
        for s in h.get("sources", []):
            s = s.split(":")[0] + ":" + s.split(":")[1].split(".")[0] if ":" in s else s
            if not s.startswith("/share") and s not in sources:
                sources.append(s)
    return {
        "delay_ns": round(delay, 3),
        "start": start,
        "start_net": nets[0] if nets else None,
        "end": end,
        "end_port": hops[-1]["to"]["port"],
        "end_net": nets[-1] if nets else None,
        "logic_ns": round(logic, 3),
        "routing_ns": round(routing, 3),
        "logic_levels": levels,
        "carry_steps": carry,
        "through": through,
        "source_lines": sources[:12],
    }
