"""cocotb side of ``python -m kvfabric.scripts.axi_bench`` (issue #40's targets
on the AXI4 top): measurements, not checks.

Two tests, each reading its job from ``KVF_AXI_JOB``
(:func:`kvfabric.tb.axi_design.run_axi_cosim`) and writing what it measured,
as JSON, to the job's ``result_file``:

``saturation``
    Every tenant's ``AxiMaster`` keeps ``outstanding`` reads and as many
    writes in flight (one worker coroutine each, a new burst as soon as the
    last one answered); an ``AxiRam`` without pauses on every manager port.
    After ``warmup`` cycles, ``cycles`` cycles are sampled at every rising
    edge (``ReadOnly``), per channel: the arbiter's grant (the AXI top's
    ``grant__<c>__valid/ready/payload``, which is the fabric instance's grant
    port), the manager port's handshakes, and the *bubbles*: cycles in which
    the grant was valid, no address was taken into the AR/AW output register
    and the manager port could have taken it (the output register of the
    grant's kind empty, or being emptied by its handshake).

``idle_latency``
    One tenant, one single-beat read (then write) at a time on an idle
    fabric: the cycle of every stage from the tenant's ARVALID (AWVALID)
    rising to the manager port's ARVALID (AWVALID), and the arbiter's own
    latency from the request accepted on the fabric's request port to the
    grant valid on its grant port.

Cycle k is the value seen in ``ReadOnly`` after rising edge k (what the DUT's
registers hold during cycle k and what the bus models drive in it), the
convention of :mod:`kvfabric.tb.axi_checks` and of spec §4's "accepted in a,
transferred in a+3".
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, Timer, with_timeout
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiMaster, AxiRam, AxiResp

from kvfabric.hw.layouts import grant_layout
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.tb import axil as regs
from kvfabric.tb.axi_design import axi_job_from_json
from kvfabric.tb.monitor import reader


def _optional(parent, *path):
    """Reader of an internal signal ``parent.a.b...``, or None where the simulator does not show it."""
    h = parent
    try:
        for name in path:
            h = getattr(h, name)
        return reader(h)
    except (AttributeError, TypeError):
        return None


def _write_bit(params, axi) -> int:
    """Bit of the grant payload that tells a write grant from a read: the
    request id is ``{tenant, write, entry}`` (spec §14.3)."""
    lay = grant_layout(params)
    return lay["id"].offset + axi.entry_bits


class BenchTB:
    """Clock, reset, register master and bus models of the AXI4 top, no checkers."""

    def __init__(self, dut):
        self.dut = dut
        self.params, self.axi, self.job = axi_job_from_json(os.environ["KVF_AXI_JOB"])
        self.seed = int(os.environ.get("KVF_SEED", "1"))
        self.rng = random.Random(self.seed)
        p, axi = self.params, self.axi
        # tb/axi_design.py names a build by axi_key, which does not name every
        # AxiParams field: make sure the Verilog is the one these parameters make.
        assert not axi.mem_clock, "the benchmark runs the single-clock AXI top"
        assert not hasattr(dut, "mem_clk"), ("this Verilog has a mem_clk port although mem_clock=False: "
                                             "a cached build of other parameters (axi_key)")
        self.masters = [AxiMaster(AxiBus.from_prefix(dut, f"s_axi__{t}_"), dut.clk, dut.rst, max_burst_len=256)
                        for t in range(p.tenants)]
        self.rams = [AxiRam(AxiBus.from_prefix(dut, f"m_axi__{c}_"), dut.clk, dut.rst, size=1 << axi.addr_width)
                     for c in range(p.channels)]
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
        for model in (*self.masters, *self.rams):
            for sub in (model.write_if, model.read_if):
                sub.log.setLevel(logging.WARNING)
        for sub in (self.axil.write_if, self.axil.read_if):
            sub.log.setLevel(logging.WARNING)

    async def start(self):
        dut = self.dut
        dut.rst.value = 1
        await Timer(2, unit="ns")
        Clock(dut.clk, 10, unit="ns").start(start_high=False)
        await ClockCycles(dut.clk, 4)
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        # Every tenant enabled, equal weights, as tb/tests/axi_tests.py programs them.
        cfg = [TenantConfig(rate=16, capacity=1 << 16, peak_rate=0xFFFF, inv_weight=256, enable=1)
               for _ in range(self.params.tenants)]
        await regs.program(self.axil, FabricConfig(cfg))
        await ClockCycles(dut.clk, 8)

    def write_result(self, result: dict):
        path = Path(self.job["result_file"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")


# --- saturation ------------------------------------------------------------------

class ChannelCounters:
    """Cycle-by-cycle counts of one channel's grant port and manager port."""

    FIELDS = ("cycles", "grant_valid", "grant_transfer", "grant_read_transfer", "grant_write_transfer",
              "ar_handshake", "aw_handshake", "w_handshake", "r_handshake", "b_handshake",
              "r_valid_not_ready", "w_valid_not_ready", "ar_valid_not_ready", "aw_valid_not_ready",
              "grant_held_by_port", "held_read_while_aw_free", "held_write_while_ar_free",
              "bubble", "bubble_w_jobs_full", "bubble_other", "bubble_ar_free",
              "grant_idle", "grant_idle_with_queued", "grant_idle_queued_past_pipeline",
              "r_held_same_tenant_beat")

    #: Cycles without a grant while a request sits in the channel (ingress
    #: register or queue) that spec §4's pipeline explains: accepted in a, in
    #: the ingress register in a+1, the queue's head in a+2, granted in a+3.
    PIPELINE_IDLE = 2

    def __init__(self, dut, params, axi, c):
        self.c = c
        g = f"grant__{c}__"
        m = f"m_axi__{c}__"
        self.gv = reader(getattr(dut, g + "valid"))
        self.gr = reader(getattr(dut, g + "ready"))
        self.gp = reader(getattr(dut, g + "payload"))
        self.write_bit = _write_bit(params, axi)
        # Tenant bits of the manager-side ID {class, tenant, entry} (spec §14.5).
        self.rid_shift, self.rid_mask = axi.entry_bits, (1 << axi.tenant_bits(params)) - 1
        self.rid = reader(getattr(dut, m + "rid"))
        self.port = {name: reader(getattr(dut, m + name))
                     for name in ("arvalid", "arready", "awvalid", "awready", "wvalid", "wready",
                                  "rvalid", "rready", "bvalid", "bready")}
        # Internal, read through the hierarchy where the simulator shows it.
        self.w_rdy = _optional(dut, f"issue_{c}", "w_jobs", "w_rdy")
        self.occupancy = [_optional(dut, "fabric", f"channel_{c}", f"occupancy__{i}") for i in range(params.tenants)]
        if any(o is None for o in self.occupancy):
            self.occupancy = None
        self.n = dict.fromkeys(self.FIELDS, 0)
        #: The first bubbles, with what the ports showed, as cycle evidence.
        self.examples: list[dict] = []
        self.idle_examples: list[dict] = []
        self.r_examples: list[dict] = []
        self.cycle = 0
        self._idle_run = 0

    def sample(self):
        """Count one cycle; returns (RVALID, RREADY, the R beat's tenant) for the
        cross-channel count of :func:`count_r_contention`."""
        n = self.n
        p = {k: r() for k, r in self.port.items()}
        gv, gr = self.gv(), self.gr()
        n["cycles"] += 1
        self.cycle += 1
        ar_hs = p["arvalid"] & p["arready"]
        aw_hs = p["awvalid"] & p["awready"]
        n["ar_handshake"] += ar_hs
        n["aw_handshake"] += aw_hs
        n["w_handshake"] += p["wvalid"] & p["wready"]
        n["r_handshake"] += p["rvalid"] & p["rready"]
        n["b_handshake"] += p["bvalid"] & p["bready"]
        n["r_valid_not_ready"] += p["rvalid"] & (1 - p["rready"])
        n["w_valid_not_ready"] += p["wvalid"] & (1 - p["wready"])
        n["ar_valid_not_ready"] += p["arvalid"] & (1 - p["arready"])
        n["aw_valid_not_ready"] += p["awvalid"] & (1 - p["awready"])
        if gv:
            n["grant_valid"] += 1
            write = (self.gp() >> self.write_bit) & 1
            if gr:
                n["grant_transfer"] += 1
                n["grant_write_transfer" if write else "grant_read_transfer"] += 1
            else:
                # Could the manager port have taken it? Its output register of
                # the grant's kind is empty or is being emptied this cycle.
                free = (aw_hs or not p["awvalid"]) if write else (ar_hs or not p["arvalid"])
                if free:
                    n["bubble"] += 1
                    w_full = (self.w_rdy() == 0) if self.w_rdy is not None else bool(write)
                    n["bubble_w_jobs_full" if write and w_full else "bubble_other"] += 1
                    # The AR register was free too: a read granted behind this write waits.
                    n["bubble_ar_free"] += bool(write and (ar_hs or not p["arvalid"]))
                    if len(self.examples) < 4:
                        self.examples.append({
                            "window_cycle": self.cycle - 1, "sim_time_ns": get_sim_time("ns"),
                            "grant": "write" if write else "read", "grant_payload": hex(self.gp()),
                            "w_jobs_w_rdy": None if self.w_rdy is None else self.w_rdy(),
                            **{k: p[k] for k in ("arvalid", "arready", "awvalid", "awready", "wvalid", "wready")}})
                else:
                    n["grant_held_by_port"] += 1
                    # Head-of-line: the other kind's register was free meanwhile.
                    if write and (ar_hs or not p["arvalid"]):
                        n["held_write_while_ar_free"] += 1
                    elif not write and (aw_hs or not p["awvalid"]):
                        n["held_read_while_aw_free"] += 1
        n["grant_idle"] += 1 - gv
        if gv or self.occupancy is None:
            self._idle_run = 0
        else:
            occ = [o() for o in self.occupancy]
            if any(occ):
                n["grant_idle_with_queued"] += 1
                self._idle_run += 1
                if self._idle_run > self.PIPELINE_IDLE:
                    n["grant_idle_queued_past_pipeline"] += 1
                    if len(self.idle_examples) < 4:
                        self.idle_examples.append({"window_cycle": self.cycle - 1,
                                                   "sim_time_ns": get_sim_time("ns"),
                                                   "idle_run": self._idle_run, "occupancy": occ})
            else:
                self._idle_run = 0
        r_tenant = (self.rid() >> self.rid_shift) & self.rid_mask if p["rvalid"] else None
        return p["rvalid"], p["rready"], r_tenant

    def result(self):
        n = dict(self.n)
        cyc = max(1, n["cycles"])
        n["address_handshakes_per_cycle"] = (n["ar_handshake"] + n["aw_handshake"]) / cyc
        n["r_utilisation"] = n["r_handshake"] / cyc
        n["w_utilisation"] = n["w_handshake"] / cyc
        n["grant_valid_fraction"] = n["grant_valid"] / cyc
        n["grant_transfers_per_cycle"] = n["grant_transfer"] / cyc
        n["internal_signals"] = {"w_jobs_w_rdy": self.w_rdy is not None,
                                 "fabric_occupancy": self.occupancy is not None}
        n["bubble_examples"] = self.examples
        n["idle_examples"] = self.idle_examples
        n["r_held_examples"] = self.r_examples
        return n


