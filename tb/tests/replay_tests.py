"""cocotb side of ``kvfabric replay --engine icarus|verilator`` (tb/replay_engine.py).

Replays a trace through the generated Verilog with the same upstream driver
and memory side as the model engine (``model.replay.UpstreamDriver`` and
``MemorySide``, spec §8), and writes the grant log from what the RTL's ports
do.  Nothing of the golden model's arbitration is used here.

Alignment with the model engine, whose cycle 0 has the configuration active
and every bucket, tag and V at 0:

1. reset, then program the configuration over AXI4-Lite (buckets of enabled
   tenants start filling as soon as their COMMIT lands);
2. write the *trace-start marker* (``MARK_DATA`` to the unmapped address
   ``MARK_ADDR``; spec §9: ignored, OKAY) and wait for its write response;
3. the trace's cycle 0 is the second cycle after the marker's B handshake;
   just before it, every channel's ``dyn_level``/``dyn_peak`` and each
   tenant's previous-cycle enable (``cfg_enable_prev_i``) are deposited back
   to 0 (what they would be had all COMMITs landed at once; tags and V are
   still 0, no request having been seen), so the RTL starts from exactly the
   model's initial state, and an enabled tenant's buckets fill in the trace's
   cycle 0 in both (spec §6.3).  ``vcd-check`` finds the marker in the VCD the
   same way.
"""

from __future__ import annotations

import json
import logging
import os
from fractions import Fraction

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from kvfabric.model.channel import KIND_NAMES
from kvfabric.model.replay import InFlight, MemorySide, UpstreamDriver, stall_limit
from kvfabric.model.trace import LogRow, TraceRow, write_log
from kvfabric.tb import axil as regs
from kvfabric.tb.design import config_from_json, params_from_json
from kvfabric.tb.monitor import AxiPorts, ChannelPorts

MARK_ADDR, MARK_DATA, MARK_GAP = regs.MARK_ADDR, regs.MARK_DATA, regs.MARK_GAP


@cocotb.test()
async def replay(dut):
    job = json.loads(open(os.environ["KVF_JOB"]).read())
    p = params_from_json(job["params"])
    cfg = config_from_json(job["config"])
    bpc = Fraction(job["bytes_per_cycle"])
    rows = [TraceRow(*r) for r in job["rows"]]
    ports = [ChannelPorts(dut, p, c) for c in range(p.channels)]
    axi = AxiPorts(dut)
    for pt in ports:
        pt.init()
    dut.rst.value = 1
    dut.clk.value = 0
    await Timer(2, unit="ns")
    Clock(dut.clk, 10, unit="ns", impl="gpi").start(start_high=False)
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
    for m in (master.write_if, master.read_if):
        m.log.setLevel(logging.WARNING)
    await ClockCycles(dut.clk, 3)
    await FallingEdge(dut.clk)
    dut.rst.value = 0

    # Configuration, then the marker; find the marker's B handshake cycle.
    await regs.program(master, cfg)
    task = cocotb.start_soon(master.write_dword(MARK_ADDR, MARK_DATA))
    last_aw = None
    mark_b = None
    while mark_b is None:
        await ReadOnly()
        if axi.awvalid() and axi.awready():
            last_aw = axi.awaddr()
        if axi.bvalid() and axi.bready() and last_aw == MARK_ADDR:
            mark_b = True
        await FallingEdge(dut.clk)
    await task
    for _ in range(MARK_GAP - 1):
        await FallingEdge(dut.clk)
    # Now just after the falling edge of trace cycle 0: zero the buckets (and
    # the enabling edge's register), then
    # drive cycle 0 in the same slot (_replay checks the state at its ReadOnly).
    for pt in ports:
        for h in (*pt.h_level, *pt.h_peak, *pt.h_enable_prev):
            h.value = 0

    log = await _replay(dut, p, cfg, bpc, rows, ports)
    write_log(job["out"], log)
    dut._log.info("replayed %d requests", len(log))


async def _replay(dut, p, cfg, bpc, rows, ports):
    """The model engine's loop (model/replay.py) with the RTL in place of the model."""
    driver = UpstreamDriver(p, rows, bool(cfg.fcfs_bypass))
    mem = MemorySide(p.channels, bpc)
    id_mask = (1 << p.id_width) - 1
    n = p.tenants
    log: dict[int, LogRow] = {}
    in_flight = [InFlight() for _ in range(p.channels)]
    limit = stall_limit(p, cfg)
    last_progress = 0
    cycle = 0
    first = True
    if rows and rows[0].cycle > 8:
        # Check the deposit before any fast-forward (buckets then refill exactly
        # as in the model's skip()).
        for pt in ports:
            pt.set_request(None)
            pt.set_grant_ready(True)
        await ReadOnly()
        first = False
        for c, pt in enumerate(ports):
            got = [r() for r in (*pt.r_level, *pt.r_peak, *pt.r_tag)] + [pt.r_vt()]
            assert not any(got), f"channel {c}: state not zero at trace cycle 0: {got}"
        await FallingEdge(dut.clk)
        cycle = 1
    while len(log) < len(rows):
        # Fast-forward idle stretches: nothing queued anywhere, nothing in flight.
        if driver.idle() and not any(in_flight):
            nxt = driver.next_arrival()
            if nxt is not None and nxt > cycle + 8 and all(cycle >= b for b in mem.busy_until):
                for pt in ports:
                    pt.set_request(None)
                    pt.set_grant_ready(True)
                await ClockCycles(dut.clk, nxt - cycle, rising=False)
                cycle = last_progress = nxt
        full = [[bool(pt.queue_full() >> i & 1) for i in range(n)] for pt in ports]
        offers = driver.offer(cycle, full)
        ready = mem.ready(cycle)
        for c, pt in enumerate(ports):
            r = offers[c]
            pt.set_request(None if r is None else _Req(r.tenant, r.bytes, r.id & id_mask))
            pt.set_grant_ready(ready[c])
        await ReadOnly()
        if first:
            first = False
            for c, pt in enumerate(ports):
                got = [r() for r in (*pt.r_level, *pt.r_peak, *pt.r_tag)] + [pt.r_vt()]
                assert not any(got), f"channel {c}: state not zero at trace cycle 0: {got}"
        for c, pt in enumerate(ports):
            row = driver.handshake(c, offers[c] is not None and bool(pt.r_req_ready()))
            if row is not None:
                if pt.r_dropped():
                    log[row.id] = LogRow(row.id, row.cycle, None, c, row.tenant, row.bytes, "dropped")
                else:
                    in_flight[c].add(row)
                last_progress = cycle
            if ready[c] and pt.r_grant_valid():
                g = pt.lay.unpack_grant(pt.r_grant_payload())
                tenant, nbytes, gid, kind = g
                row = in_flight[c].take(_Req(tenant, nbytes, gid), id_mask, where=f"cycle {cycle} channel {c}")
                log[row.id] = LogRow(row.id, row.cycle, cycle, c, tenant, nbytes, KIND_NAMES.get(kind, str(kind)))
                mem.transfer(c, cycle, nbytes)
                last_progress = cycle
        cycle += 1
        if cycle - last_progress > limit:
            waiting = sorted(r.id for ch in in_flight for r in ch.rows())
            raise AssertionError(f"no progress for {limit} cycles at cycle {cycle}: ids {waiting[:8]} "
                                 f"never granted")
        await FallingEdge(dut.clk)
    return [log[i] for i in range(len(rows))]


class _Req:
    __slots__ = ("tenant", "bytes", "id")

    def __init__(self, tenant, nbytes, rid):
        self.tenant, self.bytes, self.id = tenant, nbytes, rid


