# amaranth: UnusedElaboratable=no
"""Fabric top level: AXI4-Lite slave, register file, telemetry and KvFabric (Amaranth simulator).

Expected values come from the spec, never from the RTL: the register map is
transcribed from spec §9 below, a small mirror applies what §9 says a write
does, and the golden model (:mod:`model.fabric`, :mod:`model.telemetry`)
supplies arbitration and telemetry. Every test prints its seed
(``KVFABRIC_SEED`` overrides it).
"""

import gc
import random
import warnings
from collections import deque
from dataclasses import dataclass, field, replace

import pytest
from amaranth import *
from amaranth.hdl import UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from kvfabric.hw.axil import AXI4LiteSignature, AXI4LiteSlave, RegisterBusSignature
from kvfabric.hw.config import RegisterFile
from kvfabric.hw.layouts import Kind, tenant_config_layout
from kvfabric.spec import FabricParams
from kvfabric.hw.telemetry import Telemetry
from kvfabric.hw.top import KvFabric
from kvfabric.model.channel import BURST, FCFS, GUARANTEED, Grant, Request
from kvfabric.model.fabric import FabricModel
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.model.telemetry import Telemetry as TelemetryModel


# --- register map, transcribed from spec §9 -------------------------------------------

ID, VERSION, PARAMS, CTRL = 0x0000, 0x0004, 0x0008, 0x000C
EPOCH_CYCLES, STARVE_LIMIT, EPOCH_COUNT, CREDITS = 0x0010, 0x0014, 0x0018, 0x001C
ID_VALUE, VERSION_VALUE = 0x4B564642, 0x00000100
TENANT_FIELDS = {  # offset -> ((field, lsb, width), ...)
    0x00: (("rate", 0, 16),),
    0x04: (("capacity", 0, 28),),
    0x08: (("peak_rate", 0, 16),),
    0x0C: (("inv_weight", 0, 16),),
    0x10: (("priority", 0, 2), ("enable", 8, 1)),
    0x14: (("slo_cycles", 0, 24),),
}
COMMIT = 0x18
TEL_OFFSETS = {"bytes_lo": 0x00, "bytes_hi": 0x04, "grants": 0x08, "burst_grants": 0x0C,
               "slo_violations": 0x10, "queue_hwm": 0x14}


def tenant_reg(i, offset):
    return 0x0100 + 0x20 * i + offset


def tel_reg(i, name):
    return 0x1000 + 0x20 * i + TEL_OFFSETS[name]


def dropped_reg(c):
    return 0x1800 + 4 * c


def bytemask(strb):
    return sum(0xFF << 8 * b for b in range(4) if strb >> b & 1)


def credits_word(credits):
    return credits[0] | credits[1] << 8 | credits[2] << 16


def fields_word(cfg, offset):
    return sum(getattr(cfg, name) << lsb for name, lsb, _ in TENANT_FIELDS[offset])


class Mirror:
    """What a register write does (spec §9), on a :class:`FabricConfig`.

    :meth:`write` is applied for the cycle t of the write handshake: the
    returned configuration is the active one from t+1, and a ``CTRL`` write
    with bit 1 requests the snapshot that happens in t+1 (spec §10).
    """

    def __init__(self, params):
        self.params = params
        self.config = FabricConfig.reset(params.tenants)
        self.staged = [TenantConfig() for _ in range(params.tenants)]

    def write(self, addr, data, strb=0xF):
        mask, cfg = bytemask(strb), self.config
        merge = lambda old: (old & ~mask) | (data & mask)
        snapshot = False
        if addr == CTRL:
            self.config = replace(cfg, fcfs_bypass=merge(cfg.fcfs_bypass) & 1)
            snapshot = bool(data & mask & 2)
        elif addr == EPOCH_CYCLES:
            self.config = replace(cfg, epoch_cycles=merge(cfg.epoch_cycles) & 0xFFFF_FFFF)
        elif addr == STARVE_LIMIT:
            self.config = replace(cfg, starve_limit=merge(cfg.starve_limit) & 0x7F_FFFF)
        elif addr == CREDITS:  # [7:0] urgent, [15:8] guaranteed, [23:16] burst
            word = merge(credits_word(cfg.credits))
            self.config = replace(cfg, credits=tuple(word >> 8 * k & 0xFF for k in range(3)))
        elif 0x0100 <= addr < tenant_reg(self.params.tenants, 0):
            i, offset = divmod(addr - 0x0100, 0x20)
            if offset == COMMIT:
                self.config = cfg.with_tenant(i, **vars(self.staged[i]))
            elif offset in TENANT_FIELDS:
                word = merge(fields_word(self.staged[i], offset))
                self.staged[i] = replace(self.staged[i], **{
                    name: word >> lsb & ((1 << width) - 1)
                    for name, lsb, width in TENANT_FIELDS[offset]})
        return snapshot

    def read(self, addr, telemetry):
        """Expected read data: active configuration, ``telemetry`` (a model) snapshots."""
        p, cfg = self.params, self.config
        fixed = {ID: ID_VALUE, VERSION: VERSION_VALUE,
                 PARAMS: p.tenants | p.channels << 8 | p.queue_depth << 16 | p.tag_bits << 24,
                 CTRL: cfg.fcfs_bypass, EPOCH_CYCLES: cfg.epoch_cycles,
                 STARVE_LIMIT: cfg.starve_limit, CREDITS: credits_word(cfg.credits)}
        if addr in fixed:
            return fixed[addr]
        for i in range(p.tenants):
            for offset in TENANT_FIELDS:
                if addr == tenant_reg(i, offset):
                    return fields_word(cfg.tenants[i], offset)
        return telemetry_read(p, addr, telemetry)


def telemetry_addresses(params):
    return ([EPOCH_COUNT] + [dropped_reg(c) for c in range(params.channels)]
            + [tel_reg(i, name) for i in range(params.tenants) for name in TEL_OFFSETS])


