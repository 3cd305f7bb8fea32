"""The targets' flows: synthesis, place and route over seeds, and each target's entry.

:func:`run_target` picks the netlist a target synthesises (generating a
fabric of fewer channels when the target asks for one), runs the target's
flow and returns its report entry: :func:`run_pnr` (Yosys, then nextpnr once
per seed, reporting the median seed), :func:`run_estimate` (Yosys and
nextpnr's packer: area, and the delay model's paths), :func:`run_area` (the
same area for several channel counts and the line through them),
:func:`run_generic` (technology-independent gates and their depth) or
:func:`run_breakdown` (cells per module).
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
from .families import (AREA_TARGET_PER_CHANNEL, BREAKDOWN_COLUMNS, GENERIC_ADDERS,
                       GENERIC_FF_CELLS, GENERIC_GATES, GENERIC_MAPPINGS, TARGETS)
from .harness import make_renamer, top_ports, write_harness
from .parsers import (cell_counts, count_cells, critical_path, fmax_from_report, over_capacity,
                      parse_ltp, utilisation_from_log, with_percent, yosys_cells)
from .progress import Progress
from .report import one_cell
from .tools import (DEFAULT_BUILD_DIR, ROOT, MissingInput, ToolError, ToolTimeout, command_line, log, rel, run_nextpnr, run_tool,
                    run_yosys_script, tool_path, tool_versions)

__all__ = ["run_target", "run_pnr", "run_estimate", "run_area", "run_generic", "run_breakdown",
           "synthesise", "pack_only", "lut_equivalents", "fit_line", "generic_abc",
           "family_pnr_args", "median_seed", "file_sha256", "subset_verilog"]


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


def subset_verilog(target, opts, channels, fpga=False):
    """``build/kvfabric_<channels>ch.v`` (``..._fpga.v``: the channels' FPGA
    form), generated once per run with ``kvfabric verilog --channels
    <channels>`` (and ``--fpga``); a run with another ``--build-dir`` (a
    scratch run) keeps it there instead."""
    name = f"kvfabric_{channels}ch{'_fpga' if fpga else ''}.v"
    out = f"build/{name}" if rel(opts.build_dir) == DEFAULT_BUILD_DIR else f"{rel(opts.build_dir)}/{name}"
    if (channels, fpga) not in opts.generated_subsets:
        args = [sys.executable, "-m", "kvfabric.cli", "verilog", "--channels", str(channels),
                *(["--fpga"] if fpga else []), "--out", out]
        log(target, f"generating the {channels}-channel netlist: {command_line(args)}")
        proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolError(f"`{' '.join(args[1:])}` failed: {proc.stderr.strip()[-500:]}")
        opts.generated_subsets.add((channels, fpga))
    return out


def run_target(target, opts):
    """One target's report entry (raises :class:`ToolError` or ``ValueError`` on failure)."""
    spec = TARGETS[target]
    workdir = f"{rel(opts.build_dir)}/{target}"
    started = time.monotonic()
    if spec.flow == "area":
        # Several netlists, each named in its point of the line.
        entry = run_area(target, opts, workdir)
        common = {"revision": opts.revision}
    else:
        verilog = opts.verilog
        tenants, channels = opts.tenants, opts.channels
        if spec.channels is not None:
            if spec.channels == 1 and opts.verilog_1ch:
                verilog = opts.verilog_1ch
            elif not opts.verilog_given:
                verilog = subset_verilog(target, opts, spec.channels, fpga=spec.fpga)
        if not (ROOT / rel(verilog)).exists():
            raise MissingInput(f"{verilog} does not exist: run `make verilog` first")
        verilog = rel(verilog)
        tenants, channels, source = design_params(ROOT / verilog, tenants, channels)
        log(target, f"{verilog} (top {opts.top}; {tenants} tenants x {channels} channels; "
                    f"{source})")
        common = {"verilog": verilog, "verilog_sha256": file_sha256(verilog), "top": opts.top,
                  "design": {"tenants": tenants, "channels": channels, "source": source},
                  "revision": opts.revision}
        flow = {"pnr": run_pnr, "estimate": run_estimate, "generic": run_generic,
                "breakdown": run_breakdown}[spec.flow]
        entry = flow(target, opts, verilog, workdir)
    return {"target": target, **common, **entry, "tools": tool_versions(*spec.tools),
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


def synthesise(target, opts, verilog, workdir):
    """The family's synthesis of ``verilog`` in its harness, once per netlist
    and run: a second target of the same run on the same bytes (``ecp5_area``'s
    one- and four-channel points, ``ecp5_1ch``, ``ecp5_4ch``) reads the first
    one's netlist.  Returns ``netlist`` (path), ``top`` (the synthesised top),
    ``cells`` (Yosys's counts), ``harness``, ``command``, ``seconds`` (0 when
    reused) and ``workdir`` (where the netlist is)."""
    family = TARGETS[target].family
    key = (family.name, file_sha256(verilog), opts.top, opts.clock, opts.harness)
    memo = opts.synth_memo
    if key in memo:
        log(target, f"{verilog}: reusing the synthesis in {memo[key]['workdir']} (same bytes)")
        return {**memo[key], "seconds": 0.0}
    progress = Progress(target)
    reads, synth_top, harness = _prepare(target, verilog, opts.top, opts.clock, opts.harness,
                                         workdir)
    netlist = f"{workdir}/netlist.json"
    yargs, ysec = run_yosys_script(target, reads + [
        f"hierarchy -check -top {synth_top}", "proc", "flatten", *MARK_REGISTERS,
        f"{family.synth_command} -top {synth_top} -json {netlist}",
        f"tee -q -o {workdir}/stat.json stat -json",
    ], workdir, progress)
    memo[key] = {"netlist": netlist, "top": synth_top, "harness": harness,
                 "cells": yosys_cells(f"{workdir}/stat.json"), "command": command_line(yargs),
                 "workdir": workdir}
    return {**memo[key], "seconds": ysec}


def lut_equivalents(cells, family):
    """Yosys's cells weighed as ``family.lut_equivalents`` says (ECP5: LUT4 +
    2 x CCU2C + 2 x DPR16X4): the logic area before packing."""
    return sum(n * family.lut_equivalents.get(t, 0) for t, n in cells.items())


def pack_only(target, opts, netlist, workdir):
    """nextpnr's packer alone (``--pack-only``: no placement, a few seconds):
    the utilisation table, whose ``family.logic_resource`` row is the logic
    area as nextpnr counts it.  Returns ``(utilisation, command, seconds)``."""
    family = TARGETS[target].family
    args = [tool_path(family.pnr_tool), *family.device(opts).pnr_args, "--json", netlist,
            "--pack-only"]
    log_path = f"{workdir}/nextpnr_pack.log"
    log(target, f"packing: {command_line(args)}")
    seconds = run_tool(args, log_path, label=f"{family.pnr_tool} --pack-only")
    util = utilisation_from_log(log_path)
    if family.logic_resource not in util:
        raise ToolError(f"no {family.logic_resource} row in nextpnr's utilisation table "
                        f"({log_path})")
    return util, command_line(args), seconds


def run_estimate(target, opts, verilog, workdir):
    """A design too big to place: synthesis and packing (area against the
    device) and the delay model's worst register-to-register paths."""
    family = TARGETS[target].family
    syn = synthesise(target, opts, verilog, workdir)
    util, pack_cmd, pack_sec = pack_only(target, opts, syn["netlist"], workdir)
    over = over_capacity(util)
    cells = syn["cells"]
    entry = {"device": family.device(opts).description, "target_mhz": family.target_mhz(opts),
             **cell_counts(cells, family.cells), "yosys_cells": cells,
             "lut_equivalents": lut_equivalents(cells, family), "harness": syn["harness"],
             "utilisation": with_percent(util), "commands": [syn["command"], pack_cmd],
             "runtime_s": {"yosys": round(syn["seconds"], 1), "pack": round(pack_sec, 1)}}
    if over:
        entry.update(status="does_not_fit", message=_over_message(over) + " after packing")
    else:
        entry.update(status="ok", message="fits after packing; not placed")
    if family.path_model is not None:
        started = time.monotonic()
        paths, info = netlist_paths.rank_paths(Netlist(syn["netlist"], syn["top"]),
                                               family.path_model, top_n=opts.top_paths,
                                               rename=make_renamer(syn["harness"]))
        entry["top_paths"] = paths
        entry["top_paths_model"] = info
        if info["worst"]:
            entry["predicted_fmax_mhz"] = round(1000.0 / info["worst"], 1)
        entry["runtime_s"]["paths"] = round(time.monotonic() - started, 1)
    return entry


def fit_line(points):
    """The least-squares line through ``[(x, y), ...]``: ``(slope, intercept,
    largest |residual|)``; needs two distinct ``x``."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if not sxx:
        raise ValueError("a line needs at least two distinct channel counts")
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    intercept = my - slope * mx
    return slope, intercept, max(abs(y - (intercept + slope * x)) for x, y in points)


def run_area(target, opts, workdir):
    """Logic area of the fabric with 1, 2 and 4 channels (``area_channels``),
    each generated with ``kvfabric verilog --channels N``, synthesised in the
    harness and packed by nextpnr (no placement), and the least-squares line
    through the points: the area per added channel and the fixed part."""
    spec = TARGETS[target]
    family = spec.family
    resource = family.logic_resource
    points, commands, seconds = [], [], {"yosys": 0.0, "pack": 0.0}
    for n in spec.area_channels:
        verilog = subset_verilog(target, opts, n)
        syn = synthesise(target, opts, verilog, f"{workdir}/{n}ch")
        util, pack_cmd, pack_sec = pack_only(target, opts, syn["netlist"], f"{workdir}/{n}ch")
        cells = syn["cells"]
        points.append({"channels": n, "verilog": verilog, "verilog_sha256": file_sha256(verilog),
                       resource: util[resource]["used"],
                       "lut_equivalents": lut_equivalents(cells, family),
                       **cell_counts(cells, family.cells),
                       "harness_ffs": (syn["harness"] or {}).get("ffs", 0),
                       "yosys_cells": cells})
        commands += [f"python -m kvfabric.cli verilog --channels {n} --out {verilog}",
                     syn["command"], pack_cmd]
        seconds["yosys"] += syn["seconds"]
        seconds["pack"] += pack_sec
        log(target, f"{n} channel(s): {util[resource]['used']} {resource}")
    slope, fixed, residual = fit_line([(p["channels"], p[resource]) for p in points])
    slope_eq, fixed_eq, _ = fit_line([(p["channels"], p["lut_equivalents"]) for p in points])
    tenants, _, _ = design_params(ROOT / points[0]["verilog"])
    return {"device": f"{family.device(opts).description}: {resource} after packing, "
                      "no placement",
            "status": "ok", "design": {"tenants": tenants, "channels": list(spec.area_channels)},
            "resource": resource, "points": points,
            "per_channel": round(slope, 1), "fixed": round(fixed, 1),
            "max_residual": round(residual, 1),
            "lut_equivalents_per_channel": round(slope_eq, 1),
            "lut_equivalents_fixed": round(fixed_eq, 1),
            "target_per_channel": AREA_TARGET_PER_CHANNEL,
            "meets_target": slope <= AREA_TARGET_PER_CHANNEL,
            "commands": commands,
            "runtime_s": {k: round(v, 1) for k, v in seconds.items()}}


def _over_message(over):
    return ", ".join(f"{k} {v['used']}/{v['available']} ({100 * v['used'] // v['available']}%)"
                     for k, v in over.items())


def run_pnr(target, opts, verilog, workdir):
    """An FPGA family: synthesis, place and route once per seed, report."""
    family = TARGETS[target].family
    syn = synthesise(target, opts, verilog, workdir)
    netlist, synth_top, harness, cells = syn["netlist"], syn["top"], syn["harness"], syn["cells"]
    ysec = syn["seconds"]
    freq = family.target_mhz(opts)
    device = family.device(opts)
    entry = {"device": device.description, "target_mhz": freq, **cell_counts(cells, family.cells),
             "yosys_cells": cells, "harness": harness, "commands": [syn["command"]]}
    runs = _pnr_seeds(target, opts, family.pnr_tool,
                      [*device.pnr_args, "--freq", str(freq), "--json", netlist,
                       *family_pnr_args(family, opts)],
                      workdir)
    for seed, run in runs.items():
        entry["commands"].append(run["command"])
        if run["status"] == "does_not_fit":
            # Packing, before any seed matters: one run says it.
            entry.update(status="does_not_fit", message=run["message"],
                         utilisation=run["utilisation"], runtime_s={"yosys": round(ysec, 1)})
            log(target, f"does not fit: {entry['message']}")
            return entry
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


def family_pnr_args(family, opts):
    """The family's own nextpnr options (``Family.pnr_args``), less those
    ``--pnr-arg`` gives (nextpnr refuses an option given twice)."""
    given = {a.split("=")[0] for a in opts.pnr_args if a.startswith("--")}
    return [part for option, value in family.pnr_args if option not in given
            for part in (option, value)]


def _pnr_seeds(target, opts, tool, args, workdir):
    """nextpnr once per seed, ``--pnr-jobs`` at a time: ``{seed: run}`` in the
    seeds' order, each seed's run kept.

    The seeds are tasks of the sweep layer (:func:`kvfabric.sweep.run_sweep`,
    issue #29), so with ``--scheduler`` or $KVFABRIC_SCHEDULER they place and
    route on a cluster's workers (which need this checkout and its .venv on a
    shared file system); locally ``--pnr-jobs`` workers that are threads of
    this process, since each waits on its own nextpnr process.  A design that
    does not fit packs once per seed (seconds each) and the report names the
    first seed's packing.  A seed whose nextpnr fails otherwise stops the
    target with a :class:`ToolError` naming the seed."""
    from kvfabric.sweep import SweepError, run_sweep

    jobs = max(1, min(opts.pnr_jobs, len(opts.seeds)))
    if len(opts.seeds) > 1:
        log(target, f"seeds {','.join(map(str, opts.seeds))}, {jobs} at a time")
    # One seed keeps the plain file names; several get one report and log each.
    tasks = [(f"seed {seed}", (target, opts, tool, args, seed, workdir,
                               f"_seed{seed}" if len(opts.seeds) > 1 else ""))
             for seed in opts.seeds]
    try:
        swept = run_sweep(_pnr_once, tasks, workers=jobs, scheduler=getattr(opts, "scheduler", None),
                          desc=f"{target} place and route", progress=False, processes=False)
    except SweepError as exc:
        raise ToolError(str(exc)) from None
    failed = [r for r in swept if not r.ok]
    if failed:
        raise ToolError("; ".join(f"nextpnr {r.task_id} failed: {r.error.splitlines()[0]}" for r in failed))
    return {seed: r.value for seed, r in zip(opts.seeds, swept)}


def _pnr_once(target, opts, tool, args, seed, workdir, sfx):
    """One nextpnr run: ``status`` ok, does_not_fit or route_timeout, with its numbers."""
    target = f"{target} seed {seed}" if sfx else target  # the progress lines' label
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
                "message": _over_message(over)}
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


def generic_abc(mapping):
    """The ``abc`` command of the generic target for ``mapping``
    (:data:`GENERIC_MAPPINGS`): ``area`` is Yosys's default ABC script,
    ``delay`` an ABC script that balances the logic for depth before mapping."""
    if mapping not in GENERIC_MAPPINGS:
        raise ValueError(f"generic mapping must be one of {', '.join(GENERIC_MAPPINGS)}, "
                         f"not {mapping!r}")
    script = GENERIC_MAPPINGS[mapping]
    return f"abc -g {GENERIC_GATES}" + (f" -script +{script.replace(' ', ',')}" if script else "")


def run_generic(target, opts, verilog, workdir):
    """Generic gates: logic depth with ``ltp -noff`` and per-endpoint ranking."""
    progress = Progress(target)
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    netlist = f"{workdir}/netlist.json"
    yargs, ysec = run_yosys_script(target, [
        f"read_verilog {verilog}",
        f"hierarchy -check -top {opts.top}", "proc", "flatten", *MARK_REGISTERS,
        f"synth -flatten -top {opts.top} -noabc{generic_adder_map(opts.generic_adders)}",
        generic_abc(opts.generic_mapping),
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
        "device": f"generic gates ({GENERIC_GATES}, NOT), {opts.generic_adders} adders, "
                  f"{opts.generic_mapping} mapping",
        "status": "ok",
        "adders": opts.generic_adders,
        "mapping": opts.generic_mapping,
        "abc": generic_abc(opts.generic_mapping),
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
