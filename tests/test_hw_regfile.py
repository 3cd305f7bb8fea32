# amaranth: UnusedElaboratable=no
"""Register file behind the AXI4-Lite slave (Amaranth simulator), and the bus signatures.

Expected values come from the shared register mirror (tests/support/registers.py:
the description's map, spec §9's behaviour), never from the RTL. Every test
prints its seed (``KVFABRIC_SEED`` overrides it).
"""

import copy
import gc
import random
import warnings

import pytest
from amaranth import *
from amaranth.hdl import UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from kvfabric.hw.axil import AXI4LiteSignature, AXI4LiteSlave, RegisterBusSignature
from kvfabric.hw.config import CHANNEL_EARLY_FIELDS, RegisterFile
from kvfabric.hw.layouts import tenant_config_layout
from kvfabric.hw.telemetry import Telemetry
from kvfabric.hw.top import KvFabric
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.model.telemetry import Telemetry as TelemetryModel
from kvfabric.regmap import REGMAP
from kvfabric.spec import CREDIT_BITS, CREDIT_CLASS_NAMES, CREDIT_CLASSES, FabricParams

from support.axil_manager import AxilManager, run_sim, seeded
from support.registers import (CREDITS, CTRL, EPOCH_COUNT, ID, ID_VALUE, PARAMS,
                               STARVE_LIMIT, VERSION, VERSION_VALUE, Mirror,
                               config_write_addresses, tenant_reg)


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
    """AXI4LiteSlave + RegisterFile, with the register file's outputs visible;
    ``copies_equal``: every per-channel copy of the early outputs (``copies``
    of them, issue #42) equals its original."""

    def __init__(self, params, copies=3):
        self._params = params
        self._copies = copies
        super().__init__({
            "copies_equal": Out(1),
            "s_axil":       In(AXI4LiteSignature(addr_width=16, data_width=32)),
            "cfg_tenant":   Out(tenant_config_layout(params)).array(params.tenants),
            "fcfs_bypass":  Out(1),
            "starve_limit": Out(23),
            "epoch_cycles": Out(32),
            "credits":      Out(CREDIT_BITS).array(CREDIT_CLASSES),
            "bulk_prio":    Out(4),
            "arrival_prio": Out(4),
            "arrival_prio_next": Out(4),
            "bulk_run":     Out(8),
            "snapshot":     Out(1),
            "fcfs_bypass_next":  Out(1),
            "starve_limit_next": Out(23),
            "priority_next":     Out(2).array(params.tenants),
            "guaranteed_next":   Out(params.tenants),
            "coord_enable":      Out(1),
            "coord_floor":       Out(8),
            "coord_epoch_cycles": Out(24),
            "coord_enable_next": Out(1),
            "coord_enable_after_next": Out(1),
            "rate_after_next":      Out(16).array(params.tenants),
            "peak_rate_after_next": Out(16).array(params.tenants),
            "commit":            Out(params.tenants),
            "commit_next":       Out(params.tenants),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.axil = axil = AXI4LiteSlave()
        m.submodules.regs = regs = RegisterFile(self._params, copies=self._copies)
        wiring.connect(m, wiring.flipped(self.s_axil), axil.axil)
        same = [getattr(regs, f"cfg_{name}_next_copy")[k] == getattr(regs, f"cfg_{name}_next")
                for name in CHANNEL_EARLY_FIELDS for k in range(self._copies)]
        same += [(regs.cfg_priority_next_copy[k][i] == regs.cfg_priority_next[i])
                 & (regs.cfg_guaranteed_next_copy[k][i] == regs.cfg_guaranteed_next[i])
                 for k in range(self._copies) for i in range(self._params.tenants)]
        m.d.comb += self.copies_equal.eq(Cat(same).all())
        wiring.connect(m, axil.bus, regs.bus)
        m.d.comb += [
            self.fcfs_bypass.eq(regs.cfg_fcfs_bypass),
            self.starve_limit.eq(regs.cfg_starve_limit),
            self.epoch_cycles.eq(regs.cfg_epoch_cycles),
            *(self.credits[k].eq(getattr(regs, f"cfg_{name}")) for k, name in enumerate(CREDIT_CLASS_NAMES)),
            self.bulk_prio.eq(regs.cfg_bulk_prio),
            self.arrival_prio.eq(regs.cfg_arrival_prio),
            self.arrival_prio_next.eq(regs.cfg_arrival_prio_next),
            self.bulk_run.eq(regs.cfg_bulk_run),
            self.snapshot.eq(regs.cfg_snapshot),
            self.fcfs_bypass_next.eq(regs.cfg_fcfs_bypass_next),
            self.starve_limit_next.eq(regs.cfg_starve_limit_next),
            self.coord_enable.eq(regs.cfg_coord_enable),
            self.coord_floor.eq(regs.cfg_coord_floor),
            self.coord_epoch_cycles.eq(regs.cfg_coord_epoch_cycles),
            self.coord_enable_next.eq(regs.cfg_coord_enable_next),
            self.coord_enable_after_next.eq(regs.cfg_coord_enable_after_next),
            self.commit.eq(regs.cfg_commit),
            self.commit_next.eq(regs.cfg_commit_next),
        ]
        for i in range(self._params.tenants):
            m.d.comb += [
                self.cfg_tenant[i].eq(regs.cfg_tenant[i]),
                self.priority_next[i].eq(regs.cfg_priority_next[i]),
                self.guaranteed_next[i].eq(regs.cfg_guaranteed_next[i]),
                self.rate_after_next[i].eq(regs.cfg_rate_after_next[i]),
                self.peak_rate_after_next[i].eq(regs.cfg_peak_rate_after_next[i]),
            ]
        return m


def _get_active(ctx, dut, params):
    tenants = [TenantConfig(**{name: ctx.get(getattr(dut.cfg_tenant[i], name))
                               for name in vars(TenantConfig())})
               for i in range(params.tenants)]
    return FabricConfig(tenants, ctx.get(dut.fcfs_bypass), ctx.get(dut.starve_limit),
                        ctx.get(dut.epoch_cycles), tuple(ctx.get(x) for x in dut.credits),
                        ctx.get(dut.bulk_prio), arrival_prio=ctx.get(dut.arrival_prio),
                        coord_enable=ctx.get(dut.coord_enable),
                        coord_floor=ctx.get(dut.coord_floor),
                        coord_epoch_cycles=ctx.get(dut.coord_epoch_cycles),
                        bulk_run=ctx.get(dut.bulk_run))


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
    mirror says is active at t+1, and the ``cfg_*_after_next`` ones (the
    coordinator stages its rate registers' values with them, spec §13) what
    it says is active at t+2: the write on the bus in t applied too.
    """
    params = FabricParams(tenants=3, channels=1)
    rng = seeded(seed, 1)
    dut = _ConfigHarness(params)
    mirror = Mirror(params)
    tel = TelemetryModel(params)  # never stepped: snapshots read 0
    axil = AxilManager(dut.s_axil, rng, p_ready=0.7)
    addrs = config_write_addresses(params, beyond=1)
    for _ in range(160):
        data = rng.randrange(1 << 32)
        if rng.random() < 0.25:
            addr = tenant_reg(rng.randrange(params.tenants + 1), "COMMIT")
        elif rng.random() < 0.1:
            addr, data = CTRL, data | 2
        else:
            addr = rng.choice(addrs + [ID, 0x0020, 0x0102, tenant_reg(0, "COMMIT") + 4])
        strb = rng.choice([0xF, 0xF, rng.randrange(16)])
        delays = rng.choice([(0, 0), (0, rng.randrange(1, 4)), (rng.randrange(1, 4), 0)])
        axil.write(addr, data, strb, *delays)
        if rng.random() < 0.5:
            axil.read(rng.choice(addrs + [ID, PARAMS, EPOCH_COUNT, 0x0003]))
    stats = {"commits": 0, "commits_ahead": 0, "snapshots": 0, "orders": set()}

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
            committed = 0
            if in_decode is not None:
                stats["orders"].add((in_decode.aw_at > in_decode.w_at) - (in_decode.aw_at < in_decode.w_at))
                found = REGMAP.decode(in_decode.addr, params)
                stats["commits"] += found is not None and found[2].commit
                if found is not None and found[2].commit:
                    committed = 1 << found[1]
                snapshot_due = mirror.write(in_decode.addr, in_decode.data, in_decode.strb)
                stats["snapshots"] += snapshot_due
            in_decode = w
            nxt = mirror.config
            got = (ctx.get(dut.fcfs_bypass_next), ctx.get(dut.starve_limit_next),
                   [ctx.get(dut.priority_next[i]) for i in range(params.tenants)],
                   ctx.get(dut.coord_enable_next), ctx.get(dut.commit), ctx.get(dut.arrival_prio_next),
                   [ctx.get(dut.guaranteed_next[i]) for i in range(params.tenants)])
            want = (nxt.fcfs_bypass, nxt.starve_limit, [t.priority for t in nxt.tenants], nxt.coord_enable,
                    committed, nxt.arrival_prio, [int(t.rate != 0) for t in nxt.tenants])
            assert got == want, f"cycle {cycle}: next-cycle configuration"
            assert ctx.get(dut.copies_equal), f"cycle {cycle}: a channel's copy differs"
            ahead, committing = copy.deepcopy(mirror), 0
            if w is not None:
                ahead.write(w.addr, w.data, w.strb)
                found = REGMAP.decode(w.addr, params)
                if found is not None and found[2].commit:
                    committing = 1 << found[1]
                    stats["commits_ahead"] += 1
            got = (ctx.get(dut.coord_enable_after_next), ctx.get(dut.commit_next),
                   [(ctx.get(dut.rate_after_next[i]), ctx.get(dut.peak_rate_after_next[i]))
                    for i in range(params.tenants)])
            want = (ahead.config.coord_enable, committing,
                    [(t.rate, t.peak_rate) for t in ahead.config.tenants])
            assert got == want, f"cycle {cycle}: configuration two edges ahead"
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
    assert stats["commits_ahead"] == stats["commits"]


def test_register_file_read_map():
    """ID/VERSION/PARAMS, reads of active values only, unmapped reads 0, and an
    unaligned address selecting the word that contains it (spec §9): a byte
    store to PRIO_EN + 1 with WSTRB 0b0010 writes the enable byte alone."""
    params = FabricParams(tenants=2, channels=3, queue_depth=16, tag_bits=24)
    dut = _ConfigHarness(params)
    axil = AxilManager(dut.s_axil, random.Random(0))
    script = [
        ("r", ID, ID_VALUE), ("r", VERSION, VERSION_VALUE),
        ("r", PARAMS, 0x18_10_03_02),
        ("w", tenant_reg(1, "CAPACITY"), 0xFFFF_FFFF), ("w", tenant_reg(1, "PRIO_EN"), 0x0000_0103),
        ("r", tenant_reg(1, "CAPACITY"), 0), ("r", tenant_reg(1, "PRIO_EN"), 0),  # staged only
        ("w", tenant_reg(1, "COMMIT"), 0),
        ("r", tenant_reg(1, "CAPACITY"), 0x0FFF_FFFF), ("r", tenant_reg(1, "PRIO_EN"), 0x103),
        ("r", tenant_reg(1, "COMMIT"), 0),  # write-only
        ("w", ID, 0), ("r", ID, ID_VALUE),  # read-only
        ("w", CTRL, 0xFFFF_FFFF), ("r", CTRL, 0xFF01),  # snapshot bit reads 0; bulk_run [15:8]
        ("w", STARVE_LIMIT, 0xFFFF_FFFF), ("r", STARVE_LIMIT, 0x7F_FFFF),
        ("w", tenant_reg(2, "RATE"), 5), ("w", tenant_reg(2, "COMMIT"), 0),  # tenant >= N
        ("r", tenant_reg(2, "RATE"), 0),
        ("r", tenant_reg(1, "CAPACITY") + 1, 0x0FFF_FFFF), ("r", 0x0001, ID_VALUE),
        ("r", CREDITS, 0), ("r", 0xFFFC, 0), ("r", 0xFFFF, 0),
        # Unaligned byte and half-word stores (the address's low bits and the strobes
        # of an AXI manager's sub-word write): only the strobed bytes change.
        ("w", tenant_reg(0, "PRIO_EN") + 1, 0x0000_0100, 0b0010),
        ("w", tenant_reg(0, "RATE") + 2, 0xABCD_0000, 0b1100),  # bytes 2-3: RATE is [15:0]
        ("w", tenant_reg(0, "RATE") + 1, 0x0000_3400, 0b0010),
        ("w", tenant_reg(0, "COMMIT") + 3, 0, 0b1000),
        ("r", tenant_reg(0, "PRIO_EN") + 2, 0x100), ("r", tenant_reg(0, "RATE") + 3, 0x3400),
        ("w", STARVE_LIMIT + 3, 0x0000_0000, 0b1000), ("r", STARVE_LIMIT, 0x7F_FFFF),  # [31:24] unused
        ("w", STARVE_LIMIT + 2, 0x0012_0000, 0b0100), ("r", STARVE_LIMIT + 1, 0x12_FFFF),
        ("w", CTRL + 1, 0x0000_0000, 0b0010), ("r", CTRL, 1),  # byte 1 is bulk_run: cleared alone
        ("w", CTRL, 0x0000_0000, 0b0000), ("r", CTRL, 1),  # no strobes: no change
        ("w", ID + 2, 0, 0b0100), ("r", ID + 3, ID_VALUE),
    ]

    async def testbench(ctx):
        cycle = 0
        for op, addr, value, *strb in script:  # one transaction at a time, in order
            (axil.write(addr, value, *strb) if op == "w" else axil.read(addr))
            while not axil.idle():
                axil.drive(ctx, cycle)
                axil.sample(ctx, cycle)
                await ctx.tick()
                cycle += 1

    run_sim(dut, testbench)
    got = [r.data for r in axil.completed_reads]
    assert got == [value for op, _, value, *_ in script if op == "r"]
