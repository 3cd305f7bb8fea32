"""Compile the SystemRDL register description (``kvfabric/hw/kvfabric.rdl``) with
``systemrdl-compiler`` into the neutral table :mod:`kvfabric.regmap_table`.

The RTL elaborates at import time and the golden model must not depend on a
compiler, so the table is generated once, committed, and checked by a test
(``tests/test_regmap.py``) to equal what this module compiles from the RDL.
``kvfabric regs --sync`` rewrites it. Needs the ``regs`` extra.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["RDL_PATH", "compile_rdl", "elaborate_rdl", "register_map_data", "render_table"]

#: The description, shipped as package data of ``kvfabric.hw``.
RDL_PATH = Path(str(resources.files("kvfabric.hw") / "kvfabric.rdl"))

_REG_FLAGS = {"staged": "kvf_staged", "commit": "kvf_commit", "snapshot": "kvf_snapshot"}


def elaborate_rdl(path: Path | str = RDL_PATH):
    """The elaborated root node of the description (raises ``RDLCompileError`` with the
    file and line of the first error)."""
    from systemrdl import RDLCompiler
    compiler = RDLCompiler()
    compiler.compile_file(str(path))
    return compiler.elaborate()


def _udp(node, name, default):
    value = node.get_property(name, default=None) if name in node.list_properties(include_udp=True) else None
    return default if value is None else value


def _access(value) -> str:
    # systemrdl's AccessType enum -> "rw", "r", "w", "na".
    return value.name


def _field(node) -> dict:
    reset = node.get_property("reset")
    return {
        "name": node.inst_name,
        "lsb": node.lsb,
        "width": node.width,
        "sw": _access(node.get_property("sw")),
        "hw": _access(node.get_property("hw")),
        "reset": None if reset is None else int(reset),
        "pulse": bool(node.get_property("singlepulse")),
        "counter": bool(node.get_property("counter")),
        "param": bool(_udp(node, "kvf_param", False)),
        "value_lsb": int(_udp(node, "kvf_value_lsb", 0)),
        "desc": node.get_property("desc") or "",
    }


def _register(node, offset: int) -> dict:
    reg = {"name": node.inst_name, "offset": offset, "title": node.get_property("name") or node.inst_name}
    reg.update({flag: bool(_udp(node, udp, False)) for flag, udp in _REG_FLAGS.items()})
    reg["fields"] = [_field(f) for f in node.fields()]
    return reg


def _block(node, registers: list, *, name: str | None = None, title: str | None = None) -> dict:
    array = node is not None and node.is_array
    if array and len(node.array_dimensions) != 1:
        raise ValueError(f"{node.inst_name}: only one-dimensional arrays are supported")
    return {
        "name": name or node.inst_name,
        "title": title or node.get_property("name") or node.inst_name,
        "base": 0 if node is None else node.raw_address_offset,
        "stride": node.array_stride if array else 0,
        "count": node.array_dimensions[0] if array else 1,
        "per": None if node is None else _udp(node, "kvf_count", None),
        "registers": registers,
    }


def register_map_data(root) -> dict:
    """The neutral table (plain dicts, lists and ints) of an elaborated description.

    Top-level registers that are not arrays form the block ``FABRIC``; every regfile
    array and every register array is a block of its own, with its base, stride and
    element count.
    """
    from systemrdl.node import RegNode, RegfileNode
    top = root.top
    fabric, blocks = [], []
    for node in top.children(unroll=False):
        if isinstance(node, RegNode) and not node.is_array:
            fabric.append(_register(node, node.raw_address_offset))
        elif isinstance(node, RegNode):
            blocks.append(_block(node, [_register(node, 0)]))
        elif isinstance(node, RegfileNode):
            regs = [_register(r, r.raw_address_offset) for r in node.children(unroll=False)
                    if isinstance(r, RegNode)]
            blocks.append(_block(node, regs))
        else:
            raise ValueError(f"{node.inst_name}: unsupported component {type(node).__name__}")
    blocks.insert(0, _block(None, fabric, name="FABRIC", title="Fabric registers"))
    return {"name": top.inst_name, "desc": top.get_property("desc") or "", "blocks": blocks}


def compile_rdl(path: Path | str = RDL_PATH) -> dict:
    """:func:`register_map_data` of the description at ``path``."""
    return register_map_data(elaborate_rdl(path))


def _hex(value):
    return "None" if value is None else f"0x{value:04X}"


def render_table(data: dict) -> str:
    """The text of ``kvfabric/regmap_table.py`` for ``data``: one line per field, addresses
    in hexadecimal, so that a change of the description reads as a small diff."""
    lines = ['"""The register map compiled from kvfabric/hw/kvfabric.rdl by ``kvfabric regs --sync``.',
             "",
             "Generated: do not edit (tests/test_regmap.py checks that it equals the description).",
             'Plain data with no imports; read it through :mod:`kvfabric.regmap`.',
             '"""',
             "",
             "REGISTER_MAP = {",
             f"    'name': {data['name']!r},",
             f"    'desc': {data['desc']!r},",
             "    'blocks': ["]
    for block in data["blocks"]:
        head = {k: v for k, v in block.items() if k != "registers"}
        lines.append("        {" + ", ".join(
            f"{k!r}: {_hex(v) if k in ('base', 'stride') else repr(v)}" for k, v in head.items())
            + ", 'registers': [")
        for reg in block["registers"]:
            rhead = {k: v for k, v in reg.items() if k != "fields"}
            lines.append("            {" + ", ".join(
                f"{k!r}: {_hex(v) if k == 'offset' else repr(v)}" for k, v in rhead.items())
                + ", 'fields': [")
            for field in reg["fields"]:
                lines.append("                {" + ", ".join(
                    f"{k!r}: {_hex(v) if k == 'reset' and v is not None and v > 9 else repr(v)}"
                    for k, v in field.items()) + "},")
            lines.append("            ]},")
        lines.append("        ]},")
    lines += ["    ],", "}", ""]
    return "\n".join(lines)
