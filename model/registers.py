"""Register-level configuration of the arbiter (spec §5, §9).

These are the values the hardware holds, already in fixed point; the contract
compiler (:mod:`kvfabric.model.contract`) produces them from GB/s and milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kvfabric.spec import (ARRIVAL_PRIO_BITS, BULK_PRIO_BITS, BULK_RUN_BITS, COORD_EPOCH_BITS, COORD_FLOOR_BITS,
                           COORD_MIN_EPOCH, CREDIT_BITS, CREDIT_CLASS_NAMES, CREDIT_CLASSES, EPOCH_CYCLES_BITS,
                           STARVE_LIMIT_BITS, TENANT_FIELD_BITS)


def check_field(name: str, value: int, bits: int, where: str = "") -> int:
    """Return ``value`` if it fits an unsigned ``bits``-bit register, else raise."""
    if not isinstance(value, int) or isinstance(value, bool) and bits != 1:
        raise TypeError(f"{where}{name} must be an integer, not {value!r}")
    if not 0 <= int(value) < (1 << bits):
        raise ValueError(f"{where}{name} = {value} does not fit its {bits}-bit register "
                         f"(allowed 0..{(1 << bits) - 1})")
    return int(value)


@dataclass(frozen=True)
class TenantConfig:
    """Active configuration of one tenant, shared by every channel.

    ``rate``/``peak_rate`` are UQ13.3 bytes per cycle, ``capacity`` UQ25.3
    bytes, ``inv_weight`` UQ8.8 (1/φ), ``priority`` 0 (highest) .. 3.
    """

    rate: int = 0
    capacity: int = 0
    peak_rate: int = 0
    inv_weight: int = 0
    priority: int = 0
    enable: int = 0
    slo_cycles: int = 0

    def __post_init__(self):
        for name, bits in TENANT_FIELD_BITS.items():
            # No int() first: it would turn 1.7 into 1 and True into 1 silently.
            check_field(name, getattr(self, name), bits, "tenant register ")


@dataclass
class FabricConfig:
    """Active configuration of the whole fabric (what the registers hold).

    ``credits`` is the ``CREDITS`` register (spec §6.6, §9): the in-flight
    limits of the credit classes (urgent, guaranteed, burst), 0 = no check;
    ``bulk_prio`` its mask of priorities whose guaranteed grants take the
    burst class's credits; ``arrival_prio`` its mask of priorities whose
    conforming heads are served oldest first instead of in WF2Q+ order
    (spec §6.2).

    ``coord_enable``, ``coord_floor`` (UQ0.8) and ``coord_epoch_cycles`` are
    the ``COORD`` and ``COORD_EPOCH`` registers of the coordinator (spec §13),
    which rewrites each channel's rates from measured demand when enabled.

    ``bulk_run`` is ``CTRL.bulk_run`` (spec §6.2): the fabric grants in a row
    a bulk tenant keeps while the other bulk tenants' non-urgent heads wait,
    0 = off.
    """

    tenants: list[TenantConfig]
    fcfs_bypass: int = 0
    starve_limit: int = 0
    epoch_cycles: int = 0
    credits: tuple[int, int, int] = (0, 0, 0)
    bulk_prio: int = 0
    arrival_prio: int = 0
    coord_enable: int = 0
    coord_floor: int = 0
    coord_epoch_cycles: int = 0
    bulk_run: int = 0

    def __post_init__(self):
        check_field("starve_limit", self.starve_limit, STARVE_LIMIT_BITS)
        check_field("epoch_cycles", self.epoch_cycles, EPOCH_CYCLES_BITS)
        check_field("fcfs_bypass", int(self.fcfs_bypass), 1)
        credits = self.credits
        if not isinstance(credits, (tuple, list)) or len(credits) != CREDIT_CLASSES:
            raise ValueError(f"CREDITS register: credits must be {CREDIT_CLASSES} limits "
                             f"({', '.join(CREDIT_CLASS_NAMES)}), not {credits!r}")
        self.credits = tuple(check_field(name, value, CREDIT_BITS, "CREDITS register ")
                             for name, value in zip(CREDIT_CLASS_NAMES, credits))
        check_field("bulk_prio", self.bulk_prio, BULK_PRIO_BITS, "CREDITS register ")
        check_field("arrival_prio", self.arrival_prio, ARRIVAL_PRIO_BITS, "CREDITS register ")
        check_field("bulk_run", self.bulk_run, BULK_RUN_BITS, "CTRL register ")
        check_field("coord_enable", self.coord_enable, 1, "COORD register ")
        check_field("coord_floor", self.coord_floor, COORD_FLOOR_BITS, "COORD register ")
        check_field("coord_epoch_cycles", self.coord_epoch_cycles, COORD_EPOCH_BITS,
                    "COORD_EPOCH register ")

    @property
    def coord_epoch(self) -> int:
        """The coordinator's effective epoch E in cycles (spec §13): the
        register, or COORD_MIN_EPOCH if it is below it (0 included)."""
        return max(self.coord_epoch_cycles, COORD_MIN_EPOCH)

    @classmethod
    def reset(cls, tenants: int) -> "FabricConfig":
        """The configuration right after reset: every register 0 (all disabled)."""
        return cls([TenantConfig() for _ in range(tenants)])

    def with_tenant(self, index: int, **fields) -> "FabricConfig":
        """A copy with tenant ``index`` changed (what a COMMIT does)."""
        tenants = list(self.tenants)
        tenants[index] = replace(tenants[index], **fields)
        return replace(self, tenants=tenants)


__all__ = ["TenantConfig", "FabricConfig", "TENANT_FIELD_BITS", "check_field", "field"]
