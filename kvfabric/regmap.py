"""The register map of spec §9 as Python objects, read from :mod:`kvfabric.regmap_table`
(compiled from the SystemRDL description ``kvfabric/hw/kvfabric.rdl``).

Neutral like :mod:`kvfabric.spec`: the standard library only, so that the RTL
(:mod:`kvfabric.hw.config`, :mod:`kvfabric.hw.telemetry`), the testbench mirror
(:mod:`kvfabric.tb.axil`), the tests and the documentation read one map without
needing ``systemrdl-compiler``.

A map is a tuple of :class:`Block` s: the fabric registers (``FABRIC``, one
element at address 0), the per-tenant configuration (``TENANT``), the per-tenant
telemetry snapshots (``TEL``) and the per-channel ``DROPPED`` counters. Element
``i`` of a block starts at ``base + stride * i``; a fabric elaborated with N
tenants and C channels implements the first N or C elements (:attr:`Block.per`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvfabric.regmap_table import REGISTER_MAP

__all__ = ["Field", "Register", "Block", "RegisterMap", "REGMAP", "DATA_WIDTH", "ADDR_WIDTH", "params_word"]

#: AXI4-Lite data and address widths (spec §2).
DATA_WIDTH = 32
ADDR_WIDTH = 16


@dataclass(frozen=True)
class Field:
    """A field of a register: bits ``[lsb + width - 1 : lsb]``.

    ``sw``/``hw`` are SystemRDL's access ("rw", "r", "w", "na"). ``reset`` is
    None for values the hardware supplies (parameters, counters). ``pulse``
    (SystemRDL ``singlepulse``): writing 1 acts once and the field reads 0.
    ``param``: the field reports the :class:`kvfabric.spec.FabricParams`
    attribute of its name. ``value_lsb``: the field holds bits from
    ``value_lsb`` up of the value named ``name`` (counters wider than 32 bits).
    """
    name: str
    lsb: int
    width: int
    sw: str
    hw: str
    reset: int | None
    pulse: bool
    counter: bool
    param: bool
    value_lsb: int
    desc: str

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def mask(self) -> int:
        """The field's bits in its register word."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def readable(self) -> bool:
        return "r" in self.sw and not self.pulse

    @property
    def writable(self) -> bool:
        return "w" in self.sw

    def bits(self) -> str:
        """``[msb:lsb]`` or ``[lsb]``, as spec §9 writes bit ranges."""
        return f"[{self.lsb}]" if self.width == 1 else f"[{self.msb}:{self.lsb}]"

    def get(self, word: int) -> int:
        """This field's value in a register word."""
        return word >> self.lsb & ((1 << self.width) - 1)


@dataclass(frozen=True)
class Register:
    """A 32-bit register at ``offset`` within its block's element.

    ``staged``: writes go to a staging copy that the block's ``commit``
    register copies into the active one; reads return the active value.
    ``snapshot``: reads return the copy of a counter taken at the last snapshot.
    """
    name: str
    offset: int
    title: str
    staged: bool
    commit: bool
    snapshot: bool
    fields: tuple[Field, ...]

    @property
    def access(self) -> str:
        """RO, RW or WO, from the fields' software access."""
        read = any(f.readable for f in self.fields)
        write = any(f.writable for f in self.fields)
        return {(True, True): "RW", (True, False): "RO", (False, True): "WO"}[read, write]

    @property
    def read_mask(self) -> int:
        """Bits a read can return non-zero."""
        return sum(f.mask for f in self.fields if f.readable)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name!r} "
                       f"(fields: {', '.join(f.name for f in self.fields)})")

    def word(self, values) -> int:
        """The register word holding ``values[field.name]`` for each field (missing: 0)."""
        return sum((int(values.get(f.name, 0)) & ((1 << f.width) - 1)) << f.lsb for f in self.fields)


@dataclass(frozen=True)
class Block:
    """``count`` elements of ``registers`` at ``base + stride * i`` (``per``: "tenants",
    "channels" or None, the parameter that bounds the implemented elements)."""
    name: str
    title: str
    base: int
    stride: int
    count: int
    per: str | None
    registers: tuple[Register, ...]

    def register(self, name: str) -> Register:
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(f"block {self.name} has no register {name!r} "
                       f"(registers: {', '.join(r.name for r in self.registers)})")

    def address(self, name: str, index: int = 0) -> int:
        """Byte address of register ``name`` of element ``index``."""
        if not 0 <= index < self.count:
            raise IndexError(f"{self.name}[{index}]: index out of range 0..{self.count - 1}")
        return self.base + self.stride * index + self.register(name).offset

    def implemented(self, params) -> int:
        """How many elements a fabric with ``params`` implements."""
        return self.count if self.per is None else getattr(params, self.per)


@dataclass(frozen=True)
class RegisterMap:
    name: str
    desc: str
    blocks: tuple[Block, ...]

    def block(self, name: str) -> Block:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"register map has no block {name!r} "
                       f"(blocks: {', '.join(b.name for b in self.blocks)})")

    def registers(self, params=None):
        """``(address, block, index, register)`` of every register, in address order;
        with ``params``, only those a fabric with these parameters implements."""
        found = []
        for b in self.blocks:
            for i in range(b.count if params is None else b.implemented(params)):
                for r in b.registers:
                    found.append((b.base + b.stride * i + r.offset, b, i, r))
        return sorted(found, key=lambda entry: entry[0])

    def decode(self, addr: int, params=None):
        """``(block, index, register)`` at byte address ``addr``, or None (unmapped)."""
        for a, b, i, r in self.registers(params):
            if a == addr:
                return b, i, r
        return None


def _load(data) -> RegisterMap:
    blocks = []
    for b in data["blocks"]:
        regs = tuple(Register(**{**r, "fields": tuple(Field(**f) for f in r["fields"])})
                     for r in b["registers"])
        blocks.append(Block(**{**b, "registers": regs}))
    return RegisterMap(data["name"], data["desc"], tuple(blocks))


#: The register map of spec §9.
REGMAP = _load(REGISTER_MAP)


def params_word(params) -> int:
    """Value of the ``PARAMS`` register: each field the parameter of its name
    ([7:0] N, [15:8] C, [23:16] D, [31:24] T). The RTL's constant and the
    testbench's expected read-back both come from here."""
    reg = REGMAP.block("FABRIC").register("PARAMS")
    return reg.word({f.name: getattr(params, f.name) for f in reg.fields if f.param})
