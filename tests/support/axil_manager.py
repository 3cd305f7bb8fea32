"""A cycle-by-cycle AXI4-Lite manager for the Amaranth simulator, and the simulation runner
the block tests share (tests/test_hw_regfile.py, test_hw_telemetry.py, test_hw_fabric.py)."""

import random
from collections import deque
from dataclasses import dataclass

from amaranth.sim import Simulator

from support.sim_inputs import set_all

__all__ = ["AxilManager", "READ_LATENCY", "run_sim", "seeded"]

#: Cycles from the AR handshake to RVALID (spec §9); the data are the values of
#: the cycle after the handshake (:meth:`AxilManager.sampling_read`).
READ_LATENCY = 3


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
    bvalid_at: int = None


@dataclass
class _Read:
    addr: int
    ar_at: int = None
    rvalid_at: int = None
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
        bready = self.rng.random() < self.p_ready
        if self.r is None and self.reads:
            self.r = self.reads.popleft()
        ar_valid = self.r is not None and self.r.ar_at is None
        set_all(ctx, [(port.awvalid, aw_valid), (port.awaddr, w.addr if aw_valid else 0),
                      (port.wvalid, w_valid), (port.wdata, w.data if w_valid else 0),
                      (port.wstrb, w.strb if w_valid else 0), (port.bready, bready),
                      (port.arvalid, ar_valid), (port.araddr, self.r.addr if ar_valid else 0),
                      (port.rready, self.rng.random() < self.p_ready)])

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
                if w.bvalid_at is None:
                    w.bvalid_at = cycle
                    assert cycle == w.done_at + 1, f"cycle {cycle}: BVALID not in the cycle after the write"
                assert ctx.get(port.bresp) == 0
                if ctx.get(port.bready):
                    self.w = None
        else:
            assert not ctx.get(port.bvalid), f"cycle {cycle}: BVALID without a write"
        if r is not None:
            if ctx.get(port.arvalid) and ctx.get(port.arready):
                r.ar_at = cycle
            if ctx.get(port.rvalid):
                # Spec §9: RVALID three cycles after the AR handshake (held under backpressure).
                assert r.ar_at is not None and cycle >= r.ar_at + READ_LATENCY, f"cycle {cycle}: early RVALID"
                if r.rvalid_at is None:
                    r.rvalid_at = cycle
                    assert cycle == r.ar_at + READ_LATENCY, \
                        f"cycle {cycle}: RVALID {cycle - r.ar_at} cycles after AR, not {READ_LATENCY}"
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
