"""The targets' flows: synthesis, place and route over seeds, and each target's entry.

:func:`run_target` picks the netlist a target synthesises (generating a
fabric of fewer channels when the target asks for one), runs the target's
flow and returns its report entry: :func:`run_pnr` (Yosys, then nextpnr once
per seed, reporting the median seed), :func:`run_generic` (technology-
independent gates and their depth) or :func:`run_breakdown` (cells per module).
What differs between FPGA families comes from :mod:`.families`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import subprocess
import sys
import time

from .. import netlist_paths
from ..yosys_util import MARK_REGISTERS, Netlist, design_params, name_pattern
from .families import BREAKDOWN_COLUMNS, GENERIC_ADDERS, GENERIC_FF_CELLS, GENERIC_GATES, TARGETS
from .harness import make_renamer, top_ports, write_harness
from .parsers import (cell_counts, count_cells, critical_path, fmax_from_report, over_capacity,
                      parse_ltp, utilisation_from_log, with_percent, yosys_cells)
from .progress import Progress
from .report import one_cell
from .tools import (ROOT, ToolError, ToolTimeout, command_line, log, rel, run_nextpnr,
                    run_yosys_script, tool_path, tool_versions)

__all__ = ["run_target", "run_pnr", "run_generic", "run_breakdown", "median_seed",
           "file_sha256", "subset_verilog"]


def file_sha256(path):
    """The SHA-256 of a file's bytes (hex): which netlist a report entry describes."""
    return hashlib.sha256((ROOT / path).read_bytes()).hexdigest()