class TenantCounters:
    """Cycle-by-cycle counts of one tenant port: handshakes, and cycles in
    which the front end held a valid address or W beat (its entries full)."""

    FIELDS = ("ar_handshake", "aw_handshake", "w_handshake", "r_handshake", "b_handshake",
              "ar_valid_not_ready", "aw_valid_not_ready", "w_valid_not_ready",
              "read_entries_full", "write_entries_full")

    def __init__(self, dut, t):
        s = f"s_axi__{t}__"
        self.port = {name: reader(getattr(dut, s + name))
                     for name in ("arvalid", "arready", "awvalid", "awready", "wvalid", "wready",
                                  "rvalid", "rready", "bvalid", "bready")}
        # A piece waiting at the splitter's output: every entry of that side in use.
        self.pieces = {side: (_optional(dut, f"{side}_{t}", "splitter", "piece__valid"),
                              _optional(dut, f"{side}_{t}", "splitter", "piece__ready"))
                       for side in ("read", "write")}
        self.n = dict.fromkeys(self.FIELDS, 0)

    def sample(self):
        p = {k: r() for k, r in self.port.items()}
        n = self.n
        for side, (valid, ready) in self.pieces.items():
            if valid is not None and ready is not None and valid() and not ready():
                n[f"{side}_entries_full"] += 1
        for ch in ("ar", "aw", "w", "r", "b"):
            n[f"{ch}_handshake"] += p[f"{ch}valid"] & p[f"{ch}ready"]
        for ch in ("ar", "aw", "w"):
            n[f"{ch}_valid_not_ready"] += p[f"{ch}valid"] & (1 - p[f"{ch}ready"])


