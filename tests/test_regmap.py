"""The one register description (kvfabric/hw/kvfabric.rdl) and what is derived from it.

The committed table :mod:`kvfabric.regmap_table` must be what ``systemrdl-compiler``
compiles from the RDL today; the widths :mod:`kvfabric.spec` gives the model must be
the description's; every described register is decoded by exactly one RTL block (or
listed as pending); and the description must say what spec §9 says in words about a
few registers that the map's consumers rely on.
"""

from pathlib import Path
from xml.etree import ElementTree

from kvfabric import rdl
from kvfabric.hw.config import PENDING, params_word, register_file_registers
from kvfabric.hw.telemetry import telemetry_registers
from kvfabric.regmap import REGMAP
from kvfabric.regmap_table import REGISTER_MAP
from kvfabric.spec import (EPOCH_CYCLES_BITS, STARVE_LIMIT_BITS, TENANT_FIELD_BITS,
                           FabricParams)


def test_committed_table_equals_the_description():
    compiled = rdl.compile_rdl()
    assert compiled == REGISTER_MAP, "kvfabric/regmap_table.py is stale: run `kvfabric regs --sync`"
    path = rdl.RDL_PATH.parents[1] / "kvfabric" / "regmap_table.py"
    if path.exists():  # a checkout (not the wheel): the file text is what --sync writes
        assert path.read_text() == rdl.render_table(compiled)


def test_description_error_names_file_and_line(tmp_path, capfd):
    bad = tmp_path / "bad.rdl"
    bad.write_text("addrmap x {\n  reg { field { sw = rw; } f[40:0]; } R @ 0x0;\n};\n")
    try:
        rdl.compile_rdl(bad)
    except Exception as error:
        assert type(error).__name__ == "RDLCompileError"
    else:
        raise AssertionError("a 41-bit field in a 32-bit register compiled")
    assert f"{bad}:2:" in capfd.readouterr().err


def test_spec_widths_are_the_descriptions():
    tenant = REGMAP.block("TENANT")
    widths = {f.name: f.width for r in tenant.registers if r.staged for f in r.fields}
    assert widths == TENANT_FIELD_BITS
    fabric = REGMAP.block("FABRIC")
    assert fabric.register("STARVE_LIMIT").field("starve_limit").width == STARVE_LIMIT_BITS
    assert fabric.register("EPOCH_CYCLES").field("epoch_cycles").width == EPOCH_CYCLES_BITS


def test_every_register_is_decoded_once():
    params = FabricParams(tenants=16, channels=16)
    regfile = {a for a, *_ in register_file_registers(params)}
    telemetry = {a for a, *_ in telemetry_registers(params)}
    pending = {a for a, _, _, r in REGMAP.registers(params) if r.name in PENDING}
    every = [a for a, *_ in REGMAP.registers(params)]
    assert len(every) == len(set(every)), "two registers at one address"
    assert not regfile & telemetry and not (regfile | telemetry) & pending
    assert regfile | telemetry | pending == set(every)
    assert set(PENDING) <= {r.name for b in REGMAP.blocks for r in b.registers}


def test_description_says_what_spec_9_says():
    # Spot checks written from the spec's text, not from the table.
    fabric, tenant = REGMAP.block("FABRIC"), REGMAP.block("TENANT")
    assert fabric.address("ID") == 0 and fabric.register("ID").field("id").reset == 0x4B564642
    assert fabric.address("CREDITS") == 0x001C and fabric.register("CREDITS").access == "RW"
    assert [(f.name, f.lsb, f.width) for f in fabric.register("CREDITS").fields] == [
        ("credit_urgent", 0, 8), ("credit_guaranteed", 8, 8), ("credit_burst", 16, 8),
        ("bulk_prio", 24, 4)]
    ctrl = fabric.register("CTRL")
    assert ctrl.field("snapshot").pulse and ctrl.read_mask == 1
    assert tenant.address("COMMIT", 3) == 0x0100 + 0x20 * 3 + 0x18
    assert tenant.register("COMMIT").commit and tenant.register("COMMIT").access == "WO"
    assert all(r.staged for r in tenant.registers if not r.commit)
    assert REGMAP.block("TEL").address("QUEUE_HWM", 2) == 0x1000 + 0x40 + 0x14
    assert REGMAP.block("DROPPED").address("DROPPED", 5) == 0x1814
    hi = REGMAP.block("TEL").register("BYTES_HI").field("bytes")
    assert (hi.value_lsb, hi.width) == (32, 16)
    assert REGMAP.decode(0x0FFC) is None and REGMAP.decode(0x0102) is None
    assert REGMAP.decode(0x0100 + 0x20 * 2, FabricParams(tenants=2)) is None
    assert params_word(FabricParams(tenants=2, channels=3, queue_depth=16, tag_bits=24)) == 0x18_10_03_02


def test_spec_9_table_is_generated_from_the_description():
    from kvfabric import regs
    spec = (Path(__file__).resolve().parents[1] / "docs" / "spec.md").read_text()
    body = spec.split(regs.SPEC_BEGIN + "\n", 1)[1].split("\n" + regs.SPEC_END, 1)[0]
    assert body == regs.spec_table(), "docs/spec.md §9 table is stale: run `kvfabric regs --sync`"


