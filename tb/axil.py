"""Register map (spec §9) and configuration / telemetry helpers on cocotbext-axi's
``AxiLiteMaster``, plus :class:`RegisterMirror`, the scoreboard's model of what
a register write does to the active configuration.

The addresses are transcribed from the spec, not imported from ``hw/``: the
test bench must not take the RTL's word for its own register map.
"""

from __future__ import annotations

from dataclasses import replace

from kvfabric.model.registers import TENANT_FIELD_BITS, FabricConfig, TenantConfig

__all__ = [
    "ID", "VERSION", "PARAMS", "CTRL", "EPOCH_CYCLES", "STARVE_LIMIT", "EPOCH_COUNT", "CREDITS",
    "credits_word",
    "ID_VALUE", "VERSION_VALUE", "MARK_ADDR", "MARK_DATA", "MARK_GAP", "tenant_reg", "tel_reg", "dropped_reg", "params_word",
    "RegisterMirror", "program", "commit_tenant", "take_snapshot", "read_telemetry",
]

ID = 0x0000
VERSION = 0x0004
PARAMS = 0x0008
CTRL = 0x000C
EPOCH_CYCLES = 0x0010
STARVE_LIMIT = 0x0014
EPOCH_COUNT = 0x0018
CREDITS = 0x001C  # [7:0] urgent, [15:8] guaranteed, [23:16] burst (spec §6.6)
ID_VALUE = 0x4B564642
VERSION_VALUE = 0x00000100

TENANT_BASE, TENANT_STRIDE = 0x0100, 0x20
#: offset -> ((field, lsb), ...)
TENANT_REGS = {
    0x00: (("rate", 0),),
    0x04: (("capacity", 0),),
    0x08: (("peak_rate", 0),),
    0x0C: (("inv_weight", 0),),
    0x10: (("priority", 0), ("enable", 8)),
    0x14: (("slo_cycles", 0),),
}
COMMIT = 0x18
TEL_BASE, TEL_STRIDE = 0x1000, 0x20
TEL_REGS = {"bytes_lo": 0x00, "bytes_hi": 0x04, "grants": 0x08, "burst_grants": 0x0C,
            "slo_violations": 0x10, "queue_hwm": 0x14}
DROPPED_BASE = 0x1800

#: Trace-start marker of the RTL replay engine (tb/tests/replay_tests.py): a write
#: of MARK_DATA to the unmapped MARK_ADDR (spec §9: ignored, OKAY response); the
#: trace's cycle 0 is MARK_GAP cycles after its write-response handshake.  The
#: VCD checker (tb/vcd_check.py) finds cycle 0 the same way.
MARK_ADDR = 0x0FFC
MARK_DATA = 0x54524143  # "TRAC"
MARK_GAP = 2


def tenant_reg(i: int, offset: int) -> int:
    return TENANT_BASE + TENANT_STRIDE * i + offset


def tel_reg(i: int, name: str) -> int:
    return TEL_BASE + TEL_STRIDE * i + TEL_REGS[name]


def dropped_reg(c: int) -> int:
    return DROPPED_BASE + 4 * c


def params_word(params) -> int:
    return (params.tenants | params.channels << 8 | params.queue_depth << 16
            | params.tag_bits << 24)


def credits_word(credits) -> int:
    """The ``CREDITS`` word of limits (urgent, guaranteed, burst)."""
    return credits[0] | credits[1] << 8 | credits[2] << 16


def _fields_word(cfg: TenantConfig, fields) -> int:
    return sum(int(getattr(cfg, name)) << lsb for name, lsb in fields)


def _bytemask(strb: int) -> int:
    return sum(0xFF << (8 * b) for b in range(4) if strb >> b & 1)


