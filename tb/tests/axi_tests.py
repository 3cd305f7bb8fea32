"""cocotb tests of the AXI4 top (spec §14) with cocotbext-axi: an ``AxiMaster``
on every tenant port, an ``AxiRam`` on every channel's manager port.

Every test reads its parameters from ``KVF_AXI_JOB`` (JSON, see
:func:`kvfabric.tb.axi_design.run_axi_cosim`) and its seed from ``KVF_SEED``;
the seed is printed. Checked: every read returns what was last written (each
tenant's workers own disjoint address ranges and keep a copy), every response
OKAY, the protocol checkers of :mod:`kvfabric.tb.axi_checks` on every port,
nothing left in flight at the end, and the arbiter inside checked every cycle
against the golden model by the bare arbiter's lockstep scoreboard
(:class:`kvfabric.tb.scoreboard.Scoreboard`): the requests the front end
offers, the grants, ``queue_full``, ``req.ready`` and the register writes
are read from the AXI top's ``req__<c>__*`` / ``grant__<c>__*`` signals and
its ``s_axil`` port, the model is stepped with them, and every grant must be
the model's.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, SimTimeoutError, Timer, with_timeout
from cocotbext.axi import AxiBus, AxiBurstType, AxiLiteBus, AxiLiteMaster, AxiMaster, AxiRam, AxiResp

from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.spec import KIND_NAMES, axqos, credit_class
from kvfabric.tb import axil as regs
from kvfabric.tb.axi_checks import ManagerChecker, TenantChecker, watch
from kvfabric.tb.axi_design import axi_job_from_json
from kvfabric.tb.monitor import AxiPorts, ChannelPorts, Monitor
from kvfabric.tb.scoreboard import Scoreboard

#: Pause patterns (True = pause this cycle) applied to every channel of every bus model.
PAUSES = {
    "none": None,
    "idle": [0, 0, 1],
    "backpressure": [1, 1, 0],
    "heavy": [1, 1, 1, 0],
}


def _pause(pattern, rng):
    if pattern == "random":
        while True:
            yield rng.random() < 0.35
    base = PAUSES[pattern]
    yield from itertools.cycle(base)


class PoisonedRam(AxiRam):
    """An ``AxiRam`` that answers SLVERR for the bytes of its ``poison`` ranges
    (cocotbext-axi's subordinates answer SLVERR when their ``_read``/``_write``
    raise), so that a memory error on one channel of a split burst can be
    provoked. The write and read halves are separate objects, each wrapped."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.poison: list[range] = []
        write, read = self.write_if._write, self.read_if._read

        async def poisoned_write(address, data):
            if self._poisoned(address, len(data)):
                raise ValueError(f"poisoned write at {address:#x}")
            await write(address, data)

        async def poisoned_read(address, length):
            if self._poisoned(address, length):
                raise ValueError(f"poisoned read at {address:#x}")
            return await read(address, length)

        self.write_if._write, self.read_if._read = poisoned_write, poisoned_read

    def _poisoned(self, address, length):
        return any(address < r.stop and r.start < address + length for r in self.poison)


class SharedPortTenant:
    """Tenant ``tenant``'s view of the shared port's one ``AxiMaster`` (spec §14.9):
    its reads and writes carry the tenant in AxUSER, so the scenarios written for
    one master per tenant run unchanged."""

    def __init__(self, master: AxiMaster, tenant: int):
        self.master, self.tenant = master, tenant
        self.write_if, self.read_if = master.write_if, master.read_if

    async def read(self, address, length, **kwargs):
        return await self.master.read(address, length, user=self.tenant, **kwargs)

    async def write(self, address, data, **kwargs):
        return await self.master.write(address, data, user=self.tenant, **kwargs)


