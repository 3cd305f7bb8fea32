"""The register mirror of the tests: :class:`kvfabric.model.regfile.RegisterFile` (the
golden model's register file, built from the register description, which the
testbench shares), and the address lists and random configurations the block tests
draw from."""

from kvfabric.hw.config import PENDING
from kvfabric.model.regfile import RegisterFile, tenant_words
from kvfabric.regmap import REGMAP
from kvfabric.tb import stimulus
from kvfabric.tb.axil import (CREDITS, CTRL, DROPPED, EPOCH_COUNT, EPOCH_CYCLES, FABRIC, ID,
                              ID_VALUE, PARAMS, STARVE_LIMIT, TEL, TENANT, VERSION, VERSION_VALUE,
                              dropped_reg, tel_reg, tenant_reg)

__all__ = [
    "CREDITS", "CTRL", "DROPPED", "EPOCH_COUNT", "EPOCH_CYCLES", "FABRIC", "ID", "ID_VALUE",
    "PARAMS", "STARVE_LIMIT", "TEL", "TENANT", "VERSION", "VERSION_VALUE",
    "Mirror", "dropped_reg", "tel_reg", "tenant_reg", "tenant_words",
    "STAGED", "TEL_NAMES", "config_write_addresses", "telemetry_addresses", "telemetry_read",
    "random_tenant",
]

Mirror = RegisterFile

#: The tenant block's staged registers, in address order (``COMMIT`` is not one).
STAGED = [r.name for r in TENANT.registers if r.staged]
#: The telemetry block's registers.
TEL_NAMES = [r.name for r in TEL.registers]


def config_write_addresses(params, *, beyond=0):
    """Addresses of the writable configuration registers (fabric and staged tenant
    registers of the first ``tenants + beyond`` tenants), leaving out the registers the
    RTL does not implement yet (kvfabric.hw.config.PENDING: writes would read back)."""
    fabric = [FABRIC.address(r.name) for r in FABRIC.registers
              if r.access == "RW" and r.name not in PENDING]
    return fabric + [tenant_reg(i, name) for i in range(params.tenants + beyond) for name in STAGED]


def telemetry_addresses(params):
    return [a for a, _, _, r in REGMAP.registers(params)
            if r.snapshot or any(f.counter for f in r.fields)]


def telemetry_read(params, addr, telemetry):
    """Expected read data of a telemetry register (spec §9) from a model; 0 if not one."""
    return RegisterFile(params).read(addr, telemetry) if addr in telemetry_addresses(params) else 0


def random_tenant(rng, params):
    """Any tenant configuration the registers hold (the library's unit-test range)."""
    return stimulus.random_tenant(params, rng, drainable=False)