def telemetry_read(params, addr, telemetry):
    """Expected read data of a telemetry register (spec §9) from a model; 0 if not one."""
    if addr == EPOCH_COUNT:
        return telemetry.epoch_count
    snapshot = telemetry.snapshot
    for i, snap in enumerate(snapshot.tenants):
        values = {"bytes_lo": snap.bytes & 0xFFFF_FFFF, "bytes_hi": snap.bytes >> 32,
                  "grants": snap.grants, "burst_grants": snap.burst_grants,
                  "slo_violations": snap.slo_violations, "queue_hwm": snap.queue_hwm}
        for name, value in values.items():
            if addr == tel_reg(i, name):
                return value
    for c, dropped in enumerate(snapshot.dropped):
        if addr == dropped_reg(c):
            return dropped
    return 0


def random_tenant(rng, params):
    lmax = params.max_request_bytes
    return TenantConfig(
        rate=rng.choice([0, rng.randrange(1, 64), rng.randrange(1 << 16)]),
        capacity=rng.choice([0, rng.randrange(lmax << 4), rng.randrange(1 << 28)]),
        peak_rate=rng.choice([0, rng.randrange(1, 256), 0xFFFF]),
        inv_weight=rng.choice([256, rng.randrange(1 << 16)]),
        priority=rng.randrange(4),
        enable=int(rng.random() < 0.85),
        slo_cycles=rng.choice([0, rng.randrange(1, 40), rng.randrange(1 << 24)]),
    )


# --- a cycle-by-cycle AXI4-Lite manager for the Amaranth simulator ---------------------

@dataclass
class _Write:
    addr: int
    data: int
    strb: int
    aw_delay: int
    w_delay: int
    start: int = None
    aw_at: int = None
    w_at: int = None
    done_at: int = None  # cycle of the later of the two handshakes


@dataclass
class _Read:
    addr: int
    ar_at: int = None
    data: int = None
    expected: int = None


class AxilManager:
    """Drives an AXI4-Lite slave port one cycle at a time, one write and one read in flight.

    Each cycle the test calls :meth:`drive` (sets this cycle's inputs), then
    :meth:`sample` (after the simulator settles; sees the handshakes of the
    cycle), then ticks. ``rng`` randomizes ``BREADY``/``RREADY``
    backpressure; each write may delay AW or W by some cycles, so the slave
    sees AW first, W first, or both together.
    """

    def __init__(self, port, rng, p_ready=1.0):
        self.port, self.rng, self.p_ready = port, rng, p_ready
        self.writes, self.reads = deque(), deque()
        self.w = self.r = None
        self.completed_reads = []

    def write(self, addr, data, strb=0xF, aw_delay=0, w_delay=0):
        self.writes.append(_Write(addr, data, strb, aw_delay, w_delay))

    def read(self, addr):
        self.reads.append(_Read(addr))

    def idle(self):
        return not (self.writes or self.reads or self.w or self.r)

    def drive(self, ctx, cycle):
        port = self.port
        if self.w is None and self.writes:
            self.w = self.writes.popleft()
            self.w.start = cycle
        w = self.w
        aw_valid = w is not None and w.aw_at is None and cycle >= w.start + w.aw_delay
        w_valid = w is not None and w.w_at is None and cycle >= w.start + w.w_delay
        ctx.set(port.awvalid, aw_valid)
        ctx.set(port.awaddr, w.addr if aw_valid else 0)
        ctx.set(port.wvalid, w_valid)
        ctx.set(port.wdata, w.data if w_valid else 0)
        ctx.set(port.wstrb, w.strb if w_valid else 0)
        ctx.set(port.bready, self.rng.random() < self.p_ready)
        if self.r is None and self.reads:
            self.r = self.reads.popleft()
        ar_valid = self.r is not None and self.r.ar_at is None
        ctx.set(port.arvalid, ar_valid)
        ctx.set(port.araddr, self.r.addr if ar_valid else 0)
        ctx.set(port.rready, self.rng.random() < self.p_ready)

    def sample(self, ctx, cycle):
        """Handshakes of this cycle; returns the write performed in it, if any."""
        port, w, r = self.port, self.w, self.r
        performed = None
        if w is not None:
            if ctx.get(port.awvalid) and ctx.get(port.awready):
                w.aw_at = cycle
            if ctx.get(port.wvalid) and ctx.get(port.wready):
                w.w_at = cycle
            if w.done_at is None and w.aw_at is not None and w.w_at is not None:
                w.done_at = cycle
                performed = w
            if ctx.get(port.bvalid):
                assert w.done_at is not None and w.done_at < cycle, f"cycle {cycle}: early BVALID"
                assert ctx.get(port.bresp) == 0
                if ctx.get(port.bready):
                    self.w = None
        else:
            assert not ctx.get(port.bvalid), f"cycle {cycle}: BVALID without a write"
        if r is not None:
            if ctx.get(port.arvalid) and ctx.get(port.arready):
                r.ar_at = cycle
            if ctx.get(port.rvalid):
                assert r.ar_at is not None and r.ar_at < cycle, f"cycle {cycle}: early RVALID"
                assert ctx.get(port.rresp) == 0
                if ctx.get(port.rready):
                    r.data = ctx.get(port.rdata)
                    self.completed_reads.append(r)
                    self.r = None
        else:
            assert not ctx.get(port.rvalid), f"cycle {cycle}: RVALID without a read"
        return performed

    def sampling_read(self, cycle):
        """The read whose data the slave samples at the end of ``cycle`` (spec of hw.axil)."""
        r = self.r
        return r if r is not None and r.ar_at == cycle - 1 else None