class AxiTB:
    """Clock, reset, register master, bus models and checkers of the AXI4 top."""

    def __init__(self, dut):
        self.dut = dut
        self.params, self.axi, self.job = axi_job_from_json(os.environ["KVF_AXI_JOB"])
        self.seed = int(os.environ.get("KVF_SEED", "1"))
        dut._log.info("seed %d (KVF_SEED)", self.seed)
        self.rng = random.Random(self.seed)
        p, axi = self.params, self.axi
        #: What the registers hold (reset until program() writes them).
        self.config = FabricConfig.reset(p.tenants)
        self.errors: list[str] = []
        if axi.shared_port:
            self.shared = AxiMaster(AxiBus.from_prefix(dut, "s_axi_"), dut.clk, dut.rst, max_burst_len=256)
            self.masters = [SharedPortTenant(self.shared, t) for t in range(p.tenants)]
            self.tenant_ports = ["s_axi_"]
        else:
            self.masters = [AxiMaster(AxiBus.from_prefix(dut, f"s_axi__{t}_"), dut.clk, dut.rst,
                                      max_burst_len=256)
                            for t in range(p.tenants)]
            self.tenant_ports = [f"s_axi__{t}_" for t in range(p.tenants)]
        # One bus model per port (the shared port's tenants share one).
        self.bus_models = list({id(m.write_if): m for m in self.masters}.values())
        # With a memory clock (spec §14.8) the manager ports and their RAMs run on mem_clk.
        self.mem_clk = dut.mem_clk if axi.mem_clock else dut.clk
        self.mem_rst = dut.mem_rst if axi.mem_clock else dut.rst
        self.rams = [PoisonedRam(AxiBus.from_prefix(dut, f"m_axi__{c}_"), self.mem_clk, self.mem_rst,
                                 size=1 << axi.addr_width)
                     for c in range(p.channels)]
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
        for model in (*self.bus_models, *self.rams):
            for sub in (model.write_if, model.read_if):
                sub.log.setLevel(logging.WARNING)
        for sub in (self.axil.write_if, self.axil.read_if):
            sub.log.setLevel(logging.WARNING)
        self.managers = [ManagerChecker(dut, c, axi, p.channels, self.errors) for c in range(p.channels)]
        self.tenants = [TenantChecker(dut, prefix, self.errors) for prefix in self.tenant_ports]
        self.arb_ports = [ChannelPorts(dut, p, c, internal=False) for c in range(p.channels)]
        self.monitor = Monitor(dut, p, self.arb_ports, AxiPorts(dut))
        self.scoreboard = Scoreboard(p, self.seed, channels=self.arb_ports, check_internal=False, log=dut._log)
        self._stop = False
        # AxQOS values of the grants checked on the manager ports (coverage).
        self.qos_counts = collections.Counter()

    def set_pauses(self, pattern):
        if pattern == "none":
            return
        for model in (*self.bus_models, *self.rams):
            for ch in (model.write_if.aw_channel, model.write_if.w_channel, model.write_if.b_channel,
                       model.read_if.ar_channel, model.read_if.r_channel):
                ch.set_pause_generator(_pause(pattern, random.Random(self.rng.random())))

    async def start(self):
        dut = self.dut
        dut.rst.value = 1
        if self.axi.mem_clock:
            dut.mem_rst.value = 1
        await Timer(2, unit="ns")
        Clock(dut.clk, 10, unit="ns").start(start_high=False)
        if self.axi.mem_clock:
            period = float(self.job.get("mem_period_ns", 7))
            dut._log.info("memory clock %.3f ns against the fabric's 10 ns", period)
            Clock(dut.mem_clk, period, unit="ns").start(start_high=False)
        await ClockCycles(dut.clk, 4)
        if self.axi.mem_clock:
            await FallingEdge(dut.mem_clk)
            dut.mem_rst.value = 0
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        self._start_watching()

    def _start_watching(self):
        """The lockstep model from cycle 0 (this falling edge of ``clk``) and the port checkers."""
        dut = self.dut
        self.lockstep = cocotb.start_soon(self._lockstep())
        stop = lambda: self._stop  # noqa: E731
        if self.axi.mem_clock:
            self.watchers = [cocotb.start_soon(watch(dut, self.tenants, stop)),
                             cocotb.start_soon(watch(dut, self.managers, stop, clock=self.mem_clk,
                                                     reset=self.mem_rst))]
        else:
            self.watchers = [cocotb.start_soon(watch(dut, [*self.managers, *self.tenants], stop))]

    async def reset_now(self, tasks, cycles=5):
        """Assert reset at a falling edge in the middle of traffic: ``tasks`` (the
        tenants' workers, whose bursts the reset cut off) are cancelled, the
        checkers forget what was in flight, the golden model restarts with the
        arbiter and records what the reset flushed (spec §2: synchronous reset)."""
        dut = self.dut
        await FallingEdge(dut.clk)
        dut.rst.value = 1
        if self.axi.mem_clock:
            dut.mem_rst.value = 1
        self._stop = True
        for task in tasks:
            task.cancel()
        await self.lockstep
        for w in self.watchers:
            await w
        self.flushed = self.scoreboard.flush()
        self.scoreboard.reset()
        p = self.params
        self.managers = [ManagerChecker(dut, c, self.axi, p.channels, self.errors) for c in range(p.channels)]
        self.tenants = [TenantChecker(dut, prefix, self.errors) for prefix in self.tenant_ports]
        await ClockCycles(dut.clk, cycles)
        if self.axi.mem_clock:
            await FallingEdge(self.mem_clk)
            dut.mem_rst.value = 0
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        self._stop = False
        self._start_watching()

    async def _lockstep(self):
        """The golden model beside the arbiter, from cycle 0 (the falling edge that released reset)."""
        sb = self.scoreboard
        n = self.params.tenants
        # The front end's error counters are inputs of the arbiter's telemetry
        # (spec §14.6): the model's snapshot copies them from the DUT's ports.
        counters = [(getattr(self.dut, f"unsupported__{t}"),
                     getattr(self.dut, f"wlast_errors__{t}")) for t in range(n)]
        while not self._stop:
            await ReadOnly()
            for t, (unsupported, wlast) in enumerate(counters):
                sb.model.telemetry.set_front_end(t, int(unsupported.value), int(wlast.value))
            # AxQOS (spec §6.6) uses the granted tenant's priority active in
            # the grant's transfer cycle: the model's configuration before its step.
            config = sb.model.config
            priority = [tc.priority for tc in config.tenants]
            logged = len(sb.grant_log)
            sb.step(self.monitor.sample())
            for cycle, c, tenant, nbytes, gid, kind in sb.grant_log[logged:]:
                direction = "aw" if gid >> self.axi.entry_bits & 1 else "ar"
                credit = credit_class(kind, priority[tenant], config.bulk_prio, config.arrival_prio)
                qos = axqos(kind, priority[tenant], credit)
                self.qos_counts[qos] += 1
                self.managers[c].expect_qos(direction, qos,
                                            f"the grant of cycle {cycle} (tenant {tenant}, "
                                            f"{KIND_NAMES[kind]}, priority {priority[tenant]})")
            await FallingEdge(self.dut.clk)

    async def program(self, tenants=None):
        """Enable the tenants with equal weights and a small guarantee each, at
        priorities 0, 1, 2, 3, 0, ... (so that AxQOS's ``11 - priority`` is seen),
        priority 1 arrival-ordered and priority 2 bulk, and tenant 1 (priority 1)
        with no guarantee: its grants are burst grants of the guaranteed credit
        class, AxQOS 5, and priority 2's guaranteed grants take the burst
        class's (spec §6.6)."""
        n = self.params.tenants
        if tenants is None:
            tenants = [TenantConfig(rate=0 if t == 1 else 16, capacity=0 if t == 1 else 1 << 16, peak_rate=0xFFFF,
                                    inv_weight=256, enable=1, priority=t % 4)
                       for t in range(n)]
        self.config = FabricConfig(tenants, bulk_prio=0b0100, arrival_prio=0b0010)
        await regs.program(self.axil, self.config)

    async def axi_errors(self, tenant):
        """``TEL[tenant].AXI_ERRORS`` after a snapshot taken now (spec §14.6):
        (unsupported bursts, WLAST errors), read over the register port."""
        await regs.take_snapshot(self.axil, self.config)
        await ClockCycles(self.dut.clk, 2)
        word = await self.axil.read_dword(regs.tel_reg(tenant, "AXI_ERRORS"))
        return word & 0xFFFF, word >> 16

    async def finish(self):
        await ClockCycles(self.dut.clk, 20)
        self._stop = True
        for w in self.watchers:
            await w
        await self.lockstep
        sb = self.scoreboard
        left = sum(len(o) for o in sb.outstanding)
        if left:
            self.errors.append(f"arbiter: {left} accepted requests never granted")
        self.dut._log.info("arbiter lockstep: %d requests accepted, %d granted, %d dropped, %d comparisons "
                           "with the golden model", sb.accepted, sb.granted, sb.dropped, sb.compared)
        for ck in self.managers:
            left = ck.unissued()
            if left:
                self.errors.append(f"{ck.name}: {len(left)} grants never issued, the first {left[0]}")
        for ck in (*self.managers, *self.tenants):
            left_r = {i: list(q) for i, q in ck.book.reads.items() if q}
            left_w = {i: k for i, k in ck.book.writes.items() if k}
            if left_r or left_w:
                self.errors.append(f"{ck.name}: left in flight at the end: reads {left_r}, writes {left_w}")
        for msg in self.errors[:20]:
            self.dut._log.error(msg)
        assert not self.errors, f"{len(self.errors)} protocol errors, first: {self.errors[0]}"

    def region(self, tenant, worker, workers):
        """Disjoint byte range of one worker: tenants split the address space, workers their slice."""
        span = (1 << self.axi.addr_width) // self.params.tenants
        size = span // workers
        return tenant * span + worker * size, size


