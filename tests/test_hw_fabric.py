# amaranth: UnusedElaboratable=no
"""The whole fabric (KvFabric) against the golden model, configured and read over AXI4-Lite
(Amaranth simulator).

Register writes are applied to the model through the shared register mirror
(tests/support/registers.py); arbitration and telemetry come from
:mod:`kvfabric.model.fabric`. Every test prints its seed.
"""

import random

import pytest

from kvfabric.hw.top import KvFabric
from kvfabric.model.channel import Request
from kvfabric.model.fabric import FabricModel
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.spec import FabricParams
from kvfabric.model.regfile import config_writes
from kvfabric.tb import stimulus
from kvfabric.tb.axil import credits_word

from support.axil_manager import AxilManager, run_sim, seeded
from support.sim_inputs import set_all
from support.registers import (CREDITS, CTRL, EPOCH_COUNT, EPOCH_CYCLES, ID, PARAMS, STAGED, STARVE_LIMIT,
                               VERSION, Mirror, dropped_reg, random_tenant, tel_reg,
                               telemetry_addresses, tenant_reg, tenant_words)


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

    def __init__(self, params, rng, *, p_req=0.5, p_ready=0.7, p_return=0.2, fpga=False):
        self.params, self.rng = params, rng
        self.p_req, self.p_ready, self.p_return = p_req, p_ready, p_return
        self.dut = KvFabric(params, checks=True, fpga=fpga)
        self.model = FabricModel(params)
        self.mirror = Mirror(params)
        self.axil = AxilManager(self.dut.s_axil, rng, p_ready=0.8)
        self.pending = [None] * params.channels
        self.write_in_decode = None
        self.now = 0
        self.stats = {"grants": [0, 0, 0, 0], "dropped": 0, "accepted": 0, "no_credit": 0}

    def program(self, config):
        for addr, data in config_writes(config):
            self.axil.write(addr, data)

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
        # Every channel's request first (one settle), then each req.ready, then
        # grant.ready and credit_return (another): the channels are independent,
        # and a channel's req.ready is read before its grant.ready and
        # credit_return of this cycle are set.
        ready, returns, requests = [], [], []
        for c, ch in enumerate(model.channels):
            if traffic and self.pending[c] is None and self.rng.random() < self.p_req:
                self.pending[c] = random_request(self.rng, p, ch.queue_full())
            req = self.pending[c]
            requests.append((dut.req[c].valid, req is not None))
            if req is not None:
                requests += [(dut.req[c].payload.tenant, req.tenant), (dut.req[c].payload.bytes, req.bytes),
                             (dut.req[c].payload.id, req.id)]
            ready.append(self.rng.random() < self.p_ready)
            returns.append(tuple(int(self.rng.random() < self.p_return) for _ in range(3)))
        set_all(ctx, requests)
        for c, ch in enumerate(model.channels):
            req = self.pending[c]
            if req is not None:
                assert ctx.get(dut.req[c].ready) == ch.req_ready(req.tenant, req.bytes), where
            self.stats["no_credit"] += not all(ch.has_credit())
        set_all(ctx, [(dut.grant[c].ready, ready[c]) for c in range(p.channels)]
                + [(dut.credit_return[c], r[0] | r[1] << 1 | r[2] << 2) for c, r in enumerate(returns)])
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
    # The most channels the parameters allow (C = 16, spec §1): the DROPPED
    # array and the telemetry sum over channels at their widest.
    "2x16": FabricParams(tenants=2, channels=16, queue_depth=1, max_request_bytes=32,
                         id_width=1, tag_bits=12),
}


def random_credits(rng):
    """CREDITS limits (urgent, guaranteed, burst): mostly small, some off, some at the maximum."""
    return stimulus.random_credits(rng, (0, 1, 2, 3, 255))


#: Cycles of traffic per fabric in ``make test`` (the 2 x 16 fabric is about
#: 75 ms a cycle in the Amaranth simulator); ``make soak`` runs SOAK_FACTOR
#: times as many.
CYCLES = {"3x2": 1500, "2x3": 1500, "2x16": 800}
SOAK_FACTOR = 4


@pytest.mark.parametrize("name", FABRICS)
def test_fabric_vs_model(name, seed):
    """KvFabric against FabricModel every cycle, configured and read over AXI4-Lite.

    Random requests (invalid tags, disabled tenants, bad sizes included), grant
    backpressure, re-commits of random tenants and random register reads
    during traffic (epoch snapshots running), then a CTRL snapshot and a read
    of every telemetry register.
    """
    _fabric_vs_model(name, seed, CYCLES[name])


