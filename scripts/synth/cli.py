"""The command line of ``python -m kvfabric.scripts.synth`` (``make synth``).

Parses the options, runs the chosen targets one after the other and rewrites
the reports after each, so that an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

from .families import DEFAULT_TARGETS, FAMILIES, GENERIC_ADDERS, GENERIC_MAPPINGS, TARGETS
from .flows import run_target
from .report import format_markdown, load_default_run, load_results, write_reports
from .tools import DEFAULT_BUILD_DIR, MissingInput, ToolError, fmt_elapsed, log, source_revision

__all__ = ["DESCRIPTION", "seed_list", "build_parser", "parse_options", "main"]

#: The first line of ``--help`` (the package docstring has the rest).
DESCRIPTION = "Synthesise the generated Verilog for FPGA and generic targets (issue #6)."


def seed_list(text):
    """``--seeds``: distinct integers separated by commas."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers separated by commas, not {text!r}")
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds must be distinct and at least one, not {text!r}")
    return seeds


def build_parser():
    """The options of ``python -m kvfabric.scripts.synth``."""
    parser = argparse.ArgumentParser(prog="python -m kvfabric.scripts.synth",
                                     description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS),
                        help=f"comma-separated subset of {','.join(TARGETS)} "
                             "(default: %(default)s)")
    parser.add_argument("--verilog", help="generated Verilog (default: build/kvfabric.v)")
    parser.add_argument("--top", default="kvfabric", help="top module (default: %(default)s)")
    parser.add_argument("--freq", type=float, default=100.0,
                        help="ECP5 target clock in MHz (default: %(default)s)")
    parser.add_argument("--ice40-device", choices=sorted(FAMILIES["ice40"].devices), default="up5k")
    parser.add_argument("--ice40-freq", type=float, default=24.0,
                        help="iCE40 target clock in MHz (default: %(default)s)")
    parser.add_argument("--verilog-1ch",
                        help="one-channel Verilog for the ecp5_1ch and ice40 targets (default: "
                             "--verilog if given, else build/kvfabric_1ch.v generated with "
                             "kvfabric verilog --channels 1)")
    parser.add_argument("--generic-adders", choices=GENERIC_ADDERS, default="kogge-stone",
                        help="how the generic target maps adders and comparisons: Yosys's "
                             "default techmap or another parallel-prefix network (default: "
                             "%(default)s)")
    parser.add_argument("--generic-mapping", choices=list(GENERIC_MAPPINGS), default="delay",
                        help="the generic target's ABC script: delay (rebalanced for depth "
                             "before mapping) or area (Yosys's default script) (default: "
                             "%(default)s)")
    parser.add_argument("--tenants", type=int, help="design tenants, for the report only")
    parser.add_argument("--channels", type=int, help="design channels, for the report only")
    parser.add_argument("--clock", default="clk", help="clock port (default: %(default)s)")
    parser.add_argument("--no-harness", dest="harness", action="store_false",
                        help="place and route the top module's ports as pins")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr seed (default: %(default)s)")
    parser.add_argument("--seeds", type=seed_list, metavar="N,N,...",
                        help="place and route once per seed (after one synthesis) and report "
                             "the median run by Fmax, with every seed's Fmax; overrides --seed")
    parser.add_argument("--pnr-arg", dest="pnr_args", action="append", default=[], metavar="ARG",
                        help="extra nextpnr argument, repeatable (e.g. --pnr-arg=--placer-heap-beta "
                             "--pnr-arg=0.6)")
    parser.add_argument("--pnr-jobs", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                        help="place and route up to N seeds at once, each nextpnr on one core "
                             "(default: %(default)s, this machine's cores up to 2; 1 on a "
                             "machine others share)")
    parser.add_argument("--scheduler", default=None,
                        help="address of a running Dask scheduler whose workers place and route the "
                             "seeds (default: $KVFABRIC_SCHEDULER, else --pnr-jobs at a time here)")
    parser.add_argument("--pnr-timeout", type=float, default=90,
                        help="minutes after which nextpnr is stopped and the run reported as "
                             "route_timeout with the post-placement Fmax estimate; 0 for no "
                             "limit (default: %(default)s)")
    parser.add_argument("--top-paths", type=int, default=5,
                        help="endpoints to list in the path ranking (default: %(default)s)")
    parser.add_argument("--revision", help="RTL revision to record (default: git HEAD, with "
                        "+dirty when hw/ differs from it)")
    parser.add_argument("--build-dir", default=DEFAULT_BUILD_DIR,
                        help="scratch directory, one subdirectory per target (default: %(default)s)")
    parser.add_argument("--json", default="reports/synth.json", help="default: %(default)s")
    parser.add_argument("--md", default="reports/synth.md", help="default: %(default)s")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite --md from --json and run nothing (after a change to the "
                             "report's layout)")
    return parser