async def _worker(tb: AxiTB, tenant: int, worker: int, workers: int, ops: int, rng: random.Random, stats):
    axi = tb.axi
    base, size = tb.region(tenant, worker, workers)
    window = min(size, 4 * 4096)
    shadow = bytearray(window)
    master = tb.masters[tenant]
    max_len = 4 * axi.interleave_bytes + axi.data_bytes
    for _ in range(ops):
        length = rng.randint(1, max_len)
        offset = rng.randrange(0, window - length + 1)
        bsize = rng.randint(0, axi.max_size)
        aid = rng.randrange(1 << axi.id_width)
        if rng.random() < 0.5:
            data = bytes(rng.randrange(256) for _ in range(length))
            r = await master.write(base + offset, data, awid=aid, size=bsize)
            assert r.resp == AxiResp.OKAY, f"tenant {tenant}: write at {base + offset:#x} answered {r.resp!r}"
            shadow[offset:offset + length] = data
            stats["writes"] += 1
            stats["bytes"] += length
        else:
            r = await master.read(base + offset, length, arid=aid, size=bsize)
            assert r.resp == AxiResp.OKAY, f"tenant {tenant}: read at {base + offset:#x} answered {r.resp!r}"
            want = bytes(shadow[offset:offset + length])
            assert r.data == want, (f"tenant {tenant} worker {worker}: read {length} B at {base + offset:#x} "
                                    f"(size {bsize}) returned {r.data[:16].hex()}..., "
                                    f"last written {want[:16].hex()}...")
            stats["reads"] += 1
            stats["bytes"] += length