def test_fabric_fpga_form_vs_model(seed):
    """The FPGA form (``KvFabric(fpga=True)``: chained sums, vmin as a tree,
    one copy of the channels' early configuration) against the model, as
    test_fabric_vs_model: the same values every cycle as the default form."""
    _fabric_vs_model("3x2", seed, CYCLES["3x2"], fpga=True)


@pytest.mark.soak
@pytest.mark.parametrize("name", FABRICS)
def test_fabric_vs_model_soak(name, seed):
    """``make soak``: the same, SOAK_FACTOR times as long."""
    _fabric_vs_model(name, seed, CYCLES[name] * SOAK_FACTOR)


def _fabric_vs_model(name, seed, cycles, fpga=False):
    params = FABRICS[name]
    rng = seeded(seed, 3)
    bench = FabricBench(params, rng, p_return=0.05, fpga=fpga)
    config = FabricConfig([random_tenant(rng, params) for _ in range(params.tenants)],
                          fcfs_bypass=0, starve_limit=rng.choice([0, 20]), epoch_cycles=97,
                          credits=(rng.choice([0, 1, 2]), rng.choice([1, 2]), rng.choice([1, 2, 3])))
    bench.program(config)
    every = ([ID, VERSION, PARAMS, CTRL, EPOCH_CYCLES, STARVE_LIMIT, CREDITS]
             + [tenant_reg(i, name) for i in range(params.tenants) for name in STAGED]
             + telemetry_addresses(params))

    async def testbench(ctx):
        for _ in range(cycles):
            if bench.axil.idle():
                if rng.random() < 0.3:
                    bench.axil.read(rng.choice(every))
                if rng.random() < 0.02:
                    i = rng.randrange(params.tenants)
                    t = random_tenant(rng, params)
                    for name, word in tenant_words(t).items():
                        bench.axil.write(tenant_reg(i, name), word,
                                         aw_delay=rng.randrange(3), w_delay=rng.randrange(3))
                    bench.axil.write(tenant_reg(i, "COMMIT"), 0)
                if rng.random() < 0.005:
                    bench.axil.write(CTRL, rng.randrange(2) | 2)
                if rng.random() < 0.01:  # new CREDITS limits and masks, some bytes only
                    bench.axil.write(CREDITS, credits_word(random_credits(rng), rng.randrange(16), rng.randrange(16)),
                                     strb=rng.choice([0xF, 0x1, 0x2, 0x4, 0x6, 0x8]))
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
    for name, word in tenant_words(t0).items():
        axil.write(tenant_reg(0, name), word)
    axil.write(tenant_reg(0, "COMMIT"), 0, aw_delay=0, w_delay=3)  # W last: t is W's cycle
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
            if w is not None and w.addr == tenant_reg(0, "COMMIT"):
                log["commit"] = cycle
                assert w.w_at == cycle and w.aw_at < cycle
            if cycle == 100:
                axil.write(CTRL, 2)
            if cycle == 105:
                axil.read(dropped_reg(0))
                axil.read(dropped_reg(1))
                axil.read(tel_reg(0, "GRANTS"))
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
        for name, word in tenant_words(t).items():
            axil.write(tenant_reg(i, name), word)
        axil.write(tenant_reg(i, "COMMIT"), 0)
    expect = {"dropped": 0, "grants": [0] * 3, "bytes": [0] * 3}

    async def testbench(ctx):
        valid = bad = None
        for cycle in range(900):  # the reads queued at 610 finish well before the end
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
                for addr in telemetry_addresses(params) + [tel_reg(params.tenants, "GRANTS"),
                                                          tel_reg(15, "BYTES_LO"),
                                                          dropped_reg(params.channels)]:
                    axil.read(addr)
            await ctx.tick()

    run_sim(dut, testbench)
    got = {r.addr: r.data for r in axil.completed_reads}
    assert got[dropped_reg(0)] == 0 and got[dropped_reg(1)] == expect["dropped"] > 300
    for i in range(params.tenants):
        assert got[tel_reg(i, "GRANTS")] == expect["grants"][i] > 10
        assert got[tel_reg(i, "BYTES_LO")] == expect["bytes"][i]
        assert got[tel_reg(i, "BYTES_HI")] == 0
    assert got[tel_reg(params.tenants, "GRANTS")] == got[tel_reg(15, "BYTES_LO")] == 0
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
    # PARAMS: [7:0] N = 8, [15:8] C = 8, [23:16] D = 4, [31:24] T = 20; 0x0002 lies in
    # ID's word, which an unaligned read returns whole (spec §9).
    assert [r.data for r in axil.completed_reads] == [0x4B564642, 0x100, 0x14_04_08_08, 0x4B564642]
