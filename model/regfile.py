"""The register file of spec §9 as a model: what a write does to the active
configuration (staged writes, ``COMMIT``, byte strobes, single pulses) and
what a read returns, and the writes that program a configuration.

Addresses, fields and widths come from the register description
(:data:`kvfabric.regmap.REGMAP`, compiled from ``hw/kvfabric.rdl``); the
behaviour is applied here from the description's properties, so the model is
written from the spec, not from the RTL's decode. The testbench
(:mod:`kvfabric.tb.axil`, the scoreboards), the Amaranth tests and
``kvfabric compile --writes`` share it.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields, replace

from kvfabric.regmap import REGMAP
from kvfabric.spec import CREDIT_CLASS_NAMES

from .registers import FabricConfig, TenantConfig

__all__ = ["FABRIC", "TENANT", "TEL", "DROPPED", "COMMIT", "STAGED", "RegisterFile", "word_address",
           "tenant_words", "credits_values", "config_values", "config_writes"]

FABRIC, TENANT, TEL, DROPPED = (REGMAP.block(name) for name in ("FABRIC", "TENANT", "TEL", "DROPPED"))
#: The tenant block's commit register and its staged registers.
COMMIT = next(r for r in TENANT.registers if r.commit)
STAGED = tuple(r for r in TENANT.registers if r.staged)


def word_address(addr: int) -> int:
    """The register an AXI address selects (spec §9): the 32-bit word containing it."""
    return addr & ~3


def _bytemask(strb: int) -> int:
    return sum(0xFF << (8 * b) for b in range(4) if strb >> b & 1)


def tenant_words(cfg: TenantConfig) -> dict:
    """Register name -> the word that programs ``cfg`` (every staged register)."""
    return {reg.name: reg.word(vars(cfg)) for reg in STAGED}


def credits_values(credits, bulk_prio=0, arrival_prio=0) -> dict:
    """The ``CREDITS`` fields of the limits (urgent, guaranteed, burst) and the
    ``bulk_prio`` and ``arrival_prio`` masks (spec §6.2, §6.6, §9);
    ``FABRIC.register("CREDITS").word`` of them is the register word."""
    return {**dict(zip(CREDIT_CLASS_NAMES, credits)), "bulk_prio": bulk_prio, "arrival_prio": arrival_prio}


class RegisterFile:
    """What spec §9 says a register write does, applied to a :class:`FabricConfig`.

    ``write(addr, data, strb)`` is called for the cycle t in which the write
    takes effect, the cycle after its handshake (spec §9); the caller applies
    :attr:`config` to the model from cycle t+1 and passes the returned
    snapshot request (a ``CTRL`` write with bit 1) to the model's step of
    cycle t, whose snapshot then happens in cycle t+1 (spec §10).

    Every writable fabric field is held in :attr:`fabric`; those that
    :class:`FabricConfig` has (and ``credits``, the tuple of the ``CREDITS``
    limits) are copied into :attr:`config`.

    :attr:`committed` holds the tenant whose ``COMMIT`` the last write was
    (empty otherwise): the coordinator returns a committed tenant to the
    even split even when the commit rewrote the values it had (spec §13.3),
    so the caller passes it to ``FabricModel.set_config(config, committed)``
    whether or not :attr:`changed`.
    """

    def __init__(self, params):
        self.params = params
        self.config = FabricConfig.reset(params.tenants)
        self.staged = [TenantConfig() for _ in range(params.tenants)]
        self.fabric = {f.name: f.reset or 0 for r in FABRIC.registers for f in r.fields
                       if f.writable and not f.pulse}
        self.changed = False
        self.committed: tuple[int, ...] = ()

    def _fabric_config(self, cfg: FabricConfig) -> FabricConfig:
        names = {f.name for f in dataclass_fields(FabricConfig)}
        values = {k: v for k, v in self.fabric.items() if k in names}
        values["credits"] = tuple(self.fabric[name] for name in CREDIT_CLASS_NAMES)
        return replace(cfg, **values)

    def write(self, addr: int, data: int, strb: int = 0xF) -> bool:
        """Apply one write (``addr`` selects the word containing it, ``strb`` its
        bytes); return True if it requests a snapshot."""
        cfg, snap = self.config, False
        self.committed = ()
        found = REGMAP.decode(word_address(addr), self.params)
        if found is not None:
            block, i, reg = found
            mask = _bytemask(strb)
            if reg.commit:
                self.config = cfg.with_tenant(i, **vars(self.staged[i]))
                self.committed = (i,)
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


def config_values(config: FabricConfig) -> dict:
    """Register field name -> value for every fabric-wide field ``config`` holds
    (:class:`FabricConfig`'s attributes by name, ``credits`` as the ``CREDITS``
    fields of :data:`kvfabric.spec.CREDIT_CLASS_NAMES`); the inverse of what
    :class:`RegisterFile` copies into its configuration."""
    values = {}
    for f in dataclass_fields(config):
        if f.name == "credits":
            values.update(credits_values(config.credits, config.bulk_prio, config.arrival_prio))
        elif f.name != "tenants":
            values[f.name] = int(getattr(config, f.name))
    return values


def config_writes(config: FabricConfig) -> list[tuple[int, int]]:
    """``(address, data)`` of the writes that program all of ``config``: every
    fabric register with a writable field (address order, from the register
    description; pulse fields such as ``CTRL.snapshot`` written 0), then each
    tenant's staged registers and its ``COMMIT``.

    The only place a configuration becomes register writes: the cocotb
    ``program()`` (tb/axil.py), the trace-driven stimulus
    (tb/trace_stimulus.py), the Amaranth fabric bench and ``kvfabric compile
    --writes`` use it, so no path can leave a field out.  A
    writable field of the description that the configuration does not hold
    is an error here rather than a register silently left at its reset value;
    a configuration attribute that no register holds is one too."""
    values = config_values(config)
    fabric_fields = {f.name for r in FABRIC.registers for f in r.fields if f.writable and not f.pulse}
    unheld = sorted(set(values) - fabric_fields)
    if unheld:
        raise ValueError(f"FabricConfig field(s) {', '.join(unheld)} have no writable register "
                         f"field in the register description (kvfabric/hw/kvfabric.rdl)")
    out = []
    for reg in FABRIC.registers:
        if not any(f.writable for f in reg.fields):
            continue
        missing = [f.name for f in reg.fields if f.writable and not f.pulse and f.name not in values]
        if missing:
            raise ValueError(f"register {reg.name}: field(s) {', '.join(missing)} have no value in "
                             f"FabricConfig; config_writes cannot program them")
        out.append((FABRIC.address(reg.name), reg.word(values)))
    for i, t in enumerate(config.tenants):
        for name, word in tenant_words(t).items():
            out.append((TENANT.address(name, i), word))
        out.append((TENANT.address(COMMIT.name, i), 1))
    return out
