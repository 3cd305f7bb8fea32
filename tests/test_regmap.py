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
from kvfabric.spec import (ARRIVAL_PRIO_BITS, BULK_PRIO_BITS, CREDIT_BITS, EPOCH_CYCLES_BITS, STARVE_LIMIT_BITS,
                           TENANT_FIELD_BITS, FabricParams)


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


def test_register_widths_are_the_spec_formats():
    """kvfabric.spec reads the widths from the description; they must be the
    formats spec §3 and §5 define: UQ13.3 rates, UQ25.3 capacity, UQ8.8
    inverse weight, priorities 0..3, 24-bit SLO and timestamps, and §6.6's
    8-bit credit counters with one bulk bit and one arrival bit per priority."""
    assert TENANT_FIELD_BITS == {"rate": 13 + 3, "capacity": 25 + 3, "peak_rate": 13 + 3,
                                 "inv_weight": 8 + 8, "priority": 2, "enable": 1, "slo_cycles": 24}
    assert (STARVE_LIMIT_BITS, EPOCH_CYCLES_BITS) == (23, 32)
    assert (CREDIT_BITS, BULK_PRIO_BITS, ARRIVAL_PRIO_BITS) == (8, 4, 4)
    p = FabricParams()
    assert (p.rate_bits, p.capacity_bits, p.level_bits, p.slo_bits, p.ts_bits) == (16, 28, 28, 24, 24)


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
        ("bulk_prio", 24, 4), ("arrival_prio", 28, 4)]
    ctrl = fabric.register("CTRL")
    # fcfs_bypass [0] and bulk_run [15:8] read back; the snapshot pulse [1] reads 0.
    assert ctrl.field("snapshot").pulse and ctrl.read_mask == 0xFF01
    assert (ctrl.field("bulk_run").lsb, ctrl.field("bulk_run").width) == (8, 8)
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


def test_register_file_knows_credits():
    # CREDITS (issue #14): RW, reset 0, [7:0] urgent,
    # [15:8] guaranteed, [23:16] burst, [27:24] bulk_prio, [31:28] arrival_prio (spec §6.2);
    # bytes whose strobe is 0 keep their value.
    from kvfabric.model.regfile import RegisterFile
    from kvfabric.tb.axil import CREDITS
    mirror = RegisterFile(FabricParams(tenants=2, channels=1))
    assert mirror.read(CREDITS) == 0
    assert mirror.write(CREDITS, 0xAA03_0201, strb=0b0011) is False
    assert mirror.read(CREDITS) == 0x0201
    mirror.write(CREDITS, 0x0007_0000, strb=0b0100)
    assert mirror.read(CREDITS) == 0x07_0201
    assert (mirror.config.credits, mirror.config.bulk_prio) == ((1, 2, 7), 0)
    mirror.write(CREDITS, 0xA500_0000, strb=0b1000)
    assert mirror.read(CREDITS) == 0xA507_0201
    assert (mirror.config.bulk_prio, mirror.config.arrival_prio) == (0b0101, 0b1010)


def test_register_file_stages_commits_and_reads_back():
    """Spec §9 on the model alone: a staged write changes nothing a read or the
    arbiter sees until the tenant's COMMIT, which copies every staged value at
    once; bytes whose strobe is 0 keep the staged value; an address selects its
    word; tenants >= N and unmapped addresses read 0 and ignore writes."""
    from kvfabric.model.regfile import RegisterFile
    from kvfabric.tb.axil import STARVE_LIMIT, tenant_reg
    rf = RegisterFile(FabricParams(tenants=2, channels=1))
    rate, prio = tenant_reg(1, "RATE"), tenant_reg(1, "PRIO_EN")
    rf.write(rate, 0x1234)
    rf.write(rate + 1, 0xAB00, strb=0b0010)  # byte 1 of the same word: 0x12 -> 0xAB
    rf.write(prio, 1 << 8 | 3)
    assert rf.read(rate) == 0 and rf.config.tenants[1].rate == 0 and not rf.changed
    rf.write(tenant_reg(1, "COMMIT"), 0, strb=0)  # any write commits, whatever its strobes
    assert rf.changed and (rf.config.tenants[1].rate, rf.config.tenants[1].priority,
                           rf.config.tenants[1].enable) == (0xAB34, 3, 1)
    assert rf.read(rate + 2) == 0xAB34 and rf.read(prio) == 0x103
    assert rf.config.tenants[0].rate == 0  # the other tenant is untouched
    # Fabric registers are not staged: active from the write on; fields mask the word.
    rf.write(STARVE_LIMIT, 0xFFFF_FFFF)
    assert rf.config.starve_limit == (1 << 23) - 1 and rf.read(STARVE_LIMIT) == (1 << 23) - 1
    before = rf.config
    rf.write(tenant_reg(2, "RATE"), 7)  # tenant 2 of N = 2: not implemented
    rf.write(tenant_reg(2, "COMMIT"), 1)
    rf.write(0x0FFC, 5)
    assert rf.config == before and rf.read(tenant_reg(2, "RATE")) == 0 and rf.read(0x0FFC) == 0


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

    from kvfabric.model.regfile import RegisterFile, config_writes
    from kvfabric.tb.axil import CREDITS, program
    params = FabricParams(tenants=4, channels=2)
    cfg = _every_field_set(params, random.Random(seed))
    writes = config_writes(cfg)

    def mirrored(ws):
        mirror = RegisterFile(params)
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

    from kvfabric.model import regfile
    from kvfabric.model.registers import FabricConfig, TenantConfig

    @dataclass
    class Wider(FabricConfig):
        drain_limit: int = 3
    with pytest.raises(ValueError, match="drain_limit have no writable register field"):
        regfile.config_writes(Wider([TenantConfig()]))
    real = regfile.config_values
    monkeypatch.setattr(regfile, "config_values",
                        lambda c: {k: v for k, v in real(c).items() if k != "bulk_prio"})
    with pytest.raises(ValueError, match="register CREDITS: field.s. bulk_prio have no value"):
        regfile.config_writes(FabricConfig([TenantConfig()]))