#: Cycles a worker's operation may take, pauses and contention included, before the
#: test calls it a hang (a worker's operations run one after another).
HANG_CYCLES_PER_OP = 5000


async def _all_or_hang(tb, tasks, cycles):
    """Await ``tasks``; fail naming the stuck ports if they take more than ``cycles`` cycles."""
    async def _all():
        for task in tasks:
            await task
    try:
        await with_timeout(_all(), 10 * (cycles + 2000), "ns")
    except SimTimeoutError:
        stuck = [ck.name for ck in (*tb.managers, *tb.tenants)
                 if any(ck.book.reads.values()) or any(ck.book.writes.values())]
        raise AssertionError(f"hang: traffic not done after {cycles} cycles; bursts in flight on {stuck} "
                             f"(seed {tb.seed})") from None


@cocotb.test()
async def random_traffic(dut):
    """Random reads and writes of every length, size and alignment from every tenant at once."""
    tb = AxiTB(dut)
    tb.set_pauses(tb.job.get("pause", "none"))
    await tb.start()
    await tb.program()
    ops, workers = int(tb.job.get("ops", 40)), int(tb.job.get("workers", 3))
    stats = {"reads": 0, "writes": 0, "bytes": 0}
    tasks = [cocotb.start_soon(_worker(tb, t, w, workers, ops, random.Random(tb.rng.random()), stats))
             for t in range(tb.params.tenants) for w in range(workers)]
    await _all_or_hang(tb, tasks, HANG_CYCLES_PER_OP * ops)
    await tb.finish()
    issued = sum(m.ar_count + m.aw_count for m in tb.managers)
    dut._log.info("%d reads, %d writes, %d bytes; %d sub-bursts issued on the manager ports; AxQOS %s",
                  stats["reads"], stats["writes"], stats["bytes"], issued, dict(tb.qos_counts))
    assert stats["reads"] and stats["writes"]
    assert all(m.ar_count and m.aw_count for m in tb.managers), "some channel never saw a read and a write"
    if tb.params.tenants > 1:
        assert tb.qos_counts[5], "no burst grant of the guaranteed credit class (AxQOS 5) was issued"


