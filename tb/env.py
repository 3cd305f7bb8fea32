"""The kvfabric co-simulation test bench: one object owning clock, reset, the
bus models and the checkers (the cocotbext-axi ``TB`` pattern).

Cycle discipline (one coroutine, so the order of events is fixed and the same
on every simulator): right after each falling edge the request drivers and
the memory model drive the inputs of cycle t from what they observed up to
t-1 (and the DUT's ``queue_full``, a register output); at ``ReadOnly`` the
monitor samples every port and the internal state; the scoreboard compares
and steps the golden model; drivers and memory side learn the cycle's
handshakes.  cocotbext-axi's ``AxiLiteMaster`` runs as its own coroutine on
the rising edges; the monitor sees its handshakes like any other input.

Spec §0: cycle 0 is the first cycle with reset low.  :meth:`TB.reset` lowers
reset just after a falling edge, so the next sample is cycle 0.
"""

from __future__ import annotations

import logging
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from . import axil as regs
from .drivers import Req, RequestDriver
from .memory import MemoryModel
from .monitor import AxiPorts, ChannelPorts, Monitor
from .scoreboard import Scoreboard

__all__ = ["TB", "Req", "seed_from_env"]


def seed_from_env(default: int = 1) -> int:
    """``KVF_SEED`` if set, else cocotb's random seed, else ``default``."""
    if os.environ.get("KVF_SEED"):
        return int(os.environ["KVF_SEED"])
    return int(getattr(cocotb, "RANDOM_SEED", default) or default)