class RegisterMirror:
    """What spec §9 says a register write does, applied to a :class:`FabricConfig`.

    ``write(addr, data, strb)`` is called for the cycle t in which the write
    takes effect, the cycle after its handshake (spec §9); the caller applies
    :attr:`config` to the model from cycle t+1 and passes the returned
    snapshot request (a ``CTRL`` write with bit 1) to the model's step of
    cycle t, whose snapshot then happens in cycle t+1 (spec §10).
    """

    def __init__(self, params):
        self.params = params
        self.config = FabricConfig.reset(params.tenants)
        self.staged = [TenantConfig() for _ in range(params.tenants)]
        self.changed = False

    def write(self, addr: int, data: int, strb: int = 0xF) -> bool:
        """Apply one write; return True if it requests a snapshot."""
        mask = _bytemask(strb)
        n = self.params.tenants
        snap = False
        cfg = self.config
        if addr == CTRL:
            word = (int(cfg.fcfs_bypass) & ~mask) | (data & mask)
            self.config = replace(cfg, fcfs_bypass=word & 1)
            snap = bool(data >> 1 & 1) and bool(strb & 1)
        elif addr == EPOCH_CYCLES:
            self.config = replace(cfg, epoch_cycles=((cfg.epoch_cycles & ~mask) | (data & mask)) & 0xFFFFFFFF)
        elif addr == STARVE_LIMIT:
            self.config = replace(cfg, starve_limit=((cfg.starve_limit & ~mask) | (data & mask)) & 0x7FFFFF)
        elif addr == CREDITS:
            word = (credits_word(cfg.credits) & ~mask) | (data & mask)
            self.config = replace(cfg, credits=tuple(word >> 8 * k & 0xFF for k in range(3)))
        elif TENANT_BASE <= addr < TENANT_BASE + TENANT_STRIDE * n:
            i, off = divmod(addr - TENANT_BASE, TENANT_STRIDE)
            if off == COMMIT:
                tenants = list(cfg.tenants)
                tenants[i] = self.staged[i]
                self.config = replace(cfg, tenants=tenants)
            elif off in TENANT_REGS:
                fields = TENANT_REGS[off]
                old = _fields_word(self.staged[i], fields)
                word = (old & ~mask) | (data & mask)
                upd = {name: (word >> lsb) & ((1 << TENANT_FIELD_BITS[name]) - 1) for name, lsb in fields}
                self.staged[i] = replace(self.staged[i], **upd)
        self.changed = self.config is not cfg
        return snap

    def read(self, addr: int, telemetry=None) -> int | None:
        """Expected read value of a configuration register (None: not modelled here)."""
        p, cfg = self.params, self.config
        fixed = {ID: ID_VALUE, VERSION: VERSION_VALUE, PARAMS: params_word(p),
                 CTRL: int(cfg.fcfs_bypass), EPOCH_CYCLES: cfg.epoch_cycles,
                 STARVE_LIMIT: cfg.starve_limit, CREDITS: credits_word(cfg.credits)}
        if addr in fixed:
            return fixed[addr]
        if TENANT_BASE <= addr < TENANT_BASE + TENANT_STRIDE * p.tenants:
            i, off = divmod(addr - TENANT_BASE, TENANT_STRIDE)
            if off in TENANT_REGS:
                return _fields_word(cfg.tenants[i], TENANT_REGS[off])
            return 0  # COMMIT is write-only, the rest unmapped
        return None


# --- helpers on an AxiLiteMaster ------------------------------------------------------

async def commit_tenant(axil, i: int, t: TenantConfig) -> None:
    """Stage all of tenant i's registers, then COMMIT them at once."""
    for off, fields in TENANT_REGS.items():
        await axil.write_dword(tenant_reg(i, off), _fields_word(t, fields))
    await axil.write_dword(tenant_reg(i, COMMIT), 1)


async def program(axil, config: FabricConfig) -> None:
    """Program a whole configuration: fabric registers, then every tenant."""
    await axil.write_dword(STARVE_LIMIT, config.starve_limit)
    await axil.write_dword(EPOCH_CYCLES, config.epoch_cycles)
    await axil.write_dword(CREDITS, credits_word(config.credits))
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
        lo = await axil.read_dword(tel_reg(i, "bytes_lo"))
        hi = await axil.read_dword(tel_reg(i, "bytes_hi"))
        tenants.append({
            "bytes": lo | (hi & 0xFFFF) << 32,
            "bytes_hi_upper": hi >> 16,  # must read 0 (BYTES_HI is bits [47:32])
            "grants": await axil.read_dword(tel_reg(i, "grants")),
            "burst_grants": await axil.read_dword(tel_reg(i, "burst_grants")),
            "slo_violations": await axil.read_dword(tel_reg(i, "slo_violations")),
            "queue_hwm": await axil.read_dword(tel_reg(i, "queue_hwm")),
        })
    dropped = [await axil.read_dword(dropped_reg(c)) for c in range(params.channels)]
    epoch_count = await axil.read_dword(EPOCH_COUNT)
    return {"tenants": tenants, "dropped": dropped, "epoch_count": epoch_count}