def parse_options(argv=None):
    """The parsed options, completed with what the flows read: the seed list,
    the default netlist, the revision and the list of targets (``opts.target_list``)."""
    parser = build_parser()
    opts = parser.parse_args(argv)
    if opts.pnr_jobs < 1:
        parser.error(f"--pnr-jobs must be a positive integer (1 or more seeds at a time), not {opts.pnr_jobs}")
    opts.seeds = opts.seeds or [opts.seed]
    opts.verilog_given = opts.verilog is not None
    opts.generated_subsets = set()  # (channel count, FPGA form) of the netlists this run generated
    opts.synth_memo = {}  # one synthesis per netlist and family (flows.synthesise)
    opts.verilog = opts.verilog or "build/kvfabric.v"
    opts.target_list = [t.strip() for t in opts.targets.split(",") if t.strip()]
    bad = [t for t in opts.target_list if t not in TARGETS]
    if bad:
        parser.error(f"unknown target(s) {bad}; choose from {', '.join(TARGETS)}")
    if not opts.report_only:
        opts.revision = opts.revision or source_revision()
    return opts


def main(argv=None):
    opts = parse_options(argv)
    json_path, md_path = Path(opts.json), Path(opts.md)
    results = load_results(json_path)
    if opts.report_only:
        if not results:
            print(f"[synth] {json_path} holds no targets: nothing to report", file=sys.stderr)
            return 1
        md_path.write_text(format_markdown(results, load_default_run(json_path)))
        print(f"[synth] wrote {md_path} from {json_path}")
        return 0
    failed = False
    started, load = time.monotonic(), os.getloadavg()[0]
    start_date = datetime.datetime.now().isoformat(timespec="seconds")
    for target in opts.target_list:
        try:
            results[target] = run_target(target, opts)
        except MissingInput as exc:
            # Nothing ran: an earlier measurement of this target stays in the report.
            log(target, f"ERROR: {exc} (the report keeps this target's earlier entry)")
            failed = True
            continue
        except (ToolError, ValueError) as exc:
            log(target, f"ERROR: {exc}")
            results[target] = {"target": target, "status": "error", "message": str(exc),
                               "date": datetime.datetime.now().isoformat(timespec="seconds")}
            failed = True
        r = results[target]
        if r.get("per_channel") is not None:
            log(target, f"{r['per_channel']:,.0f} {r['resource']} per added channel, "
                        f"{r['fixed']:,.0f} fixed (target <= {r['target_per_channel']:,})")
        elif r.get("predicted_fmax_mhz") is not None:
            log(target, f"{r['message']}; predicted worst path {r['top_paths_model']['worst']} ns "
                        f"(delay model)")
        elif r.get("fmax_mhz") is not None:
            log(target, f"Fmax {r['fmax_mhz']:.1f} MHz (target {r['target_mhz']:g}), "
                        f"{r['luts']} LUTs, {r['ffs']} FFs, {r['carry']} carry cells")
        elif r.get("logic_depth") is not None:
            log(target, f"logic depth {r['logic_depth']} gates "
                        f"({r['logic_depth_reg_to_reg']:g} register to register), "
                        f"{r['gates']} gates, {r['ffs']} FFs")
        write_reports(json_path, md_path, results)
    if sorted(opts.target_list) == sorted(DEFAULT_TARGETS):
        # How long `make synth` takes (issue #25: within 60 min on two cores).
        wall = time.monotonic() - started
        write_reports(json_path, md_path, results, default_run={
            "targets": opts.target_list, "seeds": opts.seeds, "wall_s": round(wall, 1),
            "date": start_date, "revision": opts.revision, "cpus": os.cpu_count(),
            "load_at_start": round(load, 2), "failed": failed,
            "note": "this command's time; `make synth` first runs `make verilog` (the 8 x 8 "
                    "netlist, under a minute)"})
        log("all", f"default targets took {fmt_elapsed(wall)}")
    print(f"[synth] wrote {json_path} and {md_path}")
    return 1 if failed else 0
