"""Register map (spec §9) and configuration / telemetry helpers on cocotbext-axi's
``AxiLiteMaster``, plus :class:`RegisterMirror`, the model of what a register write
does to the active configuration and what a read returns.

Addresses and fields come from the register description
(:data:`kvfabric.regmap.REGMAP`, compiled from ``kvfabric/hw/kvfabric.rdl``); the
behaviour (staging and COMMIT, byte strobes, single pulses, snapshots) is applied
here from the description's properties, so the mirror is written from the spec,
not from the RTL's decode. The Amaranth tests (tests/support/) share this mirror.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields, replace

from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.regmap import REGMAP
from kvfabric.spec import CREDIT_CLASS_NAMES

__all__ = [
    "FABRIC", "TENANT", "TEL", "DROPPED",
    "ID", "VERSION", "PARAMS", "CTRL", "EPOCH_CYCLES", "STARVE_LIMIT", "EPOCH_COUNT", "CREDITS",
    "credits_word", "word_address",
    "ID_VALUE", "VERSION_VALUE", "MARK_ADDR", "MARK_DATA", "MARK_GAP",
    "tenant_reg", "tel_reg", "dropped_reg", "tenant_words", "params_word",
    "RegisterMirror", "program", "commit_tenant", "take_snapshot", "read_telemetry",
]

FABRIC, TENANT, TEL, DROPPED = (REGMAP.block(name) for name in ("FABRIC", "TENANT", "TEL", "DROPPED"))

ID, VERSION, PARAMS, CTRL, EPOCH_CYCLES, STARVE_LIMIT, EPOCH_COUNT, CREDITS = (
    FABRIC.address(name) for name in ("ID", "VERSION", "PARAMS", "CTRL", "EPOCH_CYCLES",
                                      "STARVE_LIMIT", "EPOCH_COUNT", "CREDITS"))
ID_VALUE = FABRIC.register("ID").field("id").reset
VERSION_VALUE = FABRIC.register("VERSION").field("version").reset

#: Trace-start marker of the RTL replay engine (tb/tests/replay_tests.py): a write
#: of MARK_DATA to the unmapped MARK_ADDR (spec §9: ignored, OKAY response); the
#: trace's cycle 0 is MARK_GAP cycles after its write-response handshake.  The
#: VCD checker (tb/vcd_check.py) finds cycle 0 the same way.
MARK_ADDR = 0x0FFC
MARK_DATA = 0x54524143  # "TRAC"
MARK_GAP = 2
assert REGMAP.decode(MARK_ADDR) is None, "the trace marker must be an unmapped address"

_COMMIT = next(r for r in TENANT.registers if r.commit)
_STAGED = tuple(r for r in TENANT.registers if r.staged)


def tenant_reg(i: int, name: str) -> int:
    """Address of tenant ``i``'s register ``name`` (``RATE`` .. ``COMMIT``)."""
    return TENANT.address(name, i)


def tel_reg(i: int, name: str) -> int:
    """Address of tenant ``i``'s snapshot register ``name`` (``BYTES_LO`` .. ``QUEUE_HWM``)."""
    return TEL.address(name, i)


def dropped_reg(c: int) -> int:
    return DROPPED.address("DROPPED", c)


def tenant_words(cfg: TenantConfig) -> dict:
    """Register name -> the word that programs ``cfg`` (every staged register)."""
    return {reg.name: reg.word(vars(cfg)) for reg in _STAGED}


def params_word(params) -> int:
    reg = FABRIC.register("PARAMS")
    return reg.word({f.name: getattr(params, f.name) for f in reg.fields if f.param})


def word_address(addr: int) -> int:
    """The register an AXI address selects (spec §9): the 32-bit word containing it."""
    return addr & ~3


def _bytemask(strb: int) -> int:
    return sum(0xFF << (8 * b) for b in range(4) if strb >> b & 1)


def _credit_fields():
    return [f.name for f in FABRIC.register("CREDITS").fields]


def credits_word(credits) -> int:
    """The ``CREDITS`` word of the limits (urgent, guaranteed, burst), laid out
    by the description's fields (spec §6.6, §9)."""
    fields = {f.name: f for f in FABRIC.register("CREDITS").fields}
    return sum(value << fields[name].lsb for name, value in zip(CREDIT_CLASS_NAMES, credits))