@cocotb.test(timeout_time=200, timeout_unit="us")
async def unsupported_bursts(dut):
    """FIXED and WRAP bursts are answered SLVERR with their beats, counted, and nothing hangs."""
    tb = AxiTB(dut)
    await tb.start()
    await tb.program()
    axi = tb.axi
    m = tb.masters[0]
    beats = 4
    length = beats * axi.data_bytes
    r = await m.read(0, length, burst=AxiBurstType.FIXED)
    assert r.resp == AxiResp.SLVERR and len(r.data) == length, f"FIXED read answered {r.resp!r}, {len(r.data)} B"
    r = await m.read(0, length, burst=AxiBurstType.WRAP)
    assert r.resp == AxiResp.SLVERR, f"WRAP read answered {r.resp!r}"
    w = await m.write(0, bytes(range(length)), burst=AxiBurstType.FIXED)
    assert w.resp == AxiResp.SLVERR, f"FIXED write answered {w.resp!r}"
    # Memory untouched by the failed write, and ordinary traffic still flows.
    r = await m.read(0, length)
    assert r.resp == AxiResp.OKAY and r.data == bytes(length), f"memory changed by an unsupported write: {r.data.hex()}"
    w = await m.write(64, b"\x5a" * 8)
    assert w.resp == AxiResp.OKAY
    r = await m.read(64, 8)
    assert r.data == b"\x5a" * 8
    await ClockCycles(dut.clk, 2)
    counted = int(dut.unsupported__0.value)
    assert counted == 3, f"unsupported__0 counted {counted} bursts, 3 were sent"
    unsupported, wlast = await tb.axi_errors(0)
    assert (unsupported, wlast) == (3, 0), f"TEL[0].AXI_ERRORS reads {unsupported} unsupported, {wlast} WLAST errors"
    await tb.finish()


@cocotb.test(timeout_time=200, timeout_unit="us")
async def disabled_tenant(dut):
    """A disabled tenant's bursts are dropped by the arbiter (spec §4) and answered SLVERR."""
    tb = AxiTB(dut)
    await tb.start()
    n = tb.params.tenants
    cfg = [TenantConfig(rate=16, capacity=1 << 16, peak_rate=0xFFFF, inv_weight=256, enable=int(t != 0))
           for t in range(n)]
    await tb.program(cfg)
    length = 3 * tb.axi.interleave_bytes
    w = await tb.masters[0].write(0, b"\x11" * length)
    assert w.resp == AxiResp.SLVERR, f"disabled tenant's write answered {w.resp!r}"
    r = await tb.masters[0].read(0, length)
    assert r.resp == AxiResp.SLVERR, f"disabled tenant's read answered {r.resp!r}"
    if n > 1:
        base, _ = tb.region(1, 0, 1)
        w = await tb.masters[1].write(base, b"\x22" * length)
        r = await tb.masters[1].read(base, length)
        assert w.resp == AxiResp.OKAY and r.data == b"\x22" * length
    await tb.finish()


