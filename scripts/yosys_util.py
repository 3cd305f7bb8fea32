"""Reading Yosys netlists, shared by :mod:`kvfabric.scripts.synth`,
:mod:`kvfabric.scripts.netlist_paths` and :mod:`kvfabric.scripts.state_budget`.

``write_json`` netlists name nets by bit numbers; :class:`Netlist` indexes
them so that a cell's output bit can be turned back into the public wire names
that alias it, and :data:`MARK_REGISTERS` tags the RTL's register wires so that
a mapped flip-flop keeps its RTL name.  :func:`design_params` recovers the
tenants and channels of a generated netlist.  The tools themselves run through
:mod:`kvfabric.scripts.synth.tools`.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from .synth.tools import ROOT, ToolError

__all__ = ["design_params", "Netlist", "name_pattern", "MARK_REGISTERS", "REGISTER_ATTR"]

#: Wire attribute that marks the register wires of the RTL (see MARK_REGISTERS).
REGISTER_ATTR = "kvfabric_reg"
#: Yosys commands, to run after ``proc; flatten`` and before any optimisation,
#: that mark every wire driven by a flip-flop's Q output: at that point those
#: are exactly the registers the RTL declared.  The attribute survives
#: synthesis, so that a mapped flip-flop can be named after its RTL register
#: rather than after whichever port happens to alias it.
MARK_REGISTERS = [
    "select -set kvfabric_regs t:$*dff* t:$*dlatch* %u %x:+[Q] t:* %d",
    f"setattr -set {REGISTER_ATTR} 1 @kvfabric_regs",
]

_PARAM_RE = re.compile(r"\b(tenants|channels)\s*[=:]\s*(\d+)")


_CHANNEL_MODULE_RE = re.compile(r"^module \\\S*\.channel_(\d+) ", re.M)
_FIFO_MODULE_RE = re.compile(r"^module \\\S*\.channel_0\.q_fifo_(\d+) ", re.M)


def design_params(verilog_path, tenants=None, channels=None):
    """Tenants and channels of a generated netlist, with where they came from.

    Amaranth's Verilog has no parameters, so the values come from, in order:
    the arguments; ``tenants=N``/``channels=N`` in the comment lines at the top
    of the file (a generator may write them); the module names
    Amaranth gives the instances (``kvfabric.channel_<c>`` and
    ``kvfabric.channel_0.q_fifo_<t>``); the defaults of
    :class:`kvfabric.spec.FabricParams`.
    """
    given = {"tenants": tenants, "channels": channels}
    text = Path(verilog_path).read_text(errors="replace")
    header = {}
    for line in text.splitlines()[:40]:
        s = line.strip()
        # Comments and attributes only: a port named "channels" must not count.
        if s.startswith(("//", "/*", "*", "(*")):
            for key, value in _PARAM_RE.findall(s):
                header.setdefault(key, int(value))
    inferred = {}
    channel_ids = set(_CHANNEL_MODULE_RE.findall(text))
    fifo_ids = set(_FIFO_MODULE_RE.findall(text))
    if channel_ids:
        inferred["channels"] = len(channel_ids)
    if fifo_ids:
        inferred["tenants"] = len(fifo_ids)
    sources = []
    values = {}
    for key in ("tenants", "channels"):
        for source, table in (("command line", given), ("verilog header", header),
                              ("module names", inferred)):
            if table.get(key) is not None:
                values[key] = table[key]
                sources.append(f"{key} from {source}")
                break
        else:
            from kvfabric.spec import FabricParams
            values[key] = getattr(FabricParams(), key)
            sources.append(f"{key} assumed (FabricParams default)")
    return values["tenants"], values["channels"], ", ".join(sources)


class Netlist:
    """One module of a Yosys ``write_json`` netlist, indexed by net bit.

    Attributes
    ----------
    cells : dict
        Cell name to the JSON cell record.
    names : dict
        Net bit to a list of ``(wire name, bit index)`` for every public wire
        (``hide_name == 0``) that carries it.
    attrs : dict
        Wire name to its attribute dict.
    widths : dict
        Wire name to its width.
    ports : dict
        Port name to the JSON port record.
    """

    def __init__(self, path, top):
        with open(ROOT / path) as f:
            data = json.load(f)
        module = data["modules"].get(top)
        if module is None:
            raise ToolError(f"module {top!r} not in {path} (found: {sorted(data['modules'])})")
        self.cells = module["cells"]
        self.ports = module["ports"]
        self.names = defaultdict(list)
        self.attrs = {}
        self.widths = {}
        for name, info in module["netnames"].items():
            self.widths[name] = len(info["bits"])
            self.attrs[name] = info.get("attributes", {})
            if info.get("hide_name"):
                continue
            for i, bit in enumerate(info["bits"]):
                if isinstance(bit, int):
                    self.names[bit].append((name, i))

    def bit_names(self, bit):
        """Public ``name[i]`` strings of a net bit, shortest first."""
        return sorted((f"{n}[{i}]" if self.widths[n] > 1 else n for n, i in self.names.get(bit, ())),
                      key=lambda s: (len(s), s))

    def best_name(self, bit):
        """The most readable public name of a net bit, or ``None``."""
        names = self.bit_names(bit)
        return names[0] if names else None

    def reg_name(self, bit):
        """The name of the RTL register a flip-flop output bit carries (wires
        marked by :data:`MARK_REGISTERS`), else :meth:`best_name`."""
        marked = sorted((f"{n}[{i}]" if self.widths[n] > 1 else n for n, i in self.names.get(bit, ())
                         if REGISTER_ATTR in self.attrs[n]), key=lambda s: (len(s), s))
        return marked[0] if marked else self.best_name(bit)


_DIGITS = re.compile(r"\d+")


def name_pattern(name: str) -> str:
    """A register name with its numbers replaced by ``*`` (``ch3.dyn_tag_5`` →
    ``ch*.dyn_tag_*``), so that per-tenant and per-channel copies group together."""
    return _DIGITS.sub("*", name)