class RegisterMirror:
    """What spec §9 says a register write does, applied to a :class:`FabricConfig`.

    ``write(addr, data, strb)`` is called for the cycle t in which the write
    takes effect, the cycle after its handshake (spec §9); the caller applies
    :attr:`config` to the model from cycle t+1 and passes the returned
    snapshot request (a ``CTRL`` write with bit 1) to the model's step of
    cycle t, whose snapshot then happens in cycle t+1 (spec §10).

    Every writable fabric field is held in :attr:`fabric`; those that
    :class:`FabricConfig` has (and ``credits``, the tuple of the ``CREDITS``
    fields, once the model has it) are copied into :attr:`config`.
    """

    def __init__(self, params):
        self.params = params
        self.config = FabricConfig.reset(params.tenants)
        self.staged = [TenantConfig() for _ in range(params.tenants)]
        self.fabric = {f.name: f.reset or 0 for r in FABRIC.registers for f in r.fields
                       if f.writable and not f.pulse}
        self.changed = False

    def _fabric_config(self, cfg: FabricConfig) -> FabricConfig:
        names = {f.name for f in dataclass_fields(FabricConfig)}
        values = {k: v for k, v in self.fabric.items() if k in names}
        if "credits" in names:
            values["credits"] = tuple(self.fabric[name] for name in _credit_fields())
        return replace(cfg, **values)

    def write(self, addr: int, data: int, strb: int = 0xF) -> bool:
        """Apply one write (``addr`` selects the word containing it, ``strb`` its
        bytes); return True if it requests a snapshot."""
        cfg, snap = self.config, False
        found = REGMAP.decode(word_address(addr), self.params)
        if found is not None:
            block, i, reg = found
            mask = _bytemask(strb)
            if reg.commit:
                self.config = cfg.with_tenant(i, **vars(self.staged[i]))
            elif reg.staged:
                word = (reg.word(vars(self.staged[i])) & ~mask) | (data & mask)
                self.staged[i] = replace(self.staged[i], **{f.name: f.get(word) for f in reg.fields})
            elif block is FABRIC and any(f.writable for f in reg.fields):
                word = (reg.word(self.fabric) & ~mask) | (data & mask)
                for f in reg.fields:
                    if f.pulse:
                        snap = snap or f.get(word) != 0
                    elif f.writable:
                        self.fabric[f.name] = f.get(word)
                self.config = self._fabric_config(cfg)
        self.changed = self.config != cfg
        return snap

    def read(self, addr: int, telemetry=None) -> int | None:
        """Expected read value of the word containing ``addr``: 0 for unmapped addresses; configuration registers from the
        mirror; telemetry registers from ``telemetry`` (a :class:`kvfabric.model.telemetry.Telemetry`),
        or None without one."""
        p = self.params
        found = REGMAP.decode(word_address(addr), p)
        if found is None:
            return 0
        block, i, reg = found
        if reg.snapshot or any(f.counter for f in reg.fields):
            if telemetry is None:
                return None
            values = self._telemetry_values(telemetry, block, i)
        elif block is TENANT:
            values = vars(self.config.tenants[i])
        else:
            values = {}
            for f in reg.fields:
                values[f.name] = (getattr(p, f.name) if f.param else
                                  f.reset if f.hw == "na" else self.fabric.get(f.name, 0))
        word = 0
        for f in reg.fields:
            if f.readable:
                word |= (values[f.name] >> f.value_lsb & ((1 << f.width) - 1)) << f.lsb
        return word

    @staticmethod
    def _telemetry_values(telemetry, block, i) -> dict:
        snapshot = telemetry.snapshot
        if block is TEL:
            return vars(snapshot.tenants[i])
        if block is DROPPED:
            return {"dropped": snapshot.dropped[i]}
        return {"epoch_count": telemetry.epoch_count}


# --- helpers on an AxiLiteMaster ------------------------------------------------------

async def commit_tenant(axil, i: int, t: TenantConfig) -> None:
    """Stage all of tenant i's registers, then COMMIT them at once."""
    for name, word in tenant_words(t).items():
        await axil.write_dword(tenant_reg(i, name), word)
    await axil.write_dword(tenant_reg(i, _COMMIT.name), 1)


async def program(axil, config: FabricConfig) -> None:
    """Program a whole configuration: fabric registers, then every tenant."""
    await axil.write_dword(STARVE_LIMIT, config.starve_limit)
    await axil.write_dword(EPOCH_CYCLES, config.epoch_cycles)
    await axil.write_dword(CTRL, int(config.fcfs_bypass))
    for i, t in enumerate(config.tenants):
        await commit_tenant(axil, i, t)


async def take_snapshot(axil, fcfs_bypass: int) -> None:
    """``CTRL`` bit 1: snapshot now (bit 0 rewritten with its current value)."""
    await axil.write_dword(CTRL, 2 | int(fcfs_bypass))


async def read_telemetry(axil, params) -> dict:
    """All snapshot registers, as the model's ``Counters`` fields."""
    tenants = []
    for i in range(params.tenants):
        lo = await axil.read_dword(tel_reg(i, "BYTES_LO"))
        hi = await axil.read_dword(tel_reg(i, "BYTES_HI"))
        tenants.append({
            "bytes": lo | (hi & 0xFFFF) << 32,
            "bytes_hi_upper": hi >> 16,  # must read 0 (BYTES_HI is bits [47:32])
            "grants": await axil.read_dword(tel_reg(i, "GRANTS")),
            "burst_grants": await axil.read_dword(tel_reg(i, "BURST_GRANTS")),
            "slo_violations": await axil.read_dword(tel_reg(i, "SLO_VIOLATIONS")),
            "queue_hwm": await axil.read_dword(tel_reg(i, "QUEUE_HWM")),
        })
    dropped = [await axil.read_dword(dropped_reg(c)) for c in range(params.channels)]
    epoch_count = await axil.read_dword(EPOCH_COUNT)
    return {"tenants": tenants, "dropped": dropped, "epoch_count": epoch_count}
