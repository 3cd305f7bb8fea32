"""Does the AXI4 front end lower the channel's FPGA Fmax? (issue #40)

    python -m kvfabric.scripts.axi_timing [--tenants 2] [--data-width 64] [--seeds 1,2,3]
        [--revision HEAD] [--out reports/axi_timing]

Issue #40 bounds the front end's cost in clock rate: its paths must not lower
the channel's Fmax by more than 5 %. This places and routes, on the ECP5-85
with the flow of ``make synth``'s ``ecp5_1ch`` target (its harness, its
seeds, nextpnr's routed Fmax), two netlists of one channel and ``--tenants``
tenants, both generated from one commit (``--revision``, extracted with
``git archive``: never the working tree):

* ``bare``: ``kvfabric verilog --channels 1``, the arbiter with its request
  and grant streams (what ``ecp5_1ch`` measures);
* ``axi``: ``kvfabric verilog --axi --channels 1``, the same arbiter inside
  the AXI4 front end (spec §14), with ``--data-width`` bits of data (the
  width changes multiplexers' widths, not their depth: 64 keeps place and
  route within the hour; say another with ``--data-width``).

place and route one design and one seed at a time (niced: it runs beside
other work), seed by seed, each result kept in the build directory and reused
while its netlist is the same (an interrupted run resumes), and compares the
medians over the seeds: the verdict is met when the AXI
top's median routed Fmax is at least 95 % of the bare one's. Seeds scatter
by several percent on ECP5 (routing is most of every path), which is why
both are medians of the same seeds. Writes ``<out>.json`` and ``<out>.md``
(the Markdown rendered from the JSON by :func:`report_md`). The ASIC half of
the bound (logic only, no routing noise) is in ``make asic``'s report.

A benchmark, not a test: at the default 2 tenants about 4 minutes per
design and seed on two cores, at 8 most of an hour.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

from kvfabric.scripts.synth.tools import ROOT

__all__ = ["DESIGNS", "median_fmax", "compare", "report_md", "main"]

#: Bound of issue #40: the AXI top keeps at least this fraction of the channel's Fmax.
KEEP = 0.95

#: (name, top module, extra ``kvfabric verilog`` arguments).
DESIGNS = (("bare", "kvfabric", ()), ("axi", "kvfabric_axi", ("--axi",)))


def median_fmax(fmax_by_seed):
    """Median routed Fmax over the seeds that routed, and the seeds that did not."""
    routed = [f for f in fmax_by_seed.values() if f is not None]
    failed = sorted(int(s) for s, f in fmax_by_seed.items() if f is None)
    return (statistics.median(routed) if routed else None), failed


def compare(bare, axi):
    """``{"ratio", "met"}``: the AXI top's median Fmax over the bare channel's."""
    if not bare or not axi:
        return {"ratio": None, "met": False}
    ratio = axi / bare
    return {"ratio": ratio, "met": ratio >= KEEP}


def _run(cmd):
    print("[axi-timing] " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"axi_timing: `{' '.join(cmd)}` failed with status {proc.returncode}")


def snapshot(revision, build):
    """``revision``'s sources, importable as ``kvfabric``: the netlists then come
    from one commit, whatever the working tree holds while place and route runs
    (it runs for an hour, and others may be editing ``hw/``). Returns the
    directory to put first on ``PYTHONPATH`` and the full commit hash."""
    commit = subprocess.run(["git", "rev-parse", revision], cwd=ROOT, capture_output=True, text=True)
    if commit.returncode != 0:
        sys.exit(f"axi_timing: --revision {revision!r} is not a commit: {commit.stderr.strip()}")
    commit = commit.stdout.strip()
    src = build / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src, filter="data")
    # pyproject.toml's package-dir: one import root over the top-level folders.
    pkg = build / "pkg"
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(src / "kvfabric", pkg / "kvfabric")
    for folder in ("hw", "model", "sim", "tb", "scripts", "examples"):
        (pkg / "kvfabric" / folder).symlink_to(src / folder, target_is_directory=True)
    return pkg, commit


def generate(name, extra, args, build, pkg):
    """One design's netlist, generated from the snapshot."""
    verilog = build / f"{name}.v"
    env = {**os.environ, "PYTHONPATH": str(pkg)}
    cmd = [sys.executable, "-m", "kvfabric.cli", "verilog", "--tenants", str(args.tenants), "--channels", "1",
           *extra, *(("--data-width", str(args.data_width)) if "--axi" in extra else ()), "--out", str(verilog)]
    print("[axi-timing] PYTHONPATH=" + str(pkg) + " " + " ".join(cmd), flush=True)
    # Not from the project root, whose kvfabric/ would shadow the snapshot's.
    if subprocess.run(cmd, cwd=build, env=env).returncode != 0:
        sys.exit(f"axi_timing: generating {name} failed")
    return verilog


