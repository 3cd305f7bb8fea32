"""Configuration register file (spec §5, §9).

Per-tenant registers are written into **staging** registers; a write of any
value to the tenant's ``COMMIT`` register copies all of that tenant's staged
fields into its **active** registers at once, so a channel never sees half of a
new contract.

Commit timing, exactly (spec §9): the register bus write strobe of a COMMIT
write is asserted in cycle h, the cycle of the write handshake (the later of
the AXI AW and W handshakes, see :mod:`hw.axil`). The register file decodes it
and registers the decoded write (``cfg_wr_*``, the staging registers' too): the
write *takes effect* in cycle t = h+1, when the active (or staging) registers are written, and every channel uses
the new values from cycle t+1. The same holds for ``CTRL.fcfs_bypass``,
``EPOCH_CYCLES`` and ``STARVE_LIMIT``, which are not staged (telemetry's
epoch rule reads ``cfg_epoch_cycles`` one cycle late, so from t+2, spec §10). A ``CTRL`` write
with bit 1 set taking effect in cycle t makes ``cfg_snapshot`` 1 during cycle
t+1, the cycle in which telemetry takes the snapshot (spec §10). The decode
stage keeps the address comparison off the channels' paths: their next
configuration (``cfg_*_next``) is a choice between registers.

Writes honour the AXI byte strobes: bytes whose strobe is 0 keep their old
(staged) value. ``COMMIT`` commits on any write, whatever its strobes; the
snapshot bit of ``CTRL`` is in byte 0 and needs that byte's strobe. Reads
return the active values (spec §9), never the staged ones; unmapped addresses,
including the registers of tenants ``>= N``, read 0 and ignore writes. The bus
carries word addresses (:class:`hw.axil.AXI4LiteSlave` clears the low bits of an
unaligned AXI address, which selects the word containing it).

The address decode is elaborated from the register description
(:data:`kvfabric.regmap.REGMAP`, compiled from ``kvfabric.rdl``): every
writable fabric field becomes a ``cfg_<field>`` register and port, every
``kvf_staged`` register of the ``TENANT`` block a set of staged and active
fields of :func:`hw.layouts.tenant_config_layout`, ``kvf_commit`` the commit
strobe, and constants and ``PARAMS`` read from the description. The timing
above is hand-written here and the same for every register. Registers in
:data:`PENDING` are described but not implemented yet (they read 0 and ignore
writes); telemetry's registers (snapshots and counters) are decoded by
:class:`hw.telemetry.Telemetry`.

Register names start with ``cfg_``: the state-budget script classifies
flip-flops by name.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axil import RegisterBusSignature
from .readpipe import pipelined_read
from .layouts import tenant_config_layout
from kvfabric.regmap import ADDR_WIDTH, DATA_WIDTH, REGMAP, params_word
from kvfabric.spec import CREDIT_CLASS_NAMES, check_params


__all__ = [
    "ADDR_WIDTH", "DATA_WIDTH", "PENDING", "EARLY_FIELDS",
    "is_telemetry_register", "register_file_registers", "fabric_fields",
    "params_word", "FabricComponent", "RegisterFile",
]

#: Registers of the description whose logic is not in the RTL yet: they read 0 and
#: ignore writes, like unmapped addresses. Register name -> why.
PENDING: dict[str, str] = {}

#: Fabric fields whose next value the channels read one cycle early (``cfg_<field>_next``,
#: spec §11: next cycle's selection keys and credit tests are precomputed under them);
#: ``coord_enable``'s for the coordinator's rate registers, which load the active
#: RATE/PEAK_RATE at the edge at which the coordinator is turned off (spec §13).
EARLY_FIELDS = ("fcfs_bypass", "starve_limit", *CREDIT_CLASS_NAMES, "bulk_prio", "arrival_prio", "coord_enable")

#: Fabric fields whose value two edges ahead the register file also gives
#: (``cfg_<field>_after_next``): the coordinator stages the rates its rate
#: registers load when it is turned off one cycle before they load them.
TWO_AHEAD_FIELDS = ("coord_enable",)

#: Early fields whose ``cfg_<field>_next_copy`` outputs are registers, loaded
#: at each edge with the value two edges ahead (the bus write of this cycle
#: merged into the next value), equal in every cycle to ``cfg_<field>_next``:
#: no decoded write strobe then lies in front of the channels' keys (issue
#: #42: ``cfg_wr_starve_limit -> key_order``, through every head's deadline
#: test, was a channel's longest path).
REGISTERED_NEXT_FIELDS = ("starve_limit",)

#: The early fields the channels read: with ``copies`` > 1 the register file
#: gives each channel its own ``cfg_<field>_next_copy[c]`` (issue #42).
CHANNEL_EARLY_FIELDS = tuple(f for f in EARLY_FIELDS if f != "coord_enable")


def is_telemetry_register(reg):
    """Snapshots and counters: decoded by :class:`hw.telemetry.Telemetry`."""
    return reg.snapshot or any(f.counter for f in reg.fields)


def register_file_registers(params=None):
    """``(address, block, index, register)`` the register file decodes."""
    return [entry for entry in REGMAP.registers(params)
            if not is_telemetry_register(entry[3]) and entry[3].name not in PENDING]


def fabric_fields():
    """``(register, field)`` of the fabric's software-writable fields (``cfg_<field>``)."""
    return [(reg, f) for reg in REGMAP.block("FABRIC").registers
            if reg.name not in PENDING and not is_telemetry_register(reg)
            for f in reg.fields if f.writable]


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