class TB:
    """Test bench of one kvfabric instance.

    Parameters
    ----------
    dut : the cocotb handle of the top level.
    params : hw.params.FabricParams of the generated Verilog.
    seed : seed of every random choice (stimulus, idle insertion, backpressure).
    bytes_per_cycle : the memory side's drain rate B (spec §8).
    idle, backpressure : probabilities of an idle cycle at a driver and of an
        extra not-ready cycle at the memory side.
    credit_return : probability of each ``credit_return`` bit per cycle at
        the memory side (spec §6.6; 0 = no returns, as the replay memory side).
    check_internal : compare internal state every cycle (bucket levels, tags,
        V, occupancies).
    """

    def __init__(self, dut, params, *, seed: int, bytes_per_cycle=64, idle: float = 0.0,
                 backpressure: float = 0.0, check_internal: bool = True,
                 honour_queue_full: bool = True, credit_return: float = 0.0):
        self.dut = dut
        self.params = params
        self.seed = seed
        self.rng = random.Random(seed)
        self.log = logging.getLogger(f"cocotb.tb.{dut._name}")
        self.log.setLevel(logging.INFO)
        self.ports = [ChannelPorts(dut, params, c, internal=check_internal)
                      for c in range(params.channels)]
        self.drivers = [RequestDriver(self.ports[c], params, c, random.Random(self.rng.random()),
                                      idle=idle, honour_queue_full=honour_queue_full)
                        for c in range(params.channels)]
        self.memory = MemoryModel(self.ports, bytes_per_cycle, random.Random(self.rng.random()),
                                  backpressure=backpressure, credit_return=credit_return)
        self.monitor = Monitor(dut, params, self.ports, AxiPorts(dut))
        self.scoreboard = Scoreboard(params, seed, channels=self.ports,
                                     check_internal=check_internal, log=self.log)
        self.axil = None  # created by the first reset(), once rst is a defined 1
        self.cycle = 0          # cycles since the last reset (spec numbering)
        self.total_cycles = 0   # simulated cycles, all resets included
        self.stalls = 0         # cycles with req.valid & ~req.ready on some channel
        self.issued: dict = {}  # (channel, id) -> Req, for scenario checks
        self.on_cycle = None    # optional callback(tb) after every checked cycle
        self._between_cycles = False  # just after a falling edge, inputs of the next cycle not driven
        self._next_id = [0] * params.channels
        for p in self.ports:
            p.init()
        dut.rst.value = 1
        dut.clk.value = 0

    # ---- stimulus --------------------------------------------------------------------
    def new_id(self, channel: int) -> int:
        rid = self._next_id[channel]
        self._next_id[channel] = (rid + 1) & ((1 << self.params.id_width) - 1)
        return rid

    def request(self, cycle: int, channel: int, tenant: int, nbytes: int) -> Req:
        """Queue one request arriving at ``cycle`` (spec numbering) on ``channel``."""
        r = Req(cycle, channel, tenant, nbytes, self.new_id(channel))
        self.drivers[channel].add([r])
        self.issued[(channel, r.id)] = r
        return r

    def add(self, reqs) -> None:
        """Queue stimulus ``(cycle, channel, tenant, bytes)`` tuples sorted by cycle."""
        for cyc, ch, tenant, nbytes in reqs:
            self.request(cyc, ch, tenant, nbytes)

    def set_fcfs(self, fcfs: bool) -> None:
        for d in self.drivers:
            d.fcfs = fcfs

    def withdraw(self) -> int:
        """Withdraw all stimulus not yet accepted (end of a measured overload window),
        so that only the accepted requests remain to drain; returns how many."""
        gone = 0
        for d in self.drivers:
            for r in d.withdraw():
                self.issued.pop((r.channel, r.id), None)
                gone += 1
        return gone

    def drivers_config(self, *, idle: float) -> None:
        for d in self.drivers:
            d.idle = idle

    # ---- reset and cycles ------------------------------------------------------------
    async def reset(self, cycles: int = 3) -> None:
        """Synchronous reset for ``cycles`` edges; afterwards the next cycle is cycle 0.

        Anything accepted and not yet granted is lost to the reset and recorded
        in ``scoreboard.flushed``; stimulus not yet accepted is discarded.
        """
        if self.axil is None:
            # Let the initial values settle before the first edge, so that no bus
            # model samples an X (Icarus evaluates some logic only on a change).
            await Timer(2, unit="ns")
            # The C clock (GPI) rather than a Python coroutine toggling clk: a third
            # of the per-cycle cost on Icarus, where cocotb would pick the latter.
            Clock(self.dut.clk, 10, unit="ns", impl="gpi").start(start_high=False)
            self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(self.dut, "s_axil_"),
                                      self.dut.clk, self.dut.rst)
            # One INFO line per register access drowns the scoreboard's messages.
            for m in (self.axil.write_if, self.axil.read_if):
                m.log.setLevel(logging.WARNING)
        if not self._between_cycles:
            await FallingEdge(self.dut.clk)
        # Now just after a falling edge: reset is sampled by the next rising edge,
        # and no cycle goes by unobserved.
        self.dut.rst.value = 1
        for d in self.drivers:
            d.flush()
        for p in self.ports:
            p.set_grant_ready(False)
        await ClockCycles(self.dut.clk, cycles, rising=True)
        await FallingEdge(self.dut.clk)
        self.scoreboard.flush()
        self.scoreboard.reset()
        self.memory.reset()
        self.dut.rst.value = 0
        self.cycle = 0
        self.set_fcfs(False)
        self._between_cycles = True

    async def step(self) -> None:
        """One cycle: drive, sample, check, observe; returns after the next falling edge."""
        if not self._between_cycles:
            await FallingEdge(self.dut.clk)
        self._between_cycles = False
        t = self.cycle
        for d in self.drivers:
            d.drive(t)
        self.memory.drive(t)
        await ReadOnly()
        s = self.monitor.sample()
        transfers = self.scoreboard.step(s)
        for c, d in enumerate(self.drivers):
            if s.req_valid[c] and not s.req_ready[c]:
                self.stalls += 1
            d.observe(bool(s.req_valid[c] and s.req_ready[c]))
        for c, nbytes in transfers:
            self.memory.observe(c, t, nbytes)
        self.cycle += 1
        self.total_cycles += 1
        if self.on_cycle is not None:
            self.on_cycle(self)
        await FallingEdge(self.dut.clk)
        self._between_cycles = True

    async def run(self, cycles: int) -> None:
        for _ in range(cycles):
            await self.step()

    async def run_task(self, coro, limit: int = 100_000):
        """Run ``coro`` (e.g. AXI programming) concurrently, stepping until it is done."""
        task = cocotb.start_soon(coro)
        n = 0
        while not task.done():
            await self.step()
            n += 1
            if n > limit:
                task.cancel()
                raise AssertionError(f"task did not finish within {limit} cycles (seed {self.seed})")
        return task.result()

    def busy(self) -> bool:
        return (any(d.busy() for d in self.drivers) or self.scoreboard.in_flight() > 0
                or not self.scoreboard.model.quiescent())

    async def drain(self, limit: int = 200_000) -> None:
        """Step until every request is accepted and granted and the fabric is idle."""
        n = 0
        while self.busy():
            await self.step()
            n += 1
            if n > limit:
                sb = self.scoreboard
                raise AssertionError(
                    f"not drained after {limit} cycles at cycle {self.cycle}: "
                    f"{sum(len(d.pending) + len(d.arrivals) for d in self.drivers)} requests not "
                    f"accepted, {sb.in_flight()} in flight (seed {self.seed})")
        await self.run(4)  # served/vmin registers settle; telemetry pipeline empties

    # ---- configuration --------------------------------------------------------------
    async def program(self, config) -> None:
        """Program ``config`` over AXI while the checkers run."""
        await self.run_task(regs.program(self.axil, config))
        self.set_fcfs(bool(config.fcfs_bypass))

    async def commit_tenant(self, i: int, tenant_cfg) -> None:
        await self.run_task(regs.commit_tenant(self.axil, i, tenant_cfg))

    # ---- end of test ------------------------------------------------------------------
    async def end_checks(self) -> dict:
        """Drain, then check: all queues empty, every accepted request granted once,
        identification registers, and every telemetry counter (snapshot read over
        AXI against the model, and equal to the live counters after draining)."""
        await self.drain()
        sb = self.scoreboard
        for c, d in enumerate(self.drivers):
            assert not d.busy(), f"driver {c} still holds requests (seed {self.seed})"
        assert await self.run_task(self.axil.read_dword(regs.ID)) == regs.ID_VALUE
        assert await self.run_task(self.axil.read_dword(regs.PARAMS)) == regs.params_word(self.params)
        await self.run_task(regs.take_snapshot(self.axil, sb.mirror.config))
        await self.run(2)
        counters = await self.run_task(regs.read_telemetry(self.axil, self.params))
        live = sb.model.telemetry.live
        for i, t in enumerate(live.tenants):
            got = counters["tenants"][i]
            for name in ("bytes", "grants", "burst_grants", "slo_violations", "queue_hwm"):
                exp = getattr(t, name) & (0xFF if name == "queue_hwm" else (1 << 48) - 1)
                if got[name] != exp:
                    sb.fail(f"telemetry tenant {i} {name}", exp, got[name])
            if got["bytes_hi_upper"]:
                sb.fail(f"telemetry tenant {i} BYTES_HI[31:16]", 0, got["bytes_hi_upper"])
        for c, v in enumerate(counters["dropped"]):
            if v != live.dropped[c]:
                sb.fail("telemetry dropped", live.dropped[c], v, c)
        # EPOCH_COUNT (which periodic snapshots keep advancing during these reads)
        # was checked against the model in the very cycle it was read, like every
        # read above; so were the snapshot registers.
        sb.check_drained()
        granted_bytes = sum(t.bytes for t in live.tenants)
        self.log.info("end of test: %d cycles (%d since reset), %d accepted, %d granted (%d bytes), "
                      "%d dropped, %d flushed by reset, %d comparisons, seed %d",
                      self.total_cycles, self.cycle, sb.accepted, sb.granted, granted_bytes,
                      sb.dropped, len(sb.flushed), sb.compared, self.seed)
        return counters