def median_seed(fmax_by_seed):
    """The seed whose routed Fmax is the median of ``{seed: Fmax}`` (the lower
    of the two middle ones for an even count; ties keep the seeds' order, a
    missing Fmax counts as 0).  Seed noise is a few to ten percent, so the
    median run is the one to report."""
    if not fmax_by_seed:
        raise ValueError("median_seed needs at least one routed seed")
    ranked = sorted(fmax_by_seed, key=lambda seed: fmax_by_seed[seed] or 0.0)
    return ranked[(len(ranked) - 1) // 2]


def subset_verilog(target, opts, channels):
    """``build/kvfabric_<channels>ch.v``, generated once per run with
    ``kvfabric verilog --channels <channels>``."""
    out = f"build/kvfabric_{channels}ch.v"
    if channels not in opts.generated_subsets:
        args = [sys.executable, "-m", "kvfabric.cli", "verilog", "--channels", str(channels), "--out", out]
        log(target, f"generating the {channels}-channel netlist: {command_line(args)}")
        proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolError(f"`{' '.join(args[1:])}` failed: {proc.stderr.strip()[-500:]}")
        opts.generated_subsets.add(channels)
    return out


def run_target(target, opts):
    """One target's report entry (raises :class:`ToolError` or ``ValueError`` on failure)."""
    spec = TARGETS[target]
    verilog = opts.verilog
    tenants, channels = opts.tenants, opts.channels
    if spec.channels is not None:
        if spec.channels == 1 and opts.verilog_1ch:
            verilog = opts.verilog_1ch
        elif not opts.verilog_given:
            verilog = subset_verilog(target, opts, spec.channels)
    if not (ROOT / rel(verilog)).exists():
        raise ToolError(f"{verilog} does not exist: run `make verilog` first")
    verilog = rel(verilog)
    verilog_sha256 = file_sha256(verilog)
    tenants, channels, source = design_params(ROOT / verilog, tenants, channels)
    workdir = f"{rel(opts.build_dir)}/{target}"
    log(target, f"{verilog} (top {opts.top}; {tenants} tenants x {channels} channels; "
                f"{source})")
    started = time.monotonic()
    flow = {"pnr": run_pnr, "generic": run_generic, "breakdown": run_breakdown}[spec.flow]
    entry = flow(target, opts, verilog, workdir)
    return {"target": target, "verilog": verilog, "verilog_sha256": verilog_sha256, "top": opts.top,
            "design": {"tenants": tenants, "channels": channels, "source": source},
            "revision": opts.revision,
            **entry, "tools": tool_versions(*spec.tools),
            "wall_s": round(time.monotonic() - started, 1),
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "workdir": workdir}


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


def run_pnr(target, opts, verilog, workdir):
    """An FPGA family: synthesis, place and route once per seed, report."""
    family = TARGETS[target].family
    progress = Progress(target)
    reads, synth_top, harness = _prepare(target, verilog, opts.top, opts.clock, opts.harness,
                                         workdir)
    netlist = f"{workdir}/netlist.json"
    yargs, ysec = run_yosys_script(target, reads + [
        f"hierarchy -check -top {synth_top}", "proc", "flatten", *MARK_REGISTERS,
        f"{family.synth_command} -top {synth_top} -json {netlist}",
        f"tee -q -o {workdir}/stat.json stat -json",
    ], workdir, progress)
    cells = yosys_cells(f"{workdir}/stat.json")
    freq = family.target_mhz(opts)
    device = family.device(opts)
    entry = {"device": device.description, "target_mhz": freq, **cell_counts(cells, family.cells),
             "yosys_cells": cells, "harness": harness, "commands": [command_line(yargs)]}
    runs = {}
    for seed in opts.seeds:
        # One seed keeps the plain file names; several get one report and log each.
        sfx = f"_seed{seed}" if len(opts.seeds) > 1 else ""
        run = _pnr_once(target, opts, family.pnr_tool,
                        [*device.pnr_args, "--freq", str(freq), "--json", netlist],
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
    reported = median_seed({seed: r["fmax_mhz"] for seed, r in routed.items()})
    run = routed[reported]
    entry.update(status="ok", fmax_mhz=run["fmax_mhz"], fmax_placed_mhz=run["fmax_placed_mhz"],
                 meets_target=bool(run["fmax_mhz"]) and run["fmax_mhz"] >= freq,
                 utilisation=run["utilisation"])
    if len(opts.seeds) > 1:
        entry["reported_seed"] = reported
        if len(routed) < len(runs):
            entry["message"] = (f"{len(runs) - len(routed)} of {len(runs)} seeds did not "
                                f"finish routing in {opts.pnr_timeout:g} min")
    rename = make_renamer(harness)
    net = Netlist(netlist, synth_top)
    entry["critical_path"] = critical_path(run["report"], net, rename)
    if family.path_model is not None:
        paths, info = netlist_paths.rank_paths(net, family.path_model, top_n=opts.top_paths,
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
    command = command_line([tool_path(tool)] + args)
    try:
        _, seconds = run_nextpnr(target, tool, args, log_path, progress,
                                 timeout=opts.pnr_timeout * 60 if opts.pnr_timeout else None)
    except ToolTimeout as exc:
        # Routing that does not converge is a result too: keep the placement estimate.
        placed = progress.fmax_lines[0] if progress.fmax_lines else None
        log(target, f"{exc}; post-placement Fmax estimate {placed} MHz")
        return {"status": "route_timeout", "command": command, "fmax_placed_mhz": placed,
                "seconds": opts.pnr_timeout * 60,
                "utilisation": with_percent(utilisation_from_log(log_path)),
                "message": (f"nextpnr stopped after {opts.pnr_timeout:g} min"
                            + (" while routing" if "Routing" in progress.last or "|" in progress.last
                               else "") + f"; last: {one_cell(progress.last[:80])}")}
    except ToolError:
        util = utilisation_from_log(log_path)
        over = over_capacity(util)
        if not over:
            raise
        return {"status": "does_not_fit", "command": command, "utilisation": with_percent(util),
                "message": ", ".join(f"{k} {v['used']}/{v['available']} "
                                     f"({100 * v['used'] // v['available']}%)"
                                     for k, v in over.items())}
    with open(ROOT / report_path) as f:
        report = json.load(f)
    return {"status": "ok", "command": command, "seconds": seconds, "report": report,
            "fmax_mhz": fmax_from_report(report),
            "fmax_placed_mhz": progress.fmax_lines[0] if progress.fmax_lines else None,
            "utilisation": with_percent(report.get("utilization", {}))}


def run_breakdown(target, opts, verilog, workdir):
    """A family's cells per module of the unflattened design, grouped by module pattern."""
    family = TARGETS[target].family
    progress = Progress(target)
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    yargs, ysec = run_yosys_script(target, [
        f"read_verilog {verilog}",
        f"{family.synth_command} -top {opts.top} -noflatten",
        f"tee -q -o {workdir}/stat.json stat -json",
    ], workdir, progress)
    with open(ROOT / workdir / "stat.json") as f:
        modules = json.load(f)["modules"]
    columns = {k: family.cells[k] for k in BREAKDOWN_COLUMNS}
    groups = {}
    for name, m in modules.items():
        cells = m.get("num_cells_by_type", {})
        g = groups.setdefault(name_pattern(name.lstrip("\\")), {"instances": 0, **{k: 0 for k in columns}})
        g["instances"] += 1
        for k, n in cell_counts(cells, columns).items():
            g[k] += n
    total_luts = sum(g["luts"] + 2 * g["carry"] for g in groups.values()) or 1
    rows = sorted(({"module": p, **g, "lut4_share": round((g["luts"] + 2 * g["carry"]) / total_luts, 3)}
                   for p, g in groups.items()), key=lambda r: -(r["luts"] + 2 * r["carry"]))
    return {"device": f"{family.name.upper()} cells per module "
                      f"({family.synth_command} -noflatten)",
            "status": "ok", "modules": rows, "commands": [command_line(yargs)],
            "runtime_s": {"yosys": round(ysec, 1)}}


def generic_adder_map(adders):
    """The ``synth`` option that maps adders and comparisons (Yosys ``$lcu``
    carry cells) as ``adders``: ``default`` is Yosys's own techmap, the others
    the parallel-prefix networks Yosys ships in ``+/choices/``. After ``abc
    -g`` a 32-bit sum of the default map is 62 gate levels deep, Kogge-Stone's
    34 (``tests/test_synth_tools.py``)."""
    if adders not in GENERIC_ADDERS:
        raise ValueError(f"generic adders must be one of {', '.join(GENERIC_ADDERS)}, not {adders!r}")
    return "" if adders == "default" else f" -extra-map +/choices/{adders}.v"


def run_generic(target, opts, verilog, workdir):
    """Generic gates: logic depth with ``ltp -noff`` and per-endpoint ranking."""
    progress = Progress(target)
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    netlist = f"{workdir}/netlist.json"
    yargs, ysec = run_yosys_script(target, [
        f"read_verilog {verilog}",
        f"hierarchy -check -top {opts.top}", "proc", "flatten", *MARK_REGISTERS,
        f"synth -flatten -top {opts.top} -noabc{generic_adder_map(opts.generic_adders)}",
        f"abc -g {GENERIC_GATES}",
        "opt_clean",
        f"tee -q -o {workdir}/stat.json stat -json",
        f"tee -q -o {workdir}/ltp.txt ltp -noff",
        f"write_json {netlist}",
    ], workdir, progress)
    cells = yosys_cells(f"{workdir}/stat.json")
    depth, ltp_names = parse_ltp((ROOT / workdir / "ltp.txt").read_text())
    paths, info = netlist_paths.rank_paths(Netlist(netlist, opts.top), netlist_paths.GENERIC,
                                           top_n=opts.top_paths)
    ffs = count_cells(cells, *GENERIC_FF_CELLS)
    return {
        "device": f"generic gates ({GENERIC_GATES}, NOT), {opts.generic_adders} adders",
        "status": "ok",
        "adders": opts.generic_adders,
        "logic_depth": depth,
        "logic_depth_path": {"start": ltp_names[0], "end": ltp_names[-1]} if ltp_names else None,
        "logic_depth_reg_to_reg": info["worst"],
        "gates": sum(n for t, n in cells.items() if not t.startswith("$scopeinfo")) - ffs,
        "ffs": ffs,
        "yosys_cells": cells,
        "top_paths": paths,
        "top_paths_model": info,
        "commands": [command_line(yargs)],
        "runtime_s": {"yosys": round(ysec, 1)},
    }