def _write_lanes(m, field, lsb, data, strb):
    """Write the bits of ``field`` (at bit ``lsb`` of its register) that lie in
    byte lanes whose strobe is set; the others keep their value (spec §9).

    One clock enable per byte lane instead of a multiplexer per bit.
    """
    width = len(Value.cast(field))
    for lane in range(len(strb)):
        lo, hi = max(lsb, 8 * lane), min(lsb + width, 8 * lane + 8)
        if lo >= hi:
            continue
        with m.If(strb[lane]):
            m.d.sync += field[lo - lsb:hi - lsb].eq(data[lo:hi])


def _byte_mask(strb):
    return Cat(strb[b].replicate(8) for b in range(len(strb)))


def _merge(old, data, strb):
    """The word a write of ``data`` with byte strobes ``strb`` leaves in a
    register whose value is ``old``."""
    mask = _byte_mask(strb)
    return (old & ~mask) | (data & mask)


def _word(values, reg):
    """A register's 32-bit word from the values of its readable fields (by name)."""
    out = Const(0, DATA_WIDTH)
    for f in reg.fields:
        if f.readable:
            out = out | (Value.cast(values[f.name]) << f.lsb)[:DATA_WIDTH]
    return out


class RegisterFile(FabricComponent):
    """Configuration registers of spec §9 (everything but telemetry), decoded from
    :data:`kvfabric.regmap.REGMAP`.

    Parameters
    ----------
    params : :class:`hw.params.FabricParams`
        Fabric parameters; ``PARAMS`` reports them and ``tenants`` sets the
        number of per-tenant register blocks.

    Members
    -------
    bus : ``In(RegisterBusSignature(addr_width=16, data_width=32))``
        Register bus from :class:`hw.axil.AXI4LiteSlave`. ``r_data`` follows
        ``r_addr`` by one cycle (the word with the values of ``r_addr``'s cycle,
        :mod:`hw.readpipe`) and is 0 for addresses this block does not decode
        (telemetry's are ORed in by the top).
    cfg_tenant : ``Out(tenant_config_layout(params)).array(tenants)``
        Active per-tenant configuration, shared by every channel.
    cfg_<field> : ``Out(width)`` for each writable fabric field of the description
        ``cfg_fcfs_bypass`` (``CTRL[0]``), ``cfg_epoch_cycles``, ``cfg_starve_limit``;
        ``cfg_snapshot`` (``CTRL[1]``, a single pulse) is 1 during the cycle after a
        ``CTRL`` write with bit 1 set takes effect.
    cfg_fcfs_bypass_next, cfg_starve_limit_next : ``Out(1)``, ``Out(23)``
        The values ``cfg_fcfs_bypass`` and ``cfg_starve_limit`` take at the next
        clock edge (the registers' inputs; :data:`EARLY_FIELDS`).
    cfg_priority_next : ``Out(2).array(tenants)``
        The value each tenant's active ``priority`` takes at the next edge. The
        channels precompute next cycle's selection keys (spec §11) and need the
        configuration they will be compared under.
    cfg_guaranteed_next : ``Out(tenants)``
        Bit i: tenant i's active ``rate`` is not 0 at the next edge, for the
        same reason: a head of a tenant whose rate is 0 never conforms (spec
        §6.2).
    cfg_coord_enable_after_next : ``Out(1)``
        The value ``cfg_coord_enable`` has after the next two edges (a write on
        the bus in this cycle included).
    cfg_rate_after_next, cfg_peak_rate_after_next : ``Out(16).array(tenants)``
        The values each tenant's active ``rate`` and ``peak_rate`` have after
        the next two edges (a COMMIT written on the bus in this cycle
        included): the coordinator stages them one cycle before its
        per-channel rate registers load them, so that each of those registers
        has one source (spec §13; :mod:`hw.coordinator`).
    cfg_commit : ``Out(tenants)``
        Bit i: a ``COMMIT`` of tenant i takes effect in this cycle (the
        decoded write register, ``cfg_wr_commit``).
    cfg_commit_next : ``Out(tenants)``
        ``cfg_commit`` of the next cycle: a ``COMMIT`` written on the bus in this
        cycle.
    cfg_<field>_next_copy, cfg_priority_next_copy, cfg_guaranteed_next_copy : ``.array(copies)``
        For each of :data:`CHANNEL_EARLY_FIELDS`, ``priority_next`` and
        ``guaranteed_next``: ``copies`` outputs equal in every cycle to
        ``cfg_<field>_next`` (one per channel). Copy 0 is that output; copy
        k >= 1 is the same multiplexer behind its own copy of the decoded
        write strobe (``cfg_wr_<register>_copy<k>``, ``cfg_wr_commit_copy<k>``,
        loaded at the same edge from the same value, kept from merging), so
        a strobe drives one channel's selection keys, not all C (issue #42:
        ``cfg_wr_starve_limit`` drove 1,536 endpoints of the 8 x 8 top
        through a buffer tree). The copies of :data:`REGISTERED_NEXT_FIELDS`
        are registers instead, one per copy, each loaded with the value two
        edges ahead (the same value in every cycle), so no strobe at all lies
        in front of the keys.

    The two-ahead outputs rely on the bus's write spacing (:mod:`hw.axil`: a
    write at least two cycles after the previous one), so that a COMMIT on the
    bus copies staging registers that already hold their values.

    The outputs are the registers themselves, and Amaranth names a register
    that drives an output after the port; hence the ``cfg_`` prefix on the
    ports, which the state-budget script needs to classify these flip-flops.

    Raises
    ------
    :exc:`TypeError`
        If ``params`` is not a :class:`hw.params.FabricParams`.
    """
    def __init__(self, params, *, copies=1):
        check_params(params)
        self._copies = copies
        members = {
            "bus":          In(RegisterBusSignature(addr_width=ADDR_WIDTH, data_width=DATA_WIDTH)),
            "cfg_tenant":   Out(tenant_config_layout(params)).array(params.tenants),
        }
        for _, f in fabric_fields():
            members[f"cfg_{f.name}"] = Out(f.width)
        for name in EARLY_FIELDS:
            members[f"cfg_{name}_next"] = Out(members[f"cfg_{name}"].shape)
        members["cfg_priority_next"] = Out(params.priority_bits).array(params.tenants)
        members["cfg_guaranteed_next"] = Out(params.tenants)
        for name in TWO_AHEAD_FIELDS:
            members[f"cfg_{name}_after_next"] = Out(members[f"cfg_{name}"].shape)
        members["cfg_rate_after_next"] = Out(params.rate_bits).array(params.tenants)
        members["cfg_peak_rate_after_next"] = Out(params.peak_rate_bits).array(params.tenants)
        members["cfg_commit"] = Out(params.tenants)
        members["cfg_commit_next"] = Out(params.tenants)
        for name in CHANNEL_EARLY_FIELDS:
            members[f"cfg_{name}_next_copy"] = Out(members[f"cfg_{name}"].shape).array(copies)
        members["cfg_priority_next_copy"] = Out(params.priority_bits).array(copies, params.tenants)
        members["cfg_guaranteed_next_copy"] = Out(params.tenants).array(copies)
        super().__init__(params, members)

    def elaborate(self, platform):
        m = Module()
        p, bus = self.params, self.bus
        layout = tenant_config_layout(p)
        tenant = REGMAP.block("TENANT")
        commit = [r for r in tenant.registers if r.commit]
        staged_regs = [r for r in tenant.registers if r.staged]
        fabric_regs = sorted({reg.name: reg for reg, _ in fabric_fields()}.values(),
                             key=lambda reg: reg.offset)

        # Decode stage (spec §9): a write on the register bus in cycle t is
        # decoded and registered; it takes effect in t+1. The channels read
        # the next configuration (cfg_*_next) from these registers, so no
        # address decode lies on their paths.
        early_regs = [reg.name for reg in fabric_regs if any(f.name in CHANNEL_EARLY_FIELDS for f in reg.fields)]
        wr_fabric = {reg.name: Signal(name=f"cfg_wr_{reg.name.lower()}") for reg in fabric_regs}
        wr_commit = Signal(p.tenants, name="cfg_wr_commit")
        wr_data = Signal(DATA_WIDTH, name="cfg_wr_data")
        wr_strb = Signal(len(bus.w_strb), name="cfg_wr_strb")
        # A write to each fabric register on the bus in this cycle.
        bus_hit = {reg.name: bus.w_stb & (bus.w_addr == reg.offset) for reg in fabric_regs}
        m.d.sync += [wr_fabric[name].eq(hit) for name, hit in bus_hit.items()]
        commit_addrs = [[tenant.base + tenant.stride * i + r.offset for r in commit] for i in range(p.tenants)]
        m.d.comb += self.cfg_commit_next.eq(
            Cat(bus.w_stb & Cat(bus.w_addr == a for a in addrs).any() for addrs in commit_addrs))
        # Copy k of each strobe (copy 0: the strobe itself), loaded from the
        # same value. Yosys's opt_merge merges flip-flops whose inputs are the
        # same net (a `keep` on the signal does not reach the flip-flop
        # cell), so copy k's input is the strobe ANDed with address bits on
        # which the strobe's addresses agree, each at its value there (the
        # b-th such bit where k has bit b set: a set of its own for every
        # k >= 1): a term the strobe implies (the same value), which ABC
        # removes again. Bits above the byte lanes: hw.axil clears those below.
        def implied(hit, addrs, k):
            lanes = (DATA_WIDTH // 8 - 1).bit_length()
            agree = [j for j in range(lanes, len(bus.w_addr)) if len({(a >> j) & 1 for a in addrs}) == 1]
            assert k < 1 << len(agree), "more copies than sets of address bits"
            term = hit
            for b, j in enumerate(agree):
                if (k >> b) & 1:
                    term = term & (bus.w_addr[j] if (addrs[0] >> j) & 1 else ~bus.w_addr[j])
            return term
        wr_copies = [wr_fabric] + [
            {name: Signal(name=f"cfg_wr_{name.lower()}_copy{k}") for name in early_regs}
            for k in range(1, self._copies)]
        offsets = {reg.name: reg.offset for reg in fabric_regs}
        for k in range(1, self._copies):
            m.d.sync += [wr_copies[k][name].eq(implied(bus_hit[name], [offsets[name]], k)) for name in early_regs]
        m.d.sync += [
            wr_commit.eq(self.cfg_commit_next),
            wr_data.eq(bus.w_data),
            wr_strb.eq(bus.w_strb),
        ]
        def merged(old):
            # The word the decoded write leaves in a register whose value is `old`.
            return _merge(old, wr_data, wr_strb)

        # Fabric registers: cfg_<field>, written through a combinational
        # "next" signal (what the channels read for EARLY_FIELDS).
        cfg = {}
        for reg in fabric_regs:
            for f in reg.fields:
                if f.writable:
                    cfg[f.name] = Signal(f.width, name=f"cfg_{f.name}")
                    m.d.comb += getattr(self, f"cfg_{f.name}").eq(cfg[f.name])
        for reg in fabric_regs:
            new_word = merged(_word(cfg, reg))
            for f in reg.fields:
                if f.pulse:
                    # 1 during the cycle after the write that sets it takes effect.
                    m.d.sync += cfg[f.name].eq(wr_fabric[reg.name] & new_word[f.lsb:f.msb + 1].any())
                elif f.writable:
                    nxt = (getattr(self, f"cfg_{f.name}_next") if f.name in EARLY_FIELDS
                           else Signal(f.width, name=f"cfg_{f.name}_next"))
                    m.d.comb += nxt.eq(cfg[f.name])
                    with m.If(wr_fabric[reg.name]):
                        m.d.comb += nxt.eq(new_word[f.lsb:f.msb + 1])
                    m.d.sync += cfg[f.name].eq(nxt)
                    if f.name in REGISTERED_NEXT_FIELDS:
                        # cfg_<field>_next at t+1 is the value at t+2: the bus
                        # write of t, decoded at this edge, merged into nxt.
                        outs = getattr(self, f"cfg_{f.name}_next_copy")
                        bus_field = _merge(nxt << f.lsb, bus.w_data, bus.w_strb)[f.lsb:f.msb + 1]
                        for k in range(self._copies):
                            # Copy k's own select (an implied term, as the
                            # strobes' copies), so the copies are not merged.
                            hit = implied(bus_hit[reg.name], [offsets[reg.name]], k)
                            ahead = Signal(f.width, name=f"cfg_{f.name}_next_q{k}", init=cfg[f.name].init)
                            m.d.sync += ahead.eq(Mux(hit, bus_field, nxt))
                            m.d.comb += outs[k].eq(ahead)
                    elif f.name in CHANNEL_EARLY_FIELDS:
                        outs = getattr(self, f"cfg_{f.name}_next_copy")
                        m.d.comb += outs[0].eq(nxt)
                        for k in range(1, self._copies):
                            m.d.comb += outs[k].eq(Mux(wr_copies[k][reg.name], new_word[f.lsb:f.msb + 1],
                                                         cfg[f.name]))
                    if f.name in TWO_AHEAD_FIELDS:
                        # A write on the bus now is decoded at this edge and
                        # merged into `nxt`'s value at the next.
                        bus_word = _merge(nxt << f.lsb, bus.w_data, bus.w_strb)
                        after = getattr(self, f"cfg_{f.name}_after_next")
                        m.d.comb += after.eq(Mux(bus_hit[reg.name], bus_word[f.lsb:f.msb + 1], nxt))

        # Per-tenant configuration: staged and active copies of every field.
        staged = [Signal(layout, name=f"cfg_staged_{i}") for i in range(p.tenants)]
        active = [Signal(layout, name=f"cfg_active_{i}") for i in range(p.tenants)]
        prio_next = self.cfg_priority_next
        m.d.comb += self.cfg_commit.eq(wr_commit)
        for i in range(p.tenants):
            m.d.comb += self.cfg_tenant[i].eq(active[i])
            m.d.comb += prio_next[i].eq(active[i].priority)
            m.d.comb += self.cfg_guaranteed_next[i].eq(active[i].rate != 0)
            with m.If(wr_commit[i]):
                m.d.sync += active[i].eq(staged[i])
                m.d.comb += prio_next[i].eq(staged[i].priority)
                m.d.comb += self.cfg_guaranteed_next[i].eq(staged[i].rate != 0)
            # A COMMIT taking effect now or next cycle leaves the staged values
            # active after two edges (no staging write comes between, hw.axil).
            copies = self.cfg_commit_next[i] | wr_commit[i]
            m.d.comb += [
                self.cfg_rate_after_next[i].eq(Mux(copies, staged[i].rate, active[i].rate)),
                self.cfg_peak_rate_after_next[i].eq(Mux(copies, staged[i].peak_rate, active[i].peak_rate)),
            ]

        # The channels' copies (see cfg_wr_commit_copy<k> above); copy 0 is
        # the output itself, as for the early fields.
        m.d.comb += [self.cfg_priority_next_copy[0][i].eq(prio_next[i]) for i in range(p.tenants)]
        m.d.comb += self.cfg_guaranteed_next_copy[0].eq(self.cfg_guaranteed_next)
        for k in range(1, self._copies):
            commit_copy = Signal(p.tenants, name=f"cfg_wr_commit_copy{k}")
            m.d.sync += commit_copy.eq(Cat(implied(self.cfg_commit_next[i], commit_addrs[i], k)
                                           for i in range(p.tenants)))
            for i in range(p.tenants):
                m.d.comb += [
                    self.cfg_priority_next_copy[k][i].eq(
                        Mux(commit_copy[i], staged[i].priority, active[i].priority)),
                    self.cfg_guaranteed_next_copy[k][i].eq(
                        Mux(commit_copy[i], staged[i].rate != 0, active[i].rate != 0)),
                ]

        # Staging registers are written from the decode stage too, in cycle
        # h+1 like every other write: they are never visible, and the next
        # write (and so any COMMIT that copies them, in its own h'+1 >= h+3)
        # comes at least two cycles later (hw.axil).
        for i in range(p.tenants):
            for reg in staged_regs:
                wr = Signal(name=f"cfg_wr_staged_{i}_{reg.name.lower()}")
                m.d.sync += wr.eq(bus.w_stb & (bus.w_addr == tenant.address(reg.name, i)))
                with m.If(wr):
                    for f in reg.fields:
                        _write_lanes(m, getattr(staged[i], f.name), f.lsb, wr_data, wr_strb)

        # Reads (spec §9): r_data in cycle s+1 is the word at r_addr of cycle s,
        # with the values of cycle s (hw.readpipe: two levels, one register
        # between them). Constants, parameters, fabric registers and active
        # tenant values; the staged ones are never read.
        entries = []
        for addr, block, i, reg in register_file_registers(p):
            if not any(f.readable for f in reg.fields):
                continue  # write-only (COMMIT): reads 0
            if block.name == "TENANT":
                word = _word({f.name: getattr(active[i], f.name) for f in reg.fields}, reg)
            elif all(f.param or (f.hw == "na" and f.reset is not None)
                     for f in reg.fields if f.readable):
                # A constant (ID, VERSION, PARAMS): no read register, only its select.
                word = reg.word({f.name: getattr(p, f.name) if f.param else f.reset
                                 for f in reg.fields if f.readable})
            else:
                values = {}
                for f in reg.fields:
                    if f.param:
                        values[f.name] = Const(getattr(p, f.name), f.width)
                    elif f.hw == "na" and f.reset is not None:
                        values[f.name] = Const(f.reset, f.width)
                    elif f.readable:
                        values[f.name] = cfg[f.name]
                word = _word(values, reg)
            entries.append((addr, block, i, reg, word))
        m.d.comb += bus.r_data.eq(pipelined_read(m, bus.r_addr, entries, name="cfg_rd"))

        return m