@cocotb.test(timeout_time=200, timeout_unit="us")
async def wrong_wlast(dut):
    """A tenant's W beats whose WLAST disagrees with AWLEN (spec §14.6) are
    counted in ``wlast_errors[t]`` and taken by AWLEN: the data lands, one B
    answers the burst, and the tenant port's checker sees exactly those beats."""
    tb = AxiTB(dut)
    await tb.start()
    await tb.program()
    axi = tb.axi
    m = tb.masters[0]
    w_channel = m.write_if.w_channel
    send = w_channel.send
    beats = 4
    flip = {1, beats + beats - 1}     # an early WLAST in burst 1, a missing one at the end of burst 2
    sent = itertools.count()

    async def send_flipping(w):
        if next(sent) in flip:
            w.wlast = not w.wlast
        await send(w)

    w_channel.send = send_flipping
    data = [bytes((17 * k + b) & 0xFF for k in range(beats * axi.data_bytes)) for b in (1, 2)]
    for b, payload in enumerate(data):
        w = await m.write(b * beats * axi.data_bytes, payload)
        assert w.resp == AxiResp.OKAY, f"burst {b} with a wrong WLAST answered {w.resp!r}"
    w_channel.send = send
    r = await m.read(0, 2 * beats * axi.data_bytes)
    assert r.data == b"".join(data), "a burst with a wrong WLAST was not written by its AWLEN"
    await ClockCycles(dut.clk, 2)
    counted = int(dut.wlast_errors__0.value)
    assert counted == len(flip), f"wlast_errors__0 counted {counted} beats, {len(flip)} were sent"
    unsupported, wlast = await tb.axi_errors(0)
    assert (unsupported, wlast) == (0, len(flip)), \
        f"TEL[0].AXI_ERRORS reads {unsupported} unsupported, {wlast} WLAST errors ({len(flip)} sent)"
    # The tenant port's checker flags the same beats (it checks the TB as well):
    # exactly those, then nothing else may be wrong.
    wlast = [e for e in tb.errors if "s_axi[0] WLAST" in e]
    assert len(wlast) == len(flip), f"the tenant port's checker saw {wlast}"
    tb.errors[:] = [e for e in tb.errors if e not in wlast]
    await tb.finish()


@cocotb.test(timeout_time=200, timeout_unit="us")
async def shared_port_bad_tenant(dut):
    """On the shared port (spec §14.9) a burst whose AxUSER names no tenant is
    answered SLVERR (a read with its beats of zeros), counted in ``bad_tenant``,
    never reaches memory, and the tenants' traffic around it is unaffected."""
    tb = AxiTB(dut)
    assert tb.axi.shared_port, "this scenario is for the shared tenant port"
    await tb.start()
    await tb.program()
    axi, n = tb.axi, tb.params.tenants
    m = tb.shared
    length = 3 * axi.interleave_bytes      # split over channels
    good = bytes((5 * k + 1) & 0xFF for k in range(length))
    w = await tb.masters[0].write(0, good)
    assert w.resp == AxiResp.OKAY
    w = await m.write(0, b"\xee" * length, user=n)
    assert w.resp == AxiResp.SLVERR, f"a write to tenant id {n} of {n} answered {w.resp!r}"
    r = await m.read(0, length, user=15)
    assert r.resp == AxiResp.SLVERR and r.data == bytes(length), f"a read to tenant id 15 answered {r.resp!r}"
    r = await tb.masters[0].read(0, length)
    assert r.resp == AxiResp.OKAY and r.data == good, "the bad tenant's write reached memory"
    await ClockCycles(dut.clk, 2)
    counted = int(dut.bad_tenant.value)
    assert counted == 2, f"bad_tenant counted {counted} bursts, 2 were sent"
    await tb.finish()