def run_sim(dut, testbench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


def seeded(seed, salt):
    return random.Random(seed * 1000003 + salt)


# --- parameter checks -------------------------------------------------------------------

class TestInitWrong:
    def test_init_wrong_addr_width(self):
        with pytest.raises(TypeError,
                           match=r"^Address width must be an integer between 1 and 32, not 0$"):
            AXI4LiteSlave(addr_width=0)
        with pytest.raises(TypeError,
                           match=r"^Address width must be an integer between 1 and 32, not '16'$"):
            AXI4LiteSignature(addr_width="16", data_width=32)
        with pytest.raises(TypeError,
                           match=r"^Address width must be an integer between 1 and 32, not 33$"):
            RegisterBusSignature(addr_width=33, data_width=32)

    def test_init_wrong_data_width(self):
        with pytest.raises(TypeError, match=r"^Data width must be 32 or 64, not 16$"):
            AXI4LiteSlave(data_width=16)
        with pytest.raises(TypeError, match=r"^Data width must be 32 or 64, not 32.0$"):
            AXI4LiteSignature(addr_width=16, data_width=32.0)
        with pytest.raises(TypeError, match=r"^Data width must be 32 or 64, not 8$"):
            RegisterBusSignature(addr_width=16, data_width=8)

    @pytest.mark.parametrize("cls", [RegisterFile, Telemetry, KvFabric])
    def test_init_wrong_params(self, cls):
        # The half-built component would warn about never being elaborated.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnusedElaboratable)
            for value in (8, None):
                with pytest.raises(TypeError, match=rf"^params must be a FabricParams, not {value}$"):
                    cls(value)
            gc.collect()


def test_signatures():
    sig = AXI4LiteSignature(addr_width=16, data_width=32)
    assert sig == AXI4LiteSignature(addr_width=16, data_width=32)
    assert sig != AXI4LiteSignature(addr_width=12, data_width=32)
    assert repr(sig) == "AXI4LiteSignature(addr_width=16, data_width=32)"
    assert Shape.cast(sig.members["wstrb"].shape) == unsigned(4)
    assert sig.members["awready"].flow == In
    bus = RegisterBusSignature(addr_width=16, data_width=64)
    assert Shape.cast(bus.members["w_strb"].shape) == unsigned(8)
    assert bus.members["r_data"].flow == In
    slave = AXI4LiteSlave()
    slave._MustUse__silence = True
    assert (slave.addr_width, slave.data_width) == (16, 32)
    assert slave.axil.signature.flip() == AXI4LiteSignature(addr_width=16, data_width=32)


# --- register file behind the AXI slave -------------------------------------------------

class _ConfigHarness(wiring.Component):
    """AXI4LiteSlave + RegisterFile, with the register file's outputs visible."""

    def __init__(self, params):
        self._params = params
        super().__init__({
            "s_axil":       In(AXI4LiteSignature(addr_width=16, data_width=32)),
            "cfg_tenant":   Out(tenant_config_layout(params)).array(params.tenants),
            "fcfs_bypass":  Out(1),
            "starve_limit": Out(23),
            "epoch_cycles": Out(32),
            "credits":      Out(8).array(3),
            "snapshot":     Out(1),
            "fcfs_bypass_next":  Out(1),
            "starve_limit_next": Out(23),
            "priority_next":     Out(2).array(params.tenants),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.axil = axil = AXI4LiteSlave()
        m.submodules.regs = regs = RegisterFile(self._params)
        wiring.connect(m, wiring.flipped(self.s_axil), axil.axil)
        wiring.connect(m, axil.bus, regs.bus)
        m.d.comb += [
            self.fcfs_bypass.eq(regs.cfg_fcfs_bypass),
            self.starve_limit.eq(regs.cfg_starve_limit),
            self.epoch_cycles.eq(regs.cfg_epoch_cycles),
            *(self.credits[k].eq(regs.cfg_credits[k]) for k in range(3)),
            self.snapshot.eq(regs.cfg_snapshot),
            self.fcfs_bypass_next.eq(regs.cfg_fcfs_bypass_next),
            self.starve_limit_next.eq(regs.cfg_starve_limit_next),
        ]
        for i in range(self._params.tenants):
            m.d.comb += [
                self.cfg_tenant[i].eq(regs.cfg_tenant[i]),
                self.priority_next[i].eq(regs.cfg_priority_next[i]),
            ]
        return m


def _get_active(ctx, dut, params):
    tenants = [TenantConfig(**{name: ctx.get(getattr(dut.cfg_tenant[i], name))
                               for name in vars(TenantConfig())})
               for i in range(params.tenants)]
    return FabricConfig(tenants, ctx.get(dut.fcfs_bypass), ctx.get(dut.starve_limit),
                        ctx.get(dut.epoch_cycles), tuple(ctx.get(x) for x in dut.credits))


def test_register_file_commit_atomic(seed):
    """Every write of spec §9 with random strobes, AW/W orders and backpressure.

    The active configuration must equal the mirror's every cycle: a COMMIT (or
    a CTRL / EPOCH_CYCLES / STARVE_LIMIT write) whose handshake completes in
    cycle h takes effect in h+1 and changes the outputs at h+2, all fields of
    the tenant in the same cycle, and staged values are never visible before
    their COMMIT, neither on the outputs nor in reads. ``snapshot`` is 1
    exactly in the cycle after a CTRL write with bit 1 takes effect. The
    ``cfg_*_next`` outputs (the channels
    precompute selection keys under them, spec §11) equal in cycle t what the
    mirror says is active at t+1.
    """
    params = FabricParams(tenants=3, channels=1)
    rng = seeded(seed, 1)
    dut = _ConfigHarness(params)
    mirror = Mirror(params)
    tel = TelemetryModel(params)  # never stepped: snapshots read 0
    axil = AxilManager(dut.s_axil, rng, p_ready=0.7)
    addrs = ([CTRL, EPOCH_CYCLES, STARVE_LIMIT, CREDITS]
             + [tenant_reg(i, off) for i in range(params.tenants + 1) for off in TENANT_FIELDS])
    for _ in range(160):
        data = rng.randrange(1 << 32)
        if rng.random() < 0.25:
            addr = tenant_reg(rng.randrange(params.tenants + 1), COMMIT)
        elif rng.random() < 0.1:
            addr, data = CTRL, data | 2
        else:
            addr = rng.choice(addrs + [ID, 0x0020, 0x0102, tenant_reg(0, 0x1C)])
        strb = rng.choice([0xF, 0xF, rng.randrange(16)])
        delays = rng.choice([(0, 0), (0, rng.randrange(1, 4)), (rng.randrange(1, 4), 0)])
        axil.write(addr, data, strb, *delays)
        if rng.random() < 0.5:
            axil.read(rng.choice(addrs + [ID, PARAMS, EPOCH_COUNT, 0x0003]))
    stats = {"commits": 0, "snapshots": 0, "orders": set()}

    async def testbench(ctx):
        snapshot_due = False
        in_decode = None  # a write whose handshake completed last cycle
        for cycle in range(3000):
            assert _get_active(ctx, dut, params) == mirror.config, f"cycle {cycle}"
            assert ctx.get(dut.snapshot) == snapshot_due, f"cycle {cycle}"
            axil.drive(ctx, cycle)
            r = axil.sampling_read(cycle)
            if r is not None:
                r.expected = mirror.read(r.addr, tel)
            w = axil.sample(ctx, cycle)
            snapshot_due = False
            if in_decode is not None:
                stats["orders"].add((in_decode.aw_at > in_decode.w_at) - (in_decode.aw_at < in_decode.w_at))
                stats["commits"] += in_decode.addr % 0x20 == COMMIT and in_decode.addr >= 0x100
                snapshot_due = mirror.write(in_decode.addr, in_decode.data, in_decode.strb)
                stats["snapshots"] += snapshot_due
            in_decode = w
            nxt = mirror.config
            got = (ctx.get(dut.fcfs_bypass_next), ctx.get(dut.starve_limit_next),
                   [ctx.get(dut.priority_next[i]) for i in range(params.tenants)])
            want = (nxt.fcfs_bypass, nxt.starve_limit, [t.priority for t in nxt.tenants])
            assert got == want, f"cycle {cycle}: next-cycle configuration"
            await ctx.tick()
            if axil.idle() and in_decode is None:
                break
        else:
            raise AssertionError("AXI transactions did not finish")

    run_sim(dut, testbench)
    assert len(axil.completed_reads) > 50
    for r in axil.completed_reads:
        assert r.data == r.expected, f"read {r.addr:#06x}"
    assert stats["orders"] == {-1, 0, 1} and stats["commits"] > 20 and stats["snapshots"] > 2


def test_register_file_read_map():
    """ID/VERSION/PARAMS, reads of active values only, unmapped and unaligned reads 0."""
    params = FabricParams(tenants=2, channels=3, queue_depth=16, tag_bits=24)
    dut = _ConfigHarness(params)
    axil = AxilManager(dut.s_axil, random.Random(0))
    script = [
        ("r", ID, ID_VALUE), ("r", VERSION, VERSION_VALUE),
        ("r", PARAMS, 0x18_10_03_02),
        ("w", tenant_reg(1, 0x04), 0xFFFF_FFFF), ("w", tenant_reg(1, 0x10), 0x0000_0103),
        ("r", tenant_reg(1, 0x04), 0), ("r", tenant_reg(1, 0x10), 0),  # staged only
        ("w", tenant_reg(1, COMMIT), 0),
        ("r", tenant_reg(1, 0x04), 0x0FFF_FFFF), ("r", tenant_reg(1, 0x10), 0x103),
        ("r", tenant_reg(1, COMMIT), 0),  # write-only
        ("w", ID, 0), ("r", ID, ID_VALUE),  # read-only
        ("w", CTRL, 0xFFFF_FFFF), ("r", CTRL, 1),  # snapshot bit reads 0
        ("w", STARVE_LIMIT, 0xFFFF_FFFF), ("r", STARVE_LIMIT, 0x7F_FFFF),
        ("w", tenant_reg(2, 0x00), 5), ("w", tenant_reg(2, COMMIT), 0),  # tenant >= N
        ("r", tenant_reg(2, 0x00), 0),
        ("r", CREDITS, 0), ("w", CREDITS, 0xFFFF_FFFF), ("r", CREDITS, 0xFF_FFFF),
        ("w", CREDITS, 0x0003_0201), ("r", CREDITS, 0x03_0201),
        ("r", tenant_reg(1, 0x05), 0), ("r", 0x0001, 0), ("r", 0x0020, 0), ("r", 0xFFFC, 0),
        ("r", 0x001D, 0),
    ]

    async def testbench(ctx):
        cycle = 0
        for op, addr, value in script:  # one transaction at a time, in order
            (axil.write(addr, value) if op == "w" else axil.read(addr))
            while not axil.idle():
                axil.drive(ctx, cycle)
                axil.sample(ctx, cycle)
                await ctx.tick()
                cycle += 1

    run_sim(dut, testbench)
    got = [r.data for r in axil.completed_reads]
    assert got == [value for op, _, value in script if op == "r"]


# --- telemetry ----------------------------------------------------------------------------

def _read_telemetry(ctx, dut, params):
    values = {}
    for addr in telemetry_addresses(params):
        ctx.set(dut.r_addr, addr)
        values[addr] = ctx.get(dut.r_data)
    return values


def _set_grant(ctx, port, grant):
    ctx.set(port.valid, grant is not None)
    if grant is not None:
        ctx.set(port.tenant, grant.tenant)
        ctx.set(port.bytes, grant.bytes)
        ctx.set(port.kind, Kind(grant.kind))
        ctx.set(port.ts, grant.ts)


@pytest.mark.parametrize("params", [
    FabricParams(tenants=3, channels=2, queue_depth=4),
    FabricParams(tenants=2, channels=5, queue_depth=64, max_request_bytes=4096),
    FabricParams(tenants=1, channels=1, queue_depth=1, max_request_bytes=32),
], ids=["3x2", "2x5", "1x1"])
def test_telemetry_vs_model(params, seed):
    """Telemetry against the golden model (spec §10), every register every cycle.

    Random grants (sizes, kinds, waits around each tenant's ``slo_cycles``,
    timestamps across the wrap), drops, occupancies, snapshot requests and
    EPOCH_CYCLES changes (including to values below the running count).
    """
    rng = seeded(seed, 2)
    dut = Telemetry(params)
    model = TelemetryModel(params)
    config = FabricConfig.reset(params.tenants)
    ts_mask = (1 << params.ts_bits) - 1
    start = (1 << params.ts_bits) - 400  # the timestamp wraps during the run
    stats = {"snapshots": 0, "late": 0}

    async def testbench(ctx):
        nonlocal config
        snapshot_request = False
        for cycle in range(1200):
            now = (start + cycle) & ts_mask
            got = _read_telemetry(ctx, dut, params)
            want = {addr: telemetry_read(params, addr, model) for addr in got}
            assert got == want, f"cycle {cycle}"

            if rng.random() < 0.02:
                config = replace(config, epoch_cycles=rng.choice([0, 1, 2, 3, 7, 20, 1 << 31]))
            if rng.random() < 0.05:
                config = config.with_tenant(rng.randrange(params.tenants),
                                            slo_cycles=rng.choice([0, 1, 5, 30, (1 << 24) - 1]))
            transfers = []
            for c in range(params.channels):
                grant = None
                if rng.random() < 0.6:
                    tenant = rng.randrange(params.tenants)
                    slo = config.tenants[tenant].slo_cycles
                    wait = rng.choice([0, slo, slo + 1, rng.randrange(1 << params.ts_bits)])
                    grant = Grant(tenant, rng.randrange(1, params.max_request_bytes + 1), 0,
                                  rng.choice([GUARANTEED, BURST, FCFS]), (now - wait) & ts_mask)
                    stats["late"] += (wait & ts_mask) > slo
                transfers.append(grant)
                _set_grant(ctx, dut.grants[c], grant)
            drops = [rng.random() < 0.2 for _ in range(params.channels)]
            occupancy = [[rng.choice([0, 0, 1, rng.randrange(params.queue_depth + 1)])
                          for _ in range(params.tenants)] for _ in range(params.channels)]
            for c in range(params.channels):
                ctx.set(dut.dropped[c], drops[c])
                for i in range(params.tenants):
                    ctx.set(dut.occupancy[c][i], occupancy[c][i])
            for i, t in enumerate(config.tenants):
                ctx.set(dut.tenant_cfg[i].slo_cycles, t.slo_cycles)
            ctx.set(dut.now, now)
            ctx.set(dut.epoch_cycles, config.epoch_cycles)
            # The register file raises `snapshot` in the cycle after the request.
            ctx.set(dut.snapshot, snapshot_request)
            stats["snapshots"] += snapshot_request
            snapshot_request = rng.random() < 0.1
            peaks = {i: max(occupancy[c][i] for c in range(params.channels))
                     for i in range(params.tenants)}
            model.step(now, config, transfers, drops, peaks, snapshot_request)
            await ctx.tick()

    run_sim(dut, testbench)
    print(stats, "epoch_count", model.epoch_count)
    assert stats["late"] > 100 and model.epoch_count > stats["snapshots"] > 50


def test_telemetry_timing():
    """Spec §10 timing, by hand: grants count from t+2, drops and high-water marks
    from t+1, snapshots copy the values of their own cycle, epochs every
    EPOCH_CYCLES cycles, one EPOCH_COUNT step when both kinds coincide."""
    params = FabricParams(tenants=2, channels=2, queue_depth=8)
    dut = Telemetry(params)
    T = 100  # first cycle of the script
    # cycle -> list of input changes for that cycle only
    grants = {
        T: [(0, Grant(1, 100, 0, BURST, T - 5)),         # wait 5 > slo 4: violation
            (1, Grant(1, 28, 0, GUARANTEED, T - 4))],    # wait 4 = slo: none
        T + 30: [(1, Grant(0, 4096, 0, FCFS, T + 30))],
    }
    drops = {T + 10: [1]}
    occupancy = {T + 20: {(1, 0): 5, (0, 0): 2}}
    snapshots = {T + 1, T + 2, T + 10, T + 11, T + 20, T + 21, T + 31, T + 32, T + 49}
    epoch_from = T + 40  # EPOCH_CYCLES = 5 from here: epochs end at T+44, T+49, T+54
    seen = {}

    async def testbench(ctx):
        for i in range(2):
            ctx.set(dut.tenant_cfg[i].slo_cycles, 4)
        for cycle in range(T + 56):
            ctx.set(dut.now, cycle)
            for c in range(2):
                _set_grant(ctx, dut.grants[c], None)
                ctx.set(dut.dropped[c], c in drops.get(cycle, []))
                for i in range(2):
                    ctx.set(dut.occupancy[c][i], occupancy.get(cycle, {}).get((c, i), 0))
            for c, g in grants.get(cycle, []):
                _set_grant(ctx, dut.grants[c], g)
            ctx.set(dut.snapshot, cycle in snapshots)
            ctx.set(dut.epoch_cycles, 5 if cycle >= epoch_from else 0)
            seen[cycle] = _read_telemetry(ctx, dut, params)
            await ctx.tick()

    run_sim(dut, testbench)
    bytes_lo = lambda cycle, i: seen[cycle][tel_reg(i, "bytes_lo")]
    reg = lambda cycle, name, i: seen[cycle][tel_reg(i, name)]
    # Snapshot at T+1 (visible T+2) predates the grants of T; the one at T+2 has them.
    assert bytes_lo(T + 2, 1) == 0 and reg(T + 2, "grants", 1) == 0
    assert bytes_lo(T + 3, 1) == 128
    assert [reg(T + 3, n, 1) for n in ("grants", "burst_grants", "slo_violations")] == [2, 1, 1]
    assert [reg(T + 3, n, 0) for n in ("bytes_lo", "grants")] == [0, 0]
    # The drop of T+10 is in the snapshot of T+11, not in that of T+10.
    assert [seen[T + 11][dropped_reg(c)] for c in range(2)] == [0, 0]
    assert [seen[T + 12][dropped_reg(c)] for c in range(2)] == [0, 1]
    # Occupancy of T+20 reaches the high-water mark at T+21.
    assert reg(T + 21, "queue_hwm", 0) == 0 and reg(T + 22, "queue_hwm", 0) == 5
    assert reg(T + 22, "queue_hwm", 1) == 0
    # A 4096-byte grant at T+30: not in the snapshot of T+31, in that of T+32.
    assert bytes_lo(T + 32, 0) == 0 and bytes_lo(T + 33, 0) == 4096
    assert reg(T + 33, "slo_violations", 0) == 0
    # EPOCH_COUNT: manual snapshots, then epochs at T+44 and T+49 (with a manual one).
    count = [seen[c][EPOCH_COUNT] for c in range(T + 40, T + 56)]
    assert count[0] == 8
    assert [c - T for c in range(T + 41, T + 56) if seen[c][EPOCH_COUNT] != seen[c - 1][EPOCH_COUNT]] \
        == [45, 50, 55]
    assert seen[T + 55][EPOCH_COUNT] == 11


# --- the whole fabric ------------------------------------------------------------------------

def random_request(rng, params, full):
    """A request for one channel: mostly valid tenants with room, some invalid ones."""
    lmax, n = params.max_request_bytes, params.tenants
    ident = rng.randrange(1 << params.id_width)
    kind = rng.random()
    if kind < 0.08 and n < 16:
        return Request(rng.randrange(n, 16), rng.randrange(1, lmax + 1), ident)  # bad tag
    if kind < 0.12:
        return Request(rng.randrange(n), rng.choice([0, rng.randrange(lmax + 1, 1 << params.bytes_bits)]),
                       ident)
    room = [i for i in range(n) if not full[i]] or list(range(n))
    return Request(rng.choice(room), rng.choice([lmax, rng.randrange(1, lmax + 1), 32]), ident)


class FabricBench:
    """KvFabric and FabricModel in lock step, configured over AXI4-Lite.

    Each cycle :meth:`cycle` compares the DUT's registered outputs (grants,
    ``queue_full``, ``now``) and ``req.ready`` with the model, drives the
    inputs, and applies a register write whose handshake completed in the
    previous cycle, which takes effect in this one, to the model from the next
    one (spec §9). AXI reads are checked against the value the
    register holds in the cycle the slave samples it.
    """

    def __init__(self, params, rng, *, p_req=0.5, p_ready=0.7, p_return=0.2):
        self.params, self.rng = params, rng
        self.p_req, self.p_ready, self.p_return = p_req, p_ready, p_return
        self.dut = KvFabric(params, checks=True)
        self.model = FabricModel(params)
        self.mirror = Mirror(params)
        self.axil = AxilManager(self.dut.s_axil, rng, p_ready=0.8)
        self.pending = [None] * params.channels
        self.write_in_decode = None
        self.now = 0
        self.stats = {"grants": [0, 0, 0, 0], "dropped": 0, "accepted": 0, "no_credit": 0}

    def program(self, config):
        for i, t in enumerate(config.tenants):
            for offset in TENANT_FIELDS:
                self.axil.write(tenant_reg(i, offset), fields_word(t, offset))
            self.axil.write(tenant_reg(i, COMMIT), 1)
        self.axil.write(STARVE_LIMIT, config.starve_limit)
        self.axil.write(EPOCH_CYCLES, config.epoch_cycles)
        self.axil.write(CREDITS, credits_word(config.credits))
        self.axil.write(CTRL, config.fcfs_bypass)

    async def cycle(self, ctx, *, traffic=True):
        p, dut, model = self.params, self.dut, self.model
        cycle = model.cycle
        where = f"cycle {cycle}"
        assert ctx.get(dut.now) == model.now, where
        for c, ch in enumerate(model.channels):
            g = ch.grant
            assert ctx.get(dut.grant[c].valid) == (g is not None), where
            if g is not None:
                payload = dut.grant[c].payload
                got = (ctx.get(payload.tenant), ctx.get(payload.bytes), ctx.get(payload.id),
                       ctx.get(payload.kind).value)
                assert got == (g.tenant, g.bytes, g.id, g.kind), where
            full = ctx.get(dut.queue_full[c])
            assert [full >> i & 1 for i in range(p.tenants)] == [int(f) for f in ch.queue_full()], where

        self.axil.drive(ctx, cycle)
        r = self.axil.sampling_read(cycle)
        if r is not None:
            r.expected = self.mirror.read(r.addr, model.telemetry)
        ready, returns = [], []
        for c, ch in enumerate(model.channels):
            if traffic and self.pending[c] is None and self.rng.random() < self.p_req:
                self.pending[c] = random_request(self.rng, p, ch.queue_full())
            req = self.pending[c]
            ctx.set(dut.req[c].valid, req is not None)
            if req is not None:
                ctx.set(dut.req[c].payload.tenant, req.tenant)
                ctx.set(dut.req[c].payload.bytes, req.bytes)
                ctx.set(dut.req[c].payload.id, req.id)
                assert ctx.get(dut.req[c].ready) == ch.req_ready(req.tenant, req.bytes), where
            ready.append(self.rng.random() < self.p_ready)
            ctx.set(dut.grant[c].ready, ready[-1])
            returns.append(tuple(int(self.rng.random() < self.p_return) for _ in range(3)))
            ctx.set(dut.credit_return[c], returns[-1][0] | returns[-1][1] << 1 | returns[-1][2] << 2)
            self.stats["no_credit"] += not all(ch.has_credit())
        w, d = self.axil.sample(ctx, cycle), self.write_in_decode
        self.write_in_decode = w
        snapshot = self.mirror.write(d.addr, d.data, d.strb) if d is not None else False
        results = model.step(self.pending, ready, returns, snapshot_request=snapshot)
        model.set_config(self.mirror.config)
        for c, result in enumerate(results):
            if result.accepted:
                self.pending[c] = None
                self.stats["accepted"] += 1
                self.stats["dropped"] += result.dropped
            if result.transferred is not None:
                self.stats["grants"][result.transferred.kind] += 1
        await ctx.tick()
        return w

    def check_reads(self):
        assert all(r.data == r.expected for r in self.axil.completed_reads), \
            [(hex(r.addr), r.data, r.expected) for r in self.axil.completed_reads
             if r.data != r.expected]


FABRICS = {
    "3x2": FabricParams(tenants=3, channels=2, queue_depth=2, max_request_bytes=256,
                        id_width=6, tag_bits=16),
    "2x3": FabricParams(tenants=2, channels=3, queue_depth=1, max_request_bytes=32,
                        id_width=1, tag_bits=12),
}


def random_credits(rng):
    """CREDITS limits (urgent, guaranteed, burst): mostly small, some off."""
    return tuple(rng.choice([0, 1, 2, 3, 255]) for _ in range(3))


@pytest.mark.parametrize("name", FABRICS)
def test_fabric_vs_model(name, seed):
    """KvFabric against FabricModel every cycle, configured and read over AXI4-Lite.

    Random requests (invalid tags, disabled tenants, bad sizes included), grant
    backpressure, re-commits of random tenants and random register reads
    during traffic (epoch snapshots running), then a CTRL snapshot and a read
    of every telemetry register.
    """
    params = FABRICS[name]
    rng = seeded(seed, 3)
    bench = FabricBench(params, rng, p_return=0.05)
    config = FabricConfig([random_tenant(rng, params) for _ in range(params.tenants)],
                          fcfs_bypass=0, starve_limit=rng.choice([0, 20]), epoch_cycles=97,
                          credits=(rng.choice([0, 1, 2]), rng.choice([1, 2]), rng.choice([1, 2, 3])))
    bench.program(config)
    every = ([ID, VERSION, PARAMS, CTRL, EPOCH_CYCLES, STARVE_LIMIT, CREDITS]
             + [tenant_reg(i, off) for i in range(params.tenants) for off in TENANT_FIELDS]
             + telemetry_addresses(params))

    async def testbench(ctx):
        for _ in range(1500):
            if bench.axil.idle():
                if rng.random() < 0.3:
                    bench.axil.read(rng.choice(every))
                if rng.random() < 0.02:
                    i = rng.randrange(params.tenants)
                    t = random_tenant(rng, params)
                    for offset in TENANT_FIELDS:
                        bench.axil.write(tenant_reg(i, offset), fields_word(t, offset),
                                         aw_delay=rng.randrange(3), w_delay=rng.randrange(3))
                    bench.axil.write(tenant_reg(i, COMMIT), 0)
                if rng.random() < 0.005:
                    bench.axil.write(CTRL, rng.randrange(2) | 2)
                if rng.random() < 0.01:  # new CREDITS limits, some bytes only
                    bench.axil.write(CREDITS, credits_word(random_credits(rng)),
                                     strb=rng.choice([0xF, 0x1, 0x2, 0x4, 0x6]))
            await bench.cycle(ctx)
        for _ in range(60):  # drain
            await bench.cycle(ctx, traffic=False)
        bench.axil.write(CTRL, bench.mirror.config.fcfs_bypass | 2)
        for addr in telemetry_addresses(params):
            bench.axil.read(addr)
        while not bench.axil.idle():
            await bench.cycle(ctx, traffic=False)

    run_sim(bench.dut, testbench)
    print(bench.stats, "epochs", bench.model.telemetry.epoch_count)
    bench.check_reads()
    assert bench.stats["dropped"] > 20 and sum(bench.stats["grants"]) > 100
    assert bench.stats["no_credit"] > 0
    assert len(bench.axil.completed_reads) > 100


def test_fabric_commit_takes_effect_next_cycle():
    """Spec §9 end to end: a COMMIT enabling tenant 0, handshake in cycle h,
    taking effect in the next cycle t = h+1.

    Channel 0 offers a tenant-0 request every cycle, a new id each time it is
    accepted. Requests accepted up to t meet a disabled tenant: dropped and
    counted (spec §4). The request offered at t+1 meets the new contract: it
    is queued and becomes the first grant.
    """
    params = FabricParams(tenants=2, channels=2, queue_depth=2, max_request_bytes=64, id_width=8)
    dut = KvFabric(params, checks=True)
    axil = AxilManager(dut.s_axil, random.Random(1))
    t0 = TenantConfig(rate=8, capacity=4096, peak_rate=0xFFFF, inv_weight=256, enable=1)
    for offset in TENANT_FIELDS:
        axil.write(tenant_reg(0, offset), fields_word(t0, offset))
    axil.write(tenant_reg(0, COMMIT), 0, aw_delay=0, w_delay=3)  # W last: t is W's cycle
    log = {"accepted": [], "grants": [], "commit": None}
    reads = {}

    async def testbench(ctx):
        ident = 0
        ctx.set(dut.grant[0].ready, 1)
        for cycle in range(120):
            axil.drive(ctx, cycle)
            ctx.set(dut.req[0].valid, cycle < 80)
            ctx.set(dut.req[0].payload.tenant, 0)
            ctx.set(dut.req[0].payload.bytes, 64)
            ctx.set(dut.req[0].payload.id, ident)
            if ctx.get(dut.grant[0].valid):
                log["grants"].append(ctx.get(dut.grant[0].payload.id))
            if cycle < 80 and ctx.get(dut.req[0].ready):
                log["accepted"].append((cycle, ident))
                ident += 1
            w = axil.sample(ctx, cycle)
            if w is not None and w.addr == tenant_reg(0, COMMIT):
                log["commit"] = cycle
                assert w.w_at == cycle and w.aw_at < cycle
            if cycle == 100:
                axil.write(CTRL, 2)
            if cycle == 105:
                axil.read(dropped_reg(0))
                axil.read(dropped_reg(1))
                axil.read(tel_reg(0, "grants"))
            await ctx.tick()

    run_sim(dut, testbench)
    assert log["commit"] is not None
    t = log["commit"] + 1
    dropped = [ident for cycle, ident in log["accepted"] if cycle <= t]
    queued = [ident for cycle, ident in log["accepted"] if cycle > t]
    assert len(dropped) == t + 1  # invalid requests are always ready
    assert queued[0] == t + 1 and log["grants"][0] == queued[0]
    assert log["grants"] == queued  # one tenant: FIFO order, nothing lost
    assert [r.data for r in axil.completed_reads] == [len(dropped), 0, len(queued)]


def test_fabric_invalid_tags_dropped_per_channel(seed):
    """Tags N..15 on channel 1 only: always ready, counted in DROPPED[1] alone, never
    queued, granted or charged to any tenant; tenant telemetry sees exactly the
    valid traffic of channel 0; telemetry registers of tenants >= N read 0."""
    params = FabricParams(tenants=3, channels=2, queue_depth=2, max_request_bytes=128)
    rng = seeded(seed, 4)
    dut = KvFabric(params, checks=True)
    axil = AxilManager(dut.s_axil, rng)
    t = TenantConfig(rate=64, capacity=1 << 20, peak_rate=0xFFFF, inv_weight=256, enable=1)
    for i in range(params.tenants):
        for offset in TENANT_FIELDS:
            axil.write(tenant_reg(i, offset), fields_word(t, offset))
        axil.write(tenant_reg(i, COMMIT), 0)
    expect = {"dropped": 0, "grants": [0] * 3, "bytes": [0] * 3}

    async def testbench(ctx):
        valid = bad = None
        for cycle in range(700):
            axil.drive(ctx, cycle)
            traffic = 60 <= cycle < 560
            if traffic and bad is None:
                bad = Request(rng.randrange(params.tenants, 16), rng.randrange(1, 129), 0)
            if traffic and valid is None and rng.random() < 0.5:
                valid = Request(rng.randrange(params.tenants), rng.randrange(1, 129), 0)
            for c, req in ((0, valid), (1, bad)):
                ctx.set(dut.req[c].valid, req is not None)
                if req is not None:
                    ctx.set(dut.req[c].payload.tenant, req.tenant)
                    ctx.set(dut.req[c].payload.bytes, req.bytes)
            assert ctx.get(dut.queue_full[1]) == 0 and not ctx.get(dut.grant[1].valid)
            if bad is not None:
                assert ctx.get(dut.req[1].ready)
                expect["dropped"] += 1
                bad = None
            if valid is not None and ctx.get(dut.req[0].ready):
                valid = None
            ready = rng.random() < 0.6
            ctx.set(dut.grant[0].ready, ready)
            if ready and ctx.get(dut.grant[0].valid):
                tenant = ctx.get(dut.grant[0].payload.tenant)
                expect["grants"][tenant] += 1
                expect["bytes"][tenant] += ctx.get(dut.grant[0].payload.bytes)
            axil.sample(ctx, cycle)
            if cycle == 600:
                axil.write(CTRL, 2)
            if cycle == 610:  # the snapshot was taken (reads run alongside writes)
                for addr in telemetry_addresses(params) + [tel_reg(params.tenants, "grants"),
                                                          tel_reg(15, "bytes_lo"),
                                                          dropped_reg(params.channels)]:
                    axil.read(addr)
            await ctx.tick()

    run_sim(dut, testbench)
    got = {r.addr: r.data for r in axil.completed_reads}
    assert got[dropped_reg(0)] == 0 and got[dropped_reg(1)] == expect["dropped"] > 300
    for i in range(params.tenants):
        assert got[tel_reg(i, "grants")] == expect["grants"][i] > 10
        assert got[tel_reg(i, "bytes_lo")] == expect["bytes"][i]
        assert got[tel_reg(i, "bytes_hi")] == 0
    assert got[tel_reg(params.tenants, "grants")] == got[tel_reg(15, "bytes_lo")] == 0
    assert got[dropped_reg(params.channels)] == 0
    assert got[EPOCH_COUNT] == 1


def test_fabric_id_version_params():
    """ID, VERSION and PARAMS of the default fabric over AXI4-Lite (spec §9)."""
    dut = KvFabric(FabricParams(), checks=True)
    axil = AxilManager(dut.s_axil, random.Random(0))
    for addr in (ID, VERSION, PARAMS, 0x0002):
        axil.read(addr)

    async def testbench(ctx):
        for cycle in range(16):
            axil.drive(ctx, cycle)
            axil.sample(ctx, cycle)
            await ctx.tick()

    run_sim(dut, testbench)
    # PARAMS: [7:0] N = 8, [15:8] C = 8, [23:16] D = 4, [31:24] T = 20.
    assert [r.data for r in axil.completed_reads] == [0x4B564642, 0x100, 0x14_04_08_08, 0]
