"""Dynamic-state budget of the synthesised fabric (spec §5, issue #3).

The Verilog comes from :func:`kvfabric.hw.verilog.generate`; the flip-flops are
counted by :mod:`kvfabric.scripts.state_budget` on the netlist Yosys builds from it
(after its optimisations, so that a register Yosys drops or merges is not
counted).  Expected widths are transcribed from the table of spec §5, not read
from the RTL: a dynamic register that grows, shrinks, disappears or appears
fails these tests.
"""

import re
import shutil
import tempfile

import pytest

from kvfabric.spec import FabricParams
from kvfabric.hw.verilog import TOP_NAME
from kvfabric.scripts.state_budget import BUDGET_BITS, classify_name, measure
from kvfabric.scripts.synth.tools import ROOT
from kvfabric.tb.design import verilog_for

# The YoWASP Yosys only sees the project directory, so builds go under build/,
# in a fresh directory per test (pytest's tmp_path lies outside the sandbox).
BUILD = ROOT / "build" / "pytest"


def spec_dyn_fields(params):
    """Spec §5: the dynamic state of one tenant on one channel, field -> bits."""
    return {"dyn_level": params.level_bits,   # UQ25.3 committed bucket level
            "dyn_peak": params.peak_bits,     # UQ(log2 LMAX + 1).3 peak bucket level
            "dyn_tag": params.tag_bits}       # start tag of the head request


def budget_report(params):
    """The state budget of ``params``' Verilog, generated once per RTL version by
    ``tb.design.verilog_for`` (the file the co-simulations build: the 8 x 8 takes
    about 35 s to generate) and copied into the YoWASP sandbox."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD, prefix="state_budget-") as workdir:
        verilog = f"{workdir}/kvfabric.v"
        shutil.copyfile(verilog_for(params), verilog)
        return measure(verilog, top=TOP_NAME, tenants=params.tenants, channels=params.channels,
                       workdir=workdir)


def dyn_fields(report):
    """Measured ``{field: (registers, bits)}`` of the dynamic-state groups."""
    fields = {}
    for g in report["groups"]:
        if g["category"] != "dyn":
            continue
        m = re.search(r"(dyn_[a-z]+)", g["pattern"].split(".")[-1])
        assert m, f"dynamic register without a dyn_<field> leaf name: {g['pattern']}"
        regs, bits = fields.get(m.group(1), (0, 0))
        fields[m.group(1)] = (regs + g["registers"], bits + g["bits"])
    return fields


def test_default_fabric():
    # One test for the 8x8 default, so that parallel workers build it once.
    params = FabricParams()
    report = budget_report(params)
    tc = params.tenants * params.channels

    # Within the budget of spec §5: at most 64 bits (8 bytes) per tenant per channel.
    dyn = report["dynamic"]
    assert dyn["bits"] > 0
    assert dyn["bits_per_tenant_per_channel"] <= BUDGET_BITS, report["groups"]
    assert dyn["bits"] <= BUDGET_BITS * tc and dyn["bytes"] <= 512
    assert report["categories"]["dyn"]["memory_bits"] == 0

    # Exactly the fields of spec §5: one register per tenant per channel each.
    expected = spec_dyn_fields(params)
    assert dyn_fields(report) == {f: (tc, bits * tc) for f, bits in expected.items()}
    assert dyn["bits"] == sum(expected.values()) * tc == params.dyn_bits * tc

    # The registered selection keys are exactly spec §11's fields: competes,
    # the 4-bit class key, the order value (max(T, TS_BITS) bits), conform,
    # the finish tag, the 3-bit credit class and whether its priority is bulk
    # (the bulk run, spec §6.2) per tenant, and has_credit (3 bits) per channel.
    key_bits = 1 + 4 + max(params.tag_bits, params.ts_bits) + 1 + params.tag_bits + 3 + 1
    assert report["categories"]["key"]["bits"] == key_bits * tc + 3 * params.channels, \
        report["categories"]["key"]

    # The credit counters of spec §6.6 are per-channel state: three 8-bit
    # inflight counters per channel, outside the per-tenant budget.
    assert report["categories"]["inflight"]["bits"] == 3 * 8 * params.channels, \
        report["categories"]["inflight"]

    # The coordinator (spec §13) is its own class beside the budget: at least
    # its rate registers, rate and peak (16 bits each) per tenant and channel,
    # and its allocation and result RAMs (issue #43: no staging registers).
    coord = report["coordinator"]
    assert coord["bits"] == report["categories"]["coord"]["bits"]
    assert coord["ff_bits"] >= 2 * 16 * tc and coord["memory_bits"] >= 2 * 16 * tc, report["categories"]["coord"]

    # No flip-flop carries names of two categories, and synthesis neither
    # removed nor narrowed a dynamic register (the count would hide RTL state).
    assert report["conflicts"] == {}
    for section in ("removed_by_synthesis", "trimmed_by_synthesis"):
        removed = [p for p in report[section] if classify_name(p) == "dyn"]
        assert removed == [], f"{section}: {removed}"


@pytest.mark.parametrize("tenants, channels, tag_bits", [(3, 2, 20), (3, 2, 24)])
def test_count_follows_the_parameters(tenants, channels, tag_bits):
    # Smaller fabrics: the count scales with tenants x channels, and a wider tag
    # (68 bits per tenant per channel) is reported over budget, so the budget
    # check measures the netlist rather than echoing the defaults.
    params = FabricParams(tenants=tenants, channels=channels, tag_bits=tag_bits)
    report = budget_report(params)
    tc = tenants * channels
    per_tc = sum(spec_dyn_fields(params).values())
    assert dyn_fields(report) == {f: (tc, bits * tc) for f, bits in spec_dyn_fields(params).items()}
    assert report["dynamic"]["bits_per_tenant_per_channel"] == per_tc
    assert report["dynamic"]["within_budget"] == (per_tc <= BUDGET_BITS)
    assert report["categories"]["coord"]["ff_bits"] >= 2 * 16 * tc


@pytest.mark.parametrize("name, category", [
    ("channel_0.dyn_level_3", "dyn"),
    ("dyn_tag$12", "dyn"),
    ("regs.cfg_tenant__2", "cfg"),
    ("channel_1.q_fifo_0.r_data", "q"),      # by its instance
    ("rd_q_head", "q"),
    ("telemetry.tel_grants_7", "tel"),
    ("tel_unit.q_head", "q"),                # the innermost name decides
    ("req__0__valid", None),                 # "q_" inside a word is no prefix
    ("seq_no", None),
    ("channel_2.vt", None),
    ("channel_3.key_order_5", "key"),
    ("monkey_bars", None),                   # "key_" inside a word is no prefix
    ("channel_4.inflight_2", "inflight"),    # credit counters (spec §6.6)
    ("regs.cfg_credit_urgent", "cfg"),
    ("coord_rates.coord_load_3", "coord"),           # the coordinator (spec §13)
    ("coord_rates.rate__1__3", "coord"),              # by its instance
    ("discord_x", None),                              # "coord_" inside a word is no prefix
])
def test_classify_name(name, category):
    assert classify_name(name) == category