def test_regs_exports_header_ipxact_and_docs(tmp_path, capsys):
    from kvfabric.cli import main
    assert main(["regs", "--out", str(tmp_path / "regs")]) == 0
    out = tmp_path / "regs"
    assert sorted(p.name for p in out.iterdir()) == ["kvfabric.h", "kvfabric.md", "kvfabric.xml"]
    header = (out / "kvfabric.h").read_text()
    # The header's struct is laid out by the description's addresses (spec §9).
    assert "} kvfabric_t;" in header and "KVFABRIC__CREDITS__CREDIT_BURST_bp 16" in header
    # ... ending with DROPPED[16] at 0x1800: 0x1800 + 16 * 4 bytes.
    assert "static_assert(sizeof(kvfabric_t) == 0x1840" in header
    ipxact = ElementTree.parse(out / "kvfabric.xml").getroot()
    ns = {"ipxact": ipxact.tag.split("}")[0][1:]}
    regs = {r.findtext("ipxact:name", namespaces=ns): r.findtext("ipxact:addressOffset", namespaces=ns)
            for r in ipxact.iter(f"{{{ns['ipxact']}}}register")}
    assert int(regs["CREDITS"].replace("'h", "0x"), 0) == 0x1C
    assert "DROPPED" in (out / "kvfabric.md").read_text()
    assert "kvfabric.h" in capsys.readouterr().out


def test_mirror_knows_credits():
    # CREDITS (issue #14): RW, reset 0, [7:0] urgent,
    # [15:8] guaranteed, [23:16] burst; bytes whose strobe is 0 keep their value.
    from dataclasses import fields

    from kvfabric.model.registers import FabricConfig
    from kvfabric.tb.axil import CREDITS, RegisterMirror
    mirror = RegisterMirror(FabricParams(tenants=2, channels=1))
    assert mirror.read(CREDITS) == 0
    assert mirror.write(CREDITS, 0xAA03_0201, strb=0b0011) is False
    assert mirror.read(CREDITS) == 0x0201
    mirror.write(CREDITS, 0x0007_0000, strb=0b0100)
    assert mirror.read(CREDITS) == 0x07_0201  # bits [31:24] are not a field
    if "credits" in {f.name for f in fields(FabricConfig)}:  # once the model has them (#14)
        assert mirror.config.credits == (1, 2, 7)


# --- one program() for every path (issue #24) -----------------------------------------

def _every_field_set(params, rng):
    """A configuration in which every field of FabricConfig and TenantConfig is
    non-zero (a random value of the register field of the same name), found
    from the dataclasses, so a field added to either is covered without an edit
    here; a field with no register of its name fails."""
    from dataclasses import fields

    from kvfabric.model.registers import FabricConfig, TenantConfig
    from kvfabric.spec import CREDIT_CLASS_NAMES

    def width(block, name):
        found = [f.width for r in REGMAP.block(block).registers for f in r.fields
                 if f.name == name and f.writable and not f.pulse]
        assert len(found) == 1, f"{block}: configuration field {name!r} has no writable register field"
        return found[0]

    def draw(block, name):
        return rng.randrange(1, 1 << width(block, name))
    tenants = [TenantConfig(**{f.name: draw("TENANT", f.name) for f in fields(TenantConfig)})
               for _ in range(params.tenants)]
    fabric = {}
    for f in fields(FabricConfig):
        if f.name == "credits":
            fabric[f.name] = tuple(draw("FABRIC", name) for name in CREDIT_CLASS_NAMES)
        elif f.name != "tenants":
            fabric[f.name] = draw("FABRIC", f.name)
    return FabricConfig(tenants, **fabric)


def test_config_writes_program_every_field(seed):
    """config_writes (behind the cocotb program(), the trace stimulus and the
    Amaranth fabric bench) writes every register the configuration holds: the
    register mirror (spec §9) ends with exactly the configuration, every write
    is needed for that, and the writes are those of every writable register
    the description gives a fabric of these parameters (COMMIT included)."""
    import asyncio
    import random

    from kvfabric.tb.axil import CREDITS, RegisterMirror, config_writes, program
    params = FabricParams(tenants=4, channels=2)
    cfg = _every_field_set(params, random.Random(seed))
    writes = config_writes(cfg)

    def mirrored(ws):
        mirror = RegisterMirror(params)
        for addr, data in ws:
            mirror.write(addr, data)
        return mirror.config
    assert mirrored(writes) == cfg
    assert cfg.credits != (0, 0, 0) and CREDITS in {a for a, _ in writes}
    for k in range(len(writes)):
        assert mirrored(writes[:k] + writes[k + 1:]) != cfg, f"write {k} {writes[k]} changes nothing"
    writable = {a for a, b, _, r in REGMAP.registers(params) if b.name in ("FABRIC", "TENANT")
                and any(f.writable and not f.pulse for f in r.fields) or r.commit}
    assert [a for a, _ in writes if a in writable] == [a for a, _ in writes]
    assert {a for a, _ in writes} == writable

    class Recorder:
        def __init__(self):
            self.writes = []

        async def write_dword(self, addr, data):
            self.writes.append((addr, data))
    axil = Recorder()
    asyncio.run(program(axil, cfg))
    assert axil.writes == writes


def test_config_writes_refuse_an_unprogrammable_field(monkeypatch):
    """A configuration attribute without a register, or a writable register field
    the configuration does not hold, is an error naming it, not a write left out."""
    from dataclasses import dataclass

    import pytest

    from kvfabric.model.registers import FabricConfig, TenantConfig
    from kvfabric.tb import axil

    @dataclass
    class Wider(FabricConfig):
        drain_limit: int = 3
    with pytest.raises(ValueError, match="drain_limit have no writable register field"):
        axil.config_writes(Wider([TenantConfig()]))
    real = axil.config_values
    monkeypatch.setattr(axil, "config_values",
                        lambda c: {k: v for k, v in real(c).items() if k != "bulk_prio"})
    with pytest.raises(ValueError, match="register CREDITS: field.s. bulk_prio have no value"):
        axil.config_writes(FabricConfig([TenantConfig()]))