def count_r_contention(counters, samples):
    """A manager R beat held (RVALID, not RREADY) in a cycle in which another
    channel handed a beat to the same tenant: the tenant's reorder buffer has
    one write port, shared round robin among the channels (read_tracker.py)."""
    for ck, (valid, ready, tenant) in zip(counters, samples):
        if not valid or ready:
            continue
        served = [o.c for o, (v, r, t) in zip(counters, samples) if o is not ck and v and r and t == tenant]
        if served:
            ck.n["r_held_same_tenant_beat"] += 1
            if len(ck.r_examples) < 4:
                ck.r_examples.append({"window_cycle": ck.cycle - 1, "sim_time_ns": get_sim_time("ns"),
                                      "tenant": tenant, "beat_taken_from_channel": served[0]})


async def _reader_worker(tb, t, k, region, rng, stop, stats, lengths):
    master = tb.masters[t]
    base, size = region
    db = tb.axi.data_bytes
    while not stop():
        length = rng.choice(lengths)
        addr = base + rng.randrange(0, (size - length) // db + 1) * db
        r = await master.read(addr, length)
        stats["reads"] += 1
        stats["read_bytes"] += length
        if r.resp != AxiResp.OKAY:
            stats["errors"].append(f"tenant {t} read {length} B at {addr:#x}: {r.resp!r}")


async def _writer_worker(tb, t, k, region, rng, stop, stats, lengths):
    master = tb.masters[t]
    base, size = region
    db = tb.axi.data_bytes
    while not stop():
        length = rng.choice(lengths)
        addr = base + rng.randrange(0, (size - length) // db + 1) * db
        r = await master.write(addr, rng.randbytes(length))
        stats["writes"] += 1
        stats["write_bytes"] += length
        if r.resp != AxiResp.OKAY:
            stats["errors"].append(f"tenant {t} write {length} B at {addr:#x}: {r.resp!r}")


#: Burst lengths in beats of each workload.
WORKLOADS = {
    # Multi-beat bursts, most of them split into several sub-bursts.
    "bursts": [1, 2, 4, 8, 16, 32],
    # Single-beat reads and writes: one sub-burst of one beat each, so the
    # address channels, not the data channels, set the pace.
    "single": [1],
}


@cocotb.test()
async def saturation(dut):
    """Every tenant keeps ``outstanding`` reads and writes in flight; count grants,
    handshakes and bubbles per channel for ``cycles`` cycles."""
    tb = BenchTB(dut)
    p, axi, job = tb.params, tb.axi, tb.job
    warmup, cycles = int(job.get("warmup", 1000)), int(job.get("cycles", 10000))
    outstanding = int(job.get("outstanding", 8))
    workload = job.get("workload", "bursts")
    lengths = [b * axi.data_bytes for b in WORKLOADS[workload]]
    ram_queue = int(job.get("ram_queue", 0))
    if ram_queue:
        # Deeper address queues in the memory models (cocotbext-axi's default is 2),
        # so that ARREADY/AWREADY stay high and the front end sets the pace.
        for ram in tb.rams:
            ram.read_if.ar_channel.queue_occupancy_limit = ram_queue
            ram.write_if.aw_channel.queue_occupancy_limit = ram_queue
    await tb.start()
    counters = [ChannelCounters(dut, p, axi, c) for c in range(p.channels)]
    tenant_counters = [TenantCounters(dut, t) for t in range(p.tenants)]
    stats = {"reads": 0, "writes": 0, "read_bytes": 0, "write_bytes": 0, "errors": []}
    stopping = False
    stop = lambda: stopping  # noqa: E731
    span = (1 << axi.addr_width) // p.tenants
    slot = span // (2 * outstanding)
    tasks = []
    for t in range(p.tenants):
        for k in range(outstanding):
            rd = (t * span + (2 * k) * slot, slot)
            wr = (t * span + (2 * k + 1) * slot, slot)
            tasks.append(cocotb.start_soon(_reader_worker(tb, t, k, rd, random.Random(tb.rng.random()),
                                                          stop, stats, lengths)))
            tasks.append(cocotb.start_soon(_writer_worker(tb, t, k, wr, random.Random(tb.rng.random()),
                                                          stop, stats, lengths)))
    await ClockCycles(dut.clk, warmup)
    before = dict(stats, errors=None)
    wall0 = time.perf_counter()
    for _ in range(cycles):
        await RisingEdge(dut.clk)
        await ReadOnly()
        count_r_contention(counters, [ck.sample() for ck in counters])
        for tc in tenant_counters:
            tc.sample()
    wall = time.perf_counter() - wall0
    after = dict(stats, errors=None)
    await FallingEdge(dut.clk)
    stopping = True

    async def _drain():
        for task in tasks:
            await task
    await with_timeout(_drain(), 10 * (20000 + 50 * outstanding * p.tenants), "ns")
    result = {
        "workload": workload, "burst_beats": WORKLOADS[workload], "outstanding_per_direction": outstanding,
        "ram_address_queue": ram_queue or 2,
        "warmup_cycles": warmup, "cycles": cycles, "sample_wall_seconds": wall,
        "channels": [ck.result() for ck in counters],
        "tenants": [tc.n for tc in tenant_counters],
        "completed_in_window": {k: after[k] - before[k] for k in ("reads", "writes", "read_bytes", "write_bytes")},
        "completed_total": {k: stats[k] for k in ("reads", "writes", "read_bytes", "write_bytes")},
        "errors": stats["errors"][:20],
    }
    tb.write_result(result)
    dut._log.info("saturation %s: %s", workload,
                  ", ".join(f"ch{ck.c} {ck.result()['address_handshakes_per_cycle']:.3f} addr/cycle "
                            f"R {ck.result()['r_utilisation']:.3f} W {ck.result()['w_utilisation']:.3f} "
                            f"bubbles {ck.n['bubble']}" for ck in counters))
    assert not stats["errors"], stats["errors"][0]


# --- idle latency ----------------------------------------------------------------

class Recorder:
    """Per-cycle values of the signals along one tenant's path to one channel."""

    def __init__(self, dut, params, axi, tenant):
        self.dut = dut
        s = f"s_axi__{tenant}__"
        self.sig = {
            "s_arvalid": reader(getattr(dut, s + "arvalid")), "s_arready": reader(getattr(dut, s + "arready")),
            "s_awvalid": reader(getattr(dut, s + "awvalid")), "s_awready": reader(getattr(dut, s + "awready")),
            "s_wvalid": reader(getattr(dut, s + "wvalid")), "s_wready": reader(getattr(dut, s + "wready")),
            "s_rvalid": reader(getattr(dut, s + "rvalid")), "s_bvalid": reader(getattr(dut, s + "bvalid")),
        }
        for side in ("read", "write"):
            piece = _optional(dut, f"{side}_{tenant}", "splitter", "piece__valid")
            req = _optional(dut, f"{side}_{tenant}", "req__valid")
            if piece is not None:
                self.sig[f"{side}_piece_valid"] = piece
            if req is not None:
                self.sig[f"{side}_req_valid"] = req
        for c in range(params.channels):
            for name in ("req__{c}__valid", "req__{c}__ready", "grant__{c}__valid", "grant__{c}__ready",
                         "m_axi__{c}__arvalid", "m_axi__{c}__arready", "m_axi__{c}__awvalid",
                         "m_axi__{c}__awready", "m_axi__{c}__wvalid", "m_axi__{c}__rvalid"):
                self.sig[name.format(c=c)] = reader(getattr(dut, name.format(c=c)))
        self.trace: list[dict] | None = None

    async def run(self):
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            if self.trace is not None:
                self.trace.append({k: r() for k, r in self.sig.items()})


def _first(trace, start, pred):
    for i in range(start, len(trace)):
        if pred(trace[i]):
            return i
    return None


def _path(trace, kind, c):
    """Cycles of each stage of one read (``kind`` "ar") or write ("aw"), from
    the tenant's xVALID rising (cycle 0)."""
    side = "read" if kind == "ar" else "write"
    t0 = _first(trace, 0, lambda s: s[f"s_{kind}valid"])
    ev = {"tenant_valid": t0}
    if t0 is None:
        return None
    ev["tenant_handshake"] = _first(trace, t0, lambda s: s[f"s_{kind}valid"] and s[f"s_{kind}ready"])
    if f"{side}_piece_valid" in trace[0]:
        ev["splitter_piece_valid"] = _first(trace, t0, lambda s: s[f"{side}_piece_valid"])
    if kind == "aw":
        ev["tenant_w_handshake"] = _first(trace, t0, lambda s: s["s_wvalid"] and s["s_wready"])
    if f"{side}_req_valid" in trace[0]:
        ev["entry_request_valid"] = _first(trace, t0, lambda s: s[f"{side}_req_valid"])
    ev["fabric_request_valid"] = _first(trace, t0, lambda s: s[f"req__{c}__valid"])
    ev["fabric_request_accepted"] = _first(trace, t0, lambda s: s[f"req__{c}__valid"] and s[f"req__{c}__ready"])
    ev["grant_valid"] = _first(trace, t0, lambda s: s[f"grant__{c}__valid"])
    ev["grant_transfer"] = _first(trace, t0, lambda s: s[f"grant__{c}__valid"] and s[f"grant__{c}__ready"])
    ev["manager_valid"] = _first(trace, t0, lambda s: s[f"m_axi__{c}__{kind}valid"])
    ev["manager_handshake"] = _first(trace, t0, lambda s: s[f"m_axi__{c}__{kind}valid"]
                                     and s[f"m_axi__{c}__{kind}ready"])
    if kind == "aw":
        ev["manager_w_valid"] = _first(trace, t0, lambda s: s[f"m_axi__{c}__wvalid"])
    else:
        ev["manager_r_valid"] = _first(trace, t0, lambda s: s[f"m_axi__{c}__rvalid"])
    ev["tenant_response_valid"] = _first(trace, t0, lambda s: s["s_rvalid" if kind == "ar" else "s_bvalid"])
    return {k: (None if v is None else v - t0) for k, v in ev.items()}


@cocotb.test()
async def idle_latency(dut):
    """One single-beat read, then one single-beat write, at a time on an idle
    fabric, ``samples`` times over the channels in turn: every stage's cycle."""
    tb = BenchTB(dut)
    p, axi, job = tb.params, tb.axi, tb.job
    samples = int(job.get("samples", 8))
    tenant = int(job.get("tenant", 0))
    gap = int(job.get("gap", 16))
    await tb.start()
    rec = Recorder(dut, p, axi, tenant)
    cocotb.start_soon(rec.run())
    span = (1 << axi.addr_width) // p.tenants
    base = tenant * span
    out = {"tenant": tenant, "gap_cycles": gap, "reads": [], "writes": [],
           "internal_signals": sorted(k for k in rec.sig if k.startswith(("read_", "write_")))}
    for k in range(samples):
        c = k % p.channels
        # Channel c's unit, a different one for each sample; a beat's worth of bytes.
        addr = base + (k * p.channels + c) * axi.interleave_bytes + (k % 4) * axi.data_bytes
        assert (addr // axi.interleave_bytes) % p.channels == c
        for kind in ("aw", "ar"):
            await FallingEdge(dut.clk)
            rec.trace = []
            if kind == "aw":
                r = await tb.masters[tenant].write(addr, bytes((k + j) & 0xFF for j in range(axi.data_bytes)))
            else:
                r = await tb.masters[tenant].read(addr, axi.data_bytes)
            assert r.resp == AxiResp.OKAY, f"{kind} at {addr:#x} answered {r.resp!r}"
            await ClockCycles(dut.clk, gap)
            trace, rec.trace = rec.trace, None
            ev = _path(trace, kind, c)
            ev.update(channel=c, addr=addr)
            out["writes" if kind == "aw" else "reads"].append(ev)
            dut._log.info("%s ch%d: %s", kind.upper(), c, ev)
    tb.write_result(out)
