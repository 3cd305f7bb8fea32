"""Rank the register-to-register paths of a mapped netlist (used by scripts.synth).

nextpnr reports only the worst path of each clock pair.  To show the RTL
author the next few paths as well, this module runs a small static timing
analysis over the Yosys ``write_json`` netlist that nextpnr reads, with a
:class:`DelayModel` per target:

* :data:`GENERIC`: every gate is one level, wires are free, so the arrival
  time is the logic depth in gates (the ASIC-ish proxy; ``ltp -noff`` gives the
  same longest value over all paths, this gives it per endpoint).
* :data:`ECP5`: rough ECP5-85F speed-8 delays in ns, read off nextpnr's own
  critical-path reports on this project (LUT4 ~0.35, CCU2C carry ~0.03 per
  bit, general routing ~0.85 per net, dedicated carry routing free).  Only
  the ranking means something; the worst path's real delay is nextpnr's.

Only paths from a register (or memory) output to a register (or memory)
input are ranked; paths from or to top-level ports are not.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from dataclasses import dataclass, field

from .yosys_util import Netlist, name_pattern

__all__ = ["DelayModel", "GENERIC", "ECP5", "rank_paths", "readable"]

# Yosys's autoname pass names a net after the cell port it connects to, e.g.
# ``ch0.best_tag_LUT4_Z_17_C``: input C of the LUT4 whose output is a bit of
# ``ch0.best_tag``.  The part before the first cell type is the RTL signal
# whose logic the net feeds.
_AUTONAME = re.compile(r"_(LUT4|CCU2C|TRELLIS_[A-Z0-9]+|PFUMX|L6MUX21|DP16KD|MULT18X18D|ALU54B|"
                       r"SB_[A-Z0-9]+|ICESTORM_[A-Z]+)(_|$).*")


def readable(name):
    """A net or cell name without bit index and without Yosys's autoname tail,
    or ``None`` for an internal (``$``) name."""
    if not name:
        return None
    base = _AUTONAME.sub("", re.sub(r"\[\d+\]$", "", name))
    return None if "$" in base or not base else base


@dataclass(frozen=True)
class DelayModel:
    """Delays of one target's cell library.

    ``sequential(cell type)`` returns ``(output start delays, endpoint input
    ports)`` or ``None``: an output listed there starts paths (clock-to-output delay), an
    input listed there ends them.  ``arcs`` maps a cell type to a function
    ``(input port, output port) -> delay or None``; cells of other types
    use ``default_arc`` for every input-output pair.  ``wire(driver type,
    driver port, sink type, sink port)`` is the routing delay of a connection.
    """

    name: str
    sequential: object
    arcs: dict = field(default_factory=dict)
    default_arc: float = 1.0
    wire: object = None
    unit: str = "levels"


_GENERIC_FF = re.compile(r"^\$_(DFF|DFFE|SDFF|SDFFE|SDFFCE|ALDFF|ALDFFE|DFFSR|DFFSRE|DLATCH|DLATCHSR|SR|FF)_")


def _generic_sequential(ctype):
    # Yosys's internal flip-flop cells ($_DFF_P_, $_SDFFE_PP0P_, ...).
    if _GENERIC_FF.match(ctype):
        return {"Q": 0.0}, ("D", "E", "R", "S", "AD", "L")
    return None


#: Logic depth in gates of a generic gate-level netlist (``abc -g ...``).
GENERIC = DelayModel("generic", _generic_sequential, default_arc=1.0)


def _lut(inp, out):
    return 0.35


def _ccu2c(inp, out):
    if inp == "CIN":
        return 0.06 if out == "COUT" else 0.33
    if out == "COUT":
        return 0.36
    # An A1..D1 input does not reach S0.
    if out == "S0" and inp.endswith("1"):
        return None
    return 0.45 if out == "S1" and inp.endswith("0") else 0.40


def _mux(inp, out):
    return 0.30 if inp in ("SD", "C0") else 0.13


def _dpr16x4(inp, out):
    return 0.5 if inp.startswith("RAD") else None


def _mult(inp, out):
    return 4.0 if inp[0] in "AB" and out.startswith("P") else None


def _ecp5_wire(ctype, port, sink_type, sink_port):
    # Carry chains and the LUT4 -> PFUMX -> L6MUX21 connections inside a slice
    # use dedicated wires; everything else goes through general routing.
    if ctype == "CCU2C" and port == "COUT":
        return 0.0
    if sink_type in ("PFUMX", "L6MUX21") and sink_port in ("ALUT", "BLUT", "D0", "D1"):
        return 0.0
    return 0.85


_ECP5_SEQUENTIAL = {
    "TRELLIS_FF": ({"Q": 0.40}, ("DI", "CE", "LSR", "M")),
    # Asynchronous read: DO is both a start (memory contents) and fed by RAD.
    "TRELLIS_DPR16X4": ({"DO0": 1.0, "DO1": 1.0, "DO2": 1.0, "DO3": 1.0},
                        ("DI0", "DI1", "DI2", "DI3", "WAD0", "WAD1", "WAD2", "WAD3", "WRE")),
    "DP16KD": ({f"DO{a}{i}": 2.5 for a in "AB" for i in range(18)}, None),
}

#: Rough ECP5 (speed 8) delays in ns, for ranking paths.
ECP5 = DelayModel(
    "ecp5",
    sequential=_ECP5_SEQUENTIAL.get,
    arcs={"LUT4": _lut, "CCU2C": _ccu2c, "PFUMX": _mux, "L6MUX21": _mux,
          "TRELLIS_DPR16X4": _dpr16x4, "MULT18X18D": _mult},
    default_arc=0.5,
    wire=_ecp5_wire,
    unit="ns",
)


def _strip_index(name):
    return re.sub(r"\[\d+\]$", "", name) if name else name


def rank_paths(net: Netlist, model: DelayModel, top_n=5, through=6, rename=None):
    """The worst register-to-register path to each of the ``top_n`` worst endpoints.

    Endpoints are grouped by register (a bus counts once, at its worst bit),
    and registers by pattern (``channel_*.vt``): each returned path is the worst
    of its pattern, ``endpoints`` says how many registers share the pattern.
    Returns ``(paths, info)``: ``paths`` is a list of dicts with ``delay``,
    ``start``, ``end``, ``end_port``, ``cells`` (combinational cells on the
    path) and ``through`` (a few public net names along it); ``info`` holds
    the overall worst delay and any combinational loop or unknown cell types.
    ``rename(name)`` maps a net name with its bit index (``harness_q[3]``) to
    the name to report, before endpoints are grouped.
    """
    rename = rename or (lambda n: n)

    def reg_name(bit):
        n = net.reg_name(bit)
        return _strip_index(rename(n)) if n else None

    driver = {}                      # bit -> (cell name, port)
    inputs = defaultdict(list)       # cell name -> [(port, bits)]
    outputs = defaultdict(list)
    for cname, cell in net.cells.items():
        dirs = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            d = dirs.get(port)
            if d == "output":
                outputs[cname].append((port, bits))
                for b in bits:
                    if isinstance(b, int):
                        driver[b] = (cname, port)
            elif d == "input":
                inputs[cname].append((port, bits))

    arrival = {}                     # bit -> delay
    pred = {}                        # bit -> previous bit on the worst path
    unknown = set()

    def wire_delay(bit, sink_type, sink_port):
        if model.wire is None:
            return 0.0
        c, p = driver[bit]
        return model.wire(net.cells[c]["type"], p, sink_type, sink_port)

    # Start points.
    comb = []
    for cname, cell in net.cells.items():
        ctype = cell["type"]
        seq = model.sequential(ctype)
        if seq is not None:
            starts = seq[0]
            for port, bits in outputs[cname]:
                if port in starts or port.rstrip("0123456789") in starts:
                    for b in bits:
                        if isinstance(b, int):
                            arrival[b] = starts.get(port, starts.get(port.rstrip("0123456789")))
        if ctype in model.arcs or seq is None:
            if ctype.startswith("$scopeinfo"):
                continue
            comb.append(cname)
            if ctype not in model.arcs and not ctype.startswith("$_"):
                unknown.add(ctype)

    # Topological order of the combinational cells (Kahn).
    comb_set = set(comb)
    deps = {}
    users = defaultdict(list)
    for cname in comb:
        srcs = set()
        for port, bits in inputs[cname]:
            for b in bits:
                if isinstance(b, int) and b in driver and driver[b][0] in comb_set \
                        and driver[b][0] != cname:
                    srcs.add(driver[b][0])
        deps[cname] = len(srcs)
        for s in srcs:
            users[s].append(cname)
    ready = deque(c for c in comb if deps[c] == 0)
    done = 0
    while ready:
        cname = ready.popleft()
        done += 1
        ctype = net.cells[cname]["type"]
        arc = model.arcs.get(ctype)
        for oport, obits in outputs[cname]:
            best, best_bit = None, None
            for iport, ibits in inputs[cname]:
                d = arc(iport, oport) if arc else model.default_arc
                if d is None:
                    continue
                for b in ibits:
                    if isinstance(b, int) and b in arrival:
                        t = arrival[b] + wire_delay(b, ctype, iport) + d
                        if best is None or t > best:
                            best, best_bit = t, b
            if best is None:
                continue
            for b in obits:
                if isinstance(b, int) and (b not in arrival or arrival[b] < best):
                    arrival[b] = best
                    pred[b] = best_bit
        for u in users[cname]:
            deps[u] -= 1
            if deps[u] == 0:
                ready.append(u)
    loops = len(comb) - done

    # End points, grouped by register, then by register pattern (numbers
    # replaced by "*"), so that the eight copies of a per-channel path show once.
    worst = {}
    for cname, cell in net.cells.items():
        seq = model.sequential(cell["type"])
        if seq is None:
            continue
        ends = seq[1]
        q_bits = [b for _, bits in outputs[cname] for b in bits if isinstance(b, int)]
        reg = (reg_name(q_bits[0]) if q_bits else None) or readable(rename(cname)) or cname
        for port, bits in inputs[cname]:
            if ends is not None and port not in ends and port.rstrip("0123456789") not in ends:
                continue
            if ends is None and port.startswith("CLK"):
                continue
            for b in bits:
                if isinstance(b, int) and b in arrival:
                    t = arrival[b] + wire_delay(b, cell["type"], port)
                    if reg not in worst or t > worst[reg][0]:
                        worst[reg] = (t, b, port)
    groups = defaultdict(list)
    for reg, w in worst.items():
        groups[name_pattern(reg)].append((w[0], reg, w[1], w[2]))
    ranked = sorted((max(g) + (len(g), pattern) for pattern, g in groups.items()),
                    key=lambda r: -r[0])

    paths = []
    for t, reg, b, port, copies, pattern in ranked[:top_n]:
        chain = [b]
        while chain[-1] in pred:
            chain.append(pred[chain[-1]])
        chain.reverse()
        names = []
        for bit in chain[1:-1]:
            n = readable(rename(net.best_name(bit) or ""))
            if n and n not in names and n != reg:
                names.append(n)
        if len(names) > through:
            names = names[:through // 2] + ["..."] + names[-(through - through // 2):]
        paths.append({
            "delay": round(t, 3),
            "start": reg_name(chain[0]) or f"<net {chain[0]}>",
            "end": reg,
            "end_port": port,
            "end_pattern": pattern,
            "endpoints": copies,
            "cells": len(chain) - 1,
            "through": names,
        })
    info = {"model": model.name, "unit": model.unit,
            "worst": paths[0]["delay"] if paths else None,
            "combinational_loop_cells": loops, "unknown_cell_types": sorted(unknown)}
    return paths, info