def place_and_route(name, top, verilog, seed, args, build):
    """One design on one seed: the entry ``make synth``'s ``ecp5_1ch`` writes.
    Kept in ``<build>/<name>-s<seed>.json`` and reused while the netlist's
    SHA-256 is the same, so an interrupted run resumes where it stopped."""
    out = build / f"{name}-s{seed}"
    result = Path(str(out) + ".json")
    sha = hashlib.sha256(verilog.read_bytes()).hexdigest()
    if result.exists():
        entry = json.loads(result.read_text())["targets"]["ecp5_1ch"]
        if entry.get("verilog_sha256") == sha:
            print(f"[axi-timing] {name} seed {seed}: reusing {result}", flush=True)
            return entry
    _run(["nice", "-n", "10", sys.executable, "-m", "kvfabric.scripts.synth", "--targets", "ecp5_1ch",
          "--verilog-1ch", str(verilog), "--top", top, "--tenants", str(args.tenants), "--channels", "1",
          "--seeds", str(seed), "--pnr-jobs", "1", "--build-dir", str(out), "--json", str(result),
          "--md", str(out) + ".md"])
    return json.loads(result.read_text())["targets"]["ecp5_1ch"]


def summarise(top, entries):
    """One design's runs (``{seed: entry}``, the seeds not run missing) as the report's record."""
    fmax = {str(seed): e.get("fmax_mhz") for seed, e in entries.items()}
    median, failed = median_fmax(fmax)
    last = entries[max(entries)] if entries else {}
    util = last.get("utilisation") or {}
    return {"top": top, "verilog": last.get("verilog"), "verilog_sha256": last.get("verilog_sha256"),
            "fmax_by_seed": fmax, "fmax_median_mhz": median, "unrouted_seeds": failed,
            "trellis_comb": util.get("TRELLIS_COMB", {}).get("used"),
            "trellis_ff": util.get("TRELLIS_FF", {}).get("used"),
            "critical_path": last.get("critical_path"),
            "message": "; ".join(f"seed {s}: {e['message']}" for s, e in entries.items() if e.get("message")),
            "commands": [c for e in entries.values() for c in e.get("commands", [])],
            "tools": last.get("tools"), "wall_s": sum(e.get("wall_s") or 0 for e in entries.values())}


def _f(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)


