"""Configuration register file (spec §5, §9).

Per-tenant registers are written into **staging** registers; a write of any
value to the tenant's ``COMMIT`` register copies all of that tenant's staged
fields into its **active** registers at once, so a channel never sees half of a
new contract.

Commit timing, exactly (spec §9): the register bus write strobe of a COMMIT
write is asserted in cycle h, the cycle of the write handshake (the later of
the AXI AW and W handshakes, see :mod:`hw.axil`). The register file decodes it
and registers the decoded write (``cfg_wr_*``): the write *takes effect* in
cycle t = h+1, when the active registers are written, and every channel uses
the new values from cycle t+1. The same holds for ``CTRL.fcfs_bypass``,
``EPOCH_CYCLES``, ``STARVE_LIMIT`` and ``CREDITS``, which are not staged. A ``CTRL`` write
with bit 1 set taking effect in cycle t makes ``cfg_snapshot`` 1 during cycle
t+1, the cycle in which telemetry takes the snapshot (spec §10). The decode
stage keeps the address comparison off the channels' paths: their next
configuration (``cfg_*_next``) is a choice between registers.

Writes honour the AXI byte strobes: bytes whose strobe is 0 keep their old
(staged) value. ``COMMIT`` commits on any write, whatever its strobes; the
snapshot bit of ``CTRL`` is in byte 0 and needs that byte's strobe. Reads
return the active values (spec §9), never the staged ones; unmapped addresses,
including unaligned ones and the registers of tenants ``>= N``, read 0 and
ignore writes.

Register names start with ``cfg_``: the state-budget script classifies
flip-flops by name.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axil import RegisterBusSignature
from .layouts import tenant_config_layout
from kvfabric.spec import CREDIT_BITS, CREDIT_CLASSES, check_params


__all__ = [
    "ADDR_WIDTH", "DATA_WIDTH",
    "ID", "VERSION", "ID_VALUE", "VERSION_VALUE", "PARAMS", "CTRL", "EPOCH_CYCLES",
    "STARVE_LIMIT", "EPOCH_COUNT", "CREDITS", "TENANT_BASE", "TENANT_STRIDE", "TENANT_REGS", "COMMIT",
    "TEL_TENANT_BASE", "TEL_TENANT_STRIDE", "TEL_TENANT_REGS", "DROPPED_BASE",
    "params_word", "FabricComponent", "RegisterFile",
]

#: AXI4-Lite address and data widths (spec §2).
ADDR_WIDTH = 16
DATA_WIDTH = 32

# Fabric registers (spec §9).
ID            = 0x0000
VERSION       = 0x0004
PARAMS        = 0x0008
CTRL          = 0x000C
EPOCH_CYCLES  = 0x0010
STARVE_LIMIT  = 0x0014
EPOCH_COUNT   = 0x0018
CREDITS       = 0x001C  # [7:0] urgent, [15:8] guaranteed, [23:16] burst (spec §6.6)
ID_VALUE      = 0x4B564642  # "KVFB"
VERSION_VALUE = 0x00000100  # 0.1

#: Per-tenant configuration registers at ``TENANT_BASE + TENANT_STRIDE * i + offset``:
#: offset -> ((field of :func:`hw.layouts.tenant_config_layout`, lsb in the word), ...).
TENANT_BASE   = 0x0100
TENANT_STRIDE = 0x20
TENANT_REGS = {
    0x00: (("rate", 0),),
    0x04: (("capacity", 0),),
    0x08: (("peak_rate", 0),),
    0x0C: (("inv_weight", 0),),
    0x10: (("priority", 0), ("enable", 8)),
    0x14: (("slo_cycles", 0),),
}
COMMIT = 0x18

#: Telemetry snapshot registers at ``TEL_TENANT_BASE + TEL_TENANT_STRIDE * i + offset``
#: (spec §9; implemented by :class:`hw.telemetry.Telemetry`).
TEL_TENANT_BASE   = 0x1000
TEL_TENANT_STRIDE = 0x20
TEL_TENANT_REGS = {
    "BYTES_LO":       0x00,
    "BYTES_HI":       0x04,
    "GRANTS":         0x08,
    "BURST_GRANTS":   0x0C,
    "SLO_VIOLATIONS": 0x10,
    "QUEUE_HWM":      0x14,
}
#: ``DROPPED`` of channel c at ``DROPPED_BASE + 4 * c``.
DROPPED_BASE = 0x1800


class FabricComponent(wiring.Component):
    """A component elaborated for one :class:`hw.params.FabricParams` (checked, read-only)."""
    def __init__(self, params, members):
        check_params(params)
        self._params = params
        super().__init__(members)

    @property
    def params(self):
        """Fabric parameters.

        Returns
        -------
        :class:`hw.params.FabricParams`
        """
        return self._params


def params_word(params):
    """Value of the ``PARAMS`` register: [7:0] N, [15:8] C, [23:16] D, [31:24] T."""
    return (params.tenants | params.channels << 8 | params.queue_depth << 16
            | params.tag_bits << 24)


def _write_lanes(m, field, lsb, bus):
    """Write the bits of ``field`` (at bit ``lsb`` of its register) that lie in
    byte lanes whose strobe is set; the others keep their value (spec §9).

    One clock enable per byte lane instead of a multiplexer per bit.
    """
    width = len(Value.cast(field))
    for lane in range(len(bus.w_strb)):
        lo, hi = max(lsb, 8 * lane), min(lsb + width, 8 * lane + 8)
        if lo >= hi:
            continue
        with m.If(bus.w_strb[lane]):
            m.d.sync += field[lo - lsb:hi - lsb].eq(bus.w_data[lo:hi])


def _byte_mask(strb):
    return Cat(strb[b].replicate(8) for b in range(len(strb)))


class RegisterFile(FabricComponent):
    """Configuration registers of spec §9 (everything but telemetry).

    Parameters
    ----------
    params : :class:`hw.params.FabricParams`
        Fabric parameters; ``PARAMS`` reports them and ``tenants`` sets the
        number of per-tenant register blocks.

    Members
    -------
    bus : ``In(RegisterBusSignature(addr_width=16, data_width=32))``
        Register bus from :class:`hw.axil.AXI4LiteSlave`. ``r_data`` is 0 for
        addresses this block does not decode (telemetry's are ORed in by the top).
    cfg_tenant : ``Out(tenant_config_layout(params)).array(tenants)``
        Active per-tenant configuration, shared by every channel.
    cfg_fcfs_bypass : ``Out(1)``
        ``CTRL[0]``.
    cfg_starve_limit : ``Out(23)``
        ``STARVE_LIMIT``.
    cfg_epoch_cycles : ``Out(32)``
        ``EPOCH_CYCLES``.
    cfg_credits : ``Out(8).array(3)``
        ``CREDITS``: the in-flight limits of the credit classes urgent,
        guaranteed, burst (spec §6.6); the channels read them in the cycle.
    cfg_snapshot : ``Out(1)``
        1 during the cycle after a ``CTRL`` write with bit 1 set takes effect.
    cfg_fcfs_bypass_next, cfg_starve_limit_next : ``Out(1)``, ``Out(23)``
        The values ``cfg_fcfs_bypass`` and ``cfg_starve_limit`` take at the next
        clock edge (the registers' inputs).
    cfg_priority_next : ``Out(2).array(tenants)``
        The value each tenant's active ``priority`` takes at the next edge. The
        channels precompute next cycle's selection keys (spec §11) and need the
        configuration they will be compared under.

    The outputs are the registers themselves, and Amaranth names a register
    that drives an output after the port; hence the ``cfg_`` prefix on the
    ports, which the state-budget script needs to classify these flip-flops.

    Raises
    ------
    :exc:`TypeError`
        If ``params`` is not a :class:`hw.params.FabricParams`.
    """
    def __init__(self, params):
        check_params(params)
        super().__init__(params, {
            "bus":          In(RegisterBusSignature(addr_width=ADDR_WIDTH, data_width=DATA_WIDTH)),
            "cfg_tenant":       Out(tenant_config_layout(params)).array(params.tenants),
            "cfg_fcfs_bypass":  Out(1),
            "cfg_starve_limit": Out(params.starve_bits),
            "cfg_epoch_cycles": Out(params.epoch_bits),
            "cfg_credits":      Out(CREDIT_BITS).array(CREDIT_CLASSES),
            "cfg_snapshot":     Out(1),
            "cfg_fcfs_bypass_next":  Out(1),
            "cfg_starve_limit_next": Out(params.starve_bits),
            "cfg_priority_next":     Out(params.priority_bits).array(params.tenants),
        })

    def elaborate(self, platform):
        m = Module()
        p, bus = self.params, self.bus
        layout = tenant_config_layout(p)

        # Decode stage (spec §9): a write on the register bus in cycle t is
        # decoded and registered; it takes effect in t+1. The channels read
        # the next configuration (cfg_*_next) from these registers, so no
        # address decode lies on their paths.
        wr_ctrl = Signal(name="cfg_wr_ctrl")
        wr_epoch = Signal(name="cfg_wr_epoch")
        wr_starve = Signal(name="cfg_wr_starve")
        wr_credits = Signal(name="cfg_wr_credits")
        wr_commit = Signal(p.tenants, name="cfg_wr_commit")
        wr_data = Signal(DATA_WIDTH, name="cfg_wr_data")
        wr_strb = Signal(len(bus.w_strb), name="cfg_wr_strb")
        m.d.sync += [
            wr_ctrl.eq(bus.w_stb & (bus.w_addr == CTRL)),
            wr_epoch.eq(bus.w_stb & (bus.w_addr == EPOCH_CYCLES)),
            wr_starve.eq(bus.w_stb & (bus.w_addr == STARVE_LIMIT)),
            wr_credits.eq(bus.w_stb & (bus.w_addr == CREDITS)),
            wr_commit.eq(Cat(bus.w_stb & (bus.w_addr == TENANT_BASE + TENANT_STRIDE * i + COMMIT)
                             for i in range(p.tenants))),
            wr_data.eq(bus.w_data),
            wr_strb.eq(bus.w_strb),
        ]
        w_mask = _byte_mask(wr_strb)

        def merged(old):
            # The word the decoded write leaves in a register whose value is `old`.
            return (old & ~w_mask) | (wr_data & w_mask)

        def word(value, fields):
            # A register's 32-bit read value, from the fields it holds.
            out = Const(0, DATA_WIDTH)
            for name, lsb in fields:
                out = out | (Value.cast(getattr(value, name)) << lsb)[:DATA_WIDTH]
            return out

        cfg_fcfs_bypass  = Signal(name="cfg_fcfs_bypass")
        cfg_starve_limit = Signal(p.starve_bits, name="cfg_starve_limit")
        cfg_epoch_cycles = Signal(p.epoch_bits, name="cfg_epoch_cycles")
        cfg_snapshot     = Signal(name="cfg_snapshot")
        cfg_credits      = Signal(CREDIT_BITS * CREDIT_CLASSES, name="cfg_credits")
        m.d.comb += [
            *(self.cfg_credits[k].eq(cfg_credits.word_select(k, CREDIT_BITS))
              for k in range(CREDIT_CLASSES)),
            self.cfg_fcfs_bypass.eq(cfg_fcfs_bypass),
            self.cfg_starve_limit.eq(cfg_starve_limit),
            self.cfg_epoch_cycles.eq(cfg_epoch_cycles),
            self.cfg_snapshot.eq(cfg_snapshot),
        ]

        staged = [Signal(layout, name=f"cfg_staged_{i}") for i in range(p.tenants)]
        active = [Signal(layout, name=f"cfg_active_{i}") for i in range(p.tenants)]
        for i in range(p.tenants):
            m.d.comb += self.cfg_tenant[i].eq(active[i])

        # Registers whose next value the channels read (see cfg_*_next) are
        # written through a combinational "next" signal.
        fcfs_next = self.cfg_fcfs_bypass_next
        starve_next = self.cfg_starve_limit_next
        prio_next = self.cfg_priority_next
        m.d.comb += [fcfs_next.eq(cfg_fcfs_bypass), starve_next.eq(cfg_starve_limit)]
        m.d.comb += [prio_next[i].eq(active[i].priority) for i in range(p.tenants)]
        m.d.sync += [cfg_fcfs_bypass.eq(fcfs_next), cfg_starve_limit.eq(starve_next)]

        # Writes that take effect (cycle t+1 of a bus write in t).
        new_ctrl = merged(cfg_fcfs_bypass)
        m.d.sync += cfg_snapshot.eq(wr_ctrl & new_ctrl[1] & wr_strb[0])
        with m.If(wr_ctrl):
            m.d.comb += fcfs_next.eq(new_ctrl[0])
        with m.If(wr_epoch):
            m.d.sync += cfg_epoch_cycles.eq(merged(cfg_epoch_cycles))
        with m.If(wr_credits):
            m.d.sync += cfg_credits.eq(merged(cfg_credits)[:len(cfg_credits)])
        with m.If(wr_starve):
            m.d.comb += starve_next.eq(merged(cfg_starve_limit)[:p.starve_bits])
        for i in range(p.tenants):
            with m.If(wr_commit[i]):
                m.d.sync += active[i].eq(staged[i])
                m.d.comb += prio_next[i].eq(staged[i].priority)

        # Staging registers are written in the bus cycle itself: they are
        # never visible, and the next write (and so any COMMIT that copies
        # them) comes at least two cycles later (hw.axil).
        with m.If(bus.w_stb):
            with m.Switch(bus.w_addr):
                for i in range(p.tenants):
                    base = TENANT_BASE + TENANT_STRIDE * i
                    for offset, fields in TENANT_REGS.items():
                        with m.Case(base + offset):
                            for name, lsb in fields:
                                field = getattr(staged[i], name)
                                _write_lanes(m, field, lsb, bus)

        # Reads (combinational in r_addr, which the AXI slave registers).
        with m.Switch(bus.r_addr):
            with m.Case(ID):
                m.d.comb += bus.r_data.eq(ID_VALUE)
            with m.Case(VERSION):
                m.d.comb += bus.r_data.eq(VERSION_VALUE)
            with m.Case(PARAMS):
                m.d.comb += bus.r_data.eq(params_word(p))
            with m.Case(CTRL):
                m.d.comb += bus.r_data.eq(cfg_fcfs_bypass)
            with m.Case(EPOCH_CYCLES):
                m.d.comb += bus.r_data.eq(cfg_epoch_cycles)
            with m.Case(STARVE_LIMIT):
                m.d.comb += bus.r_data.eq(cfg_starve_limit)
            with m.Case(CREDITS):
                m.d.comb += bus.r_data.eq(cfg_credits)
            for i in range(p.tenants):
                base = TENANT_BASE + TENANT_STRIDE * i
                for offset, fields in TENANT_REGS.items():
                    with m.Case(base + offset):
                        m.d.comb += bus.r_data.eq(word(active[i], fields))

        return m