@cocotb.test(timeout_time=400, timeout_unit="us")
async def memory_errors(dut):
    """A memory error on one piece of a split burst: the write's one B carries the
    worst response of its pieces, the read's beats carry each its own, and the
    rest of the traffic is unaffected."""
    tb = AxiTB(dut)
    await tb.start()
    await tb.program()
    axi, p = tb.axi, tb.params
    assert p.channels >= 2
    unit = axi.interleave_bytes
    # Unit 1 (channel 1) fails; units 2 and 3 (channels 0 and 1 or 2, 3) are fine.
    tb.rams[1].poison = [range(unit, 2 * unit)]
    m = tb.masters[0]
    # Pieces in order: unit 1 (SLVERR), unit 2 (OKAY): the worst is SLVERR even
    # though the last piece to retire answered OKAY.
    w = await m.write(unit, bytes((k * 7) & 0xFF for k in range(2 * unit)))
    assert w.resp == AxiResp.SLVERR, f"write over a failing piece answered {w.resp!r}"
    # Pieces in order: unit 0 (OKAY), unit 1 (SLVERR): ending in the failing unit.
    w = await m.write(0, bytes(2 * unit))
    assert w.resp == AxiResp.SLVERR, f"write ending in a failing piece answered {w.resp!r}"
    w = await m.write(2 * unit, b"\x33" * unit)
    assert w.resp == AxiResp.OKAY, f"write beside the failing unit answered {w.resp!r}"
    r = await m.read(2 * unit, unit)
    assert r.resp == AxiResp.OKAY and r.data == b"\x33" * unit
    r = await m.read(unit, 2 * unit)
    assert r.resp == AxiResp.SLVERR, f"read over a failing piece answered {r.resp!r}"
    await tb.finish()


@cocotb.test(timeout_time=2000, timeout_unit="us")
async def reset_mid_traffic(dut):
    """Reset asserted while every tenant has bursts in flight on every channel
    (with pauses everywhere): afterwards the fabric takes new traffic, every read
    returns what was written after the reset, and the golden model, restarted
    with it, agrees on every grant."""
    tb = AxiTB(dut)
    tb.set_pauses("random")
    await tb.start()
    await tb.program()
    workers, ops = 2, int(tb.job.get("ops", 6))
    stats = {"reads": 0, "writes": 0, "bytes": 0}
    # Before the reset: workers 0..1 of each tenant (their memory is not checked after).
    tasks = [cocotb.start_soon(_worker(tb, t, w, 2 * workers, 1000, random.Random(tb.rng.random()), stats))
             for t in range(tb.params.tenants) for w in range(workers)]
    await ClockCycles(dut.clk, int(tb.job.get("reset_after", 400)))
    # Bursts the tenant ports accepted and have not answered: what the reset cuts off.
    in_flight = sum(sum(len(q) for q in ck.book.reads.values()) + sum(ck.book.writes.values()) + len(ck.w_order.due)
                    for ck in tb.tenants)
    await tb.reset_now(tasks)
    dut._log.info("reset with %d bursts in flight on the tenant ports, %d requests flushed from the arbiter",
                  in_flight, len(tb.flushed))
    assert in_flight, "the reset found nothing in flight: it tested nothing"
    await tb.program()
    stats = {"reads": 0, "writes": 0, "bytes": 0}
    tasks = [cocotb.start_soon(_worker(tb, t, w, 2 * workers, ops, random.Random(tb.rng.random()), stats))
             for t in range(tb.params.tenants) for w in range(workers, 2 * workers)]
    await _all_or_hang(tb, tasks, HANG_CYCLES_PER_OP * ops)
    assert stats["reads"] and stats["writes"]
    await tb.finish()