def report_md(rep):
    """The readable report of :func:`main`'s JSON."""
    d, v = rep["designs"], rep["verdict"]
    seeds = rep["seeds"]
    lines = [
        "# AXI4 front end and the channel's Fmax (issue #40, `make axi-timing`)", "",
        f"Command: `{rep['command']}`. Revision `{rep['revision']}`. ECP5-85 (CABGA381, speed 8), the flow of "
        f"`make synth`'s `ecp5_1ch` target on {rep['tenants']} tenants x 1 channel; the AXI top with "
        f"{rep['data_width']}-bit data. Seeds {', '.join(map(str, seeds))}.", "",
        "| target | goal | measured | verdict |", "|---|---|---|---|",
        f"| Fmax kept | AXI top's median routed Fmax >= {KEEP:.0%} of the bare channel's | "
        f"{_f(d['axi']['fmax_median_mhz'])} / {_f(d['bare']['fmax_median_mhz'])} MHz = "
        f"{_f(v['ratio'], '{:.3f}')} | {'met' if v['met'] else '**NOT met**'} |", "",
        "| design | top | " + " | ".join(f"seed {s} (MHz)" for s in seeds)
        + " | median | TRELLIS_COMB | TRELLIS_FF | critical path (routed, reported seed) |",
        "|---|---|" + "---|" * len(seeds) + "---|---|---|---|",
    ]
    for name in ("bare", "axi"):
        e = d[name]
        cp = e.get("critical_path") or {}
        path = (f"{cp.get('start')} -> {cp.get('end')}, {_f(cp.get('delay_ns'))} ns "
                f"({_f(cp.get('logic_ns'))} logic, {_f(cp.get('routing_ns'))} routing)") if cp else "-"
        by_seed = e.get("fmax_by_seed") or {}
        lines.append(f"| {name} | `{e['top']}` | " + " | ".join(_f(by_seed.get(str(s))) for s in seeds)
                     + f" | {_f(e['fmax_median_mhz'])} | {_f(e['trellis_comb'], '{:,}')} | "
                     f"{_f(e['trellis_ff'], '{:,}')} | {path} |")
    lines += ["", "A seed shown `-` did not finish routing within the flow's limit; medians are over the seeds "
              "that did. Per-design logs and nextpnr reports: `build/axi_timing/<design>/`."]
    for name in ("bare", "axi"):
        if d[name].get("message"):
            lines.append(f"- {name}: {d[name]['message']}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.axi_timing",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenants", type=int, default=2,
                    help="tenants of both tops (default 2, as make asic's axi_2x1 and bare_2x1; 8 takes "
                         "most of an hour per design and seed)")
    ap.add_argument("--data-width", type=int, default=64, help="AXI data bits of the AXI top (default 64)")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--revision", default="HEAD", help="commit whose RTL is measured (default HEAD; the "
                    "working tree's uncommitted changes are never measured)")
    ap.add_argument("--build-dir", default="build/axi_timing")
    ap.add_argument("--out", default="reports/axi_timing", help="report path without extension")
    ap.add_argument("--report-only", action="store_true", help="render <out>.md from <out>.json and stop")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.report_only:
        out.with_suffix(".md").write_text(report_md(json.loads(out.with_suffix(".json").read_text())))
        return 0
    build = ROOT / args.build_dir
    build.mkdir(parents=True, exist_ok=True)
    pkg, commit = snapshot(args.revision, build)
    netlists = {name: generate(name, extra, args, build, pkg) for name, _, extra in DESIGNS}
    seeds = [int(x) for x in args.seeds.split(",")]
    runs = {name: {} for name, _, _ in DESIGNS}
    # Seed by seed, both designs each time: a run cut short still compares them.
    for seed in seeds:
        for name, top, _ in sorted(DESIGNS, key=lambda d: d[0] != "axi"):   # the one in question first
            runs[name][seed] = place_and_route(name, top, netlists[name], seed, args, build)
    designs = {name: summarise(top, runs[name]) for name, top, _ in DESIGNS}
    rep = {"tenants": args.tenants, "data_width": args.data_width,
           "seeds": [int(s) for s in args.seeds.split(",")],
           "command": f"python -m kvfabric.scripts.axi_timing --tenants {args.tenants} --data-width "
                      f"{args.data_width} --seeds {args.seeds} --revision {commit[:12]}",
           "revision": commit[:12],
           "designs": designs,
           "verdict": compare(designs["bare"]["fmax_median_mhz"], designs["axi"]["fmax_median_mhz"])}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rep, indent=1) + "\n")
    out.with_suffix(".md").write_text(report_md(rep))
    print(f"wrote {out}.json and {out}.md: ratio {_f(rep['verdict']['ratio'], '{:.3f}')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
