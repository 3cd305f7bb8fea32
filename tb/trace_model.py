"""The golden model's side of the trace-driven co-simulation: its grant log.

Runs :class:`kvfabric.model.channel.ChannelModel` on a program and trace of
:mod:`kvfabric.tb.trace_format` under exactly the rules the Verilog testbench
applies to the RTL (tb/trace_tb.py: upstream driver, memory side, credit
returns, AXI writes, resets), and gives what the testbench's port log would
hold if the RTL were the model.  Nothing of the RTL's run is read here: the two logs
are produced independently and compared afterwards (tb/trace_compare.py).

Why per channel: channels share only the configuration and telemetry
(telemetry is not in the log), and the configuration's timeline follows from
the stimulus alone (spec §9: a write handshaken in h is decoded in h+1 and used
from h+2), so each channel runs on its own and skips its quiescent stretches
exactly (``ChannelModel.skip``), like the model's replay engine.  A program
that turns the coordinator on (spec §13) couples the channels' rates through
their demand: then all channels run in lockstep with the model's coordinator,
every cycle stepped.  The
testbench presents AW and W together and the register file takes both at once
when idle, so each write's handshake is expected in the cycle it is presented;
the log records that cycle (``A``) and a register file that takes longer
shows up as a mismatch.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from fractions import Fraction

from kvfabric.model.channel import NO_CREDIT_RETURN, ChannelModel, Request
from kvfabric.model.coordinator import Coordinator
from kvfabric.model.replay import ChannelDriver, MemorySide
from kvfabric.model.registers import FabricConfig

from kvfabric.model.regfile import RegisterFile
from .trace_format import END, MEMORY, MODE, RESET, SEED, WAIT, WRITE, ZERO, draw, read_stimulus, trace_start

__all__ = ["StimulusError", "ModelRun", "model_log", "model_log_parallel"]

# Per-channel timeline entries (cycle, order, kind, payload); order keeps the
# stimulus order within a cycle.
_CFG = 100  # a configuration becomes active (before the step of its cycle)
_REQ = 101  # a trace row arrives


class StimulusError(ValueError):
    """The stimulus is not one the testbench runs (no END, a WAIT stimulus)."""


@dataclass
class ModelRun:
    grants: list  # (cycle, channel, tenant, bytes, id, kind)
    writes: list  # (cycle, address)
    end: int
    stepped: int  # channel-cycles stepped (the rest were skipped exactly)
    waiting_at_end: int
    max_waiting: int
    cpu_seconds: float = 0.0  # process time of the model's run(s)


def _split(events, rows, params):
    """Global timeline (resets, modes, memory, zero, configuration changes), the
    requests of each channel, the expected write log, the seed and the end."""
    mirror = RegisterFile(params)
    glob, writes = [], []
    per_channel = [[] for _ in range(params.channels)]
    start = trace_start(events)
    if start is not None:
        id_mask = (1 << params.id_width) - 1
        after = len(events)  # a cycle's arrivals come after its events, in row order
        for r in rows:
            per_channel[r.channel].append((start + r.cycle, after + r.id, _REQ,
                                           (r.tenant, r.bytes, r.id & id_mask, r.channel)))
    seed = 0
    end = wait = None
    for k, e in enumerate(events):
        op = e.op
        if op == WRITE:
            writes.append((e.cycle, e.a))
            mirror.write(e.a, e.b, e.c)
            if mirror.changed or mirror.committed:
                glob.append((e.cycle + 2, k, _CFG, (mirror.config, mirror.committed)))
        elif op == RESET:
            mirror = RegisterFile(params)
            glob.append((e.cycle, k, RESET, e.a))
        elif op in (MODE, MEMORY, ZERO):
            glob.append((e.cycle, k, op, e))
        elif op == SEED:
            seed = e.a | e.b << 32
        elif op == END:
            end = e.cycle
            break
        elif op == WAIT:
            wait = e
            break
    if wait is not None:
        raise StimulusError("WAIT stimuli (replay) are checked against the model's replay engine, "
                            "not run here")
    if end is None:
        raise StimulusError("the stimulus has no END event")
    glob.sort(key=lambda x: (x[0], x[1]))
    return glob, per_channel, writes, seed, end


def model_log(params, events, rows, channels=None) -> ModelRun:
    """The model's port log for program ``events`` (trace_format.Event) and trace
    ``rows``, of the channels in ``channels`` (default all: a subset lets
    processes share the work)."""
    glob, per_channel, writes, seed, end = _split(events, rows, params)
    if any(kind == _CFG and x[0].coord_enable for _, _, kind, x in glob):
        # The coordinator couples the channels: all of them, in lockstep
        # (a subset of ``channels`` cannot run alone).
        grants, stepped, waiting, max_waiting = _run_coordinated(params, glob, per_channel, seed, end)
        grants.sort(key=lambda g: (g[0], g[1]))
        if channels is not None:
            grants = [g for g in grants if g[1] in set(channels)]
        return ModelRun(grants, writes, end, stepped, waiting, max_waiting)
    grants = []
    stepped = waiting = max_waiting = 0
    for c in (range(params.channels) if channels is None else channels):
        g, s, w, mw = _run_channel(params, c, glob, per_channel[c], seed, end)
        grants.extend(g)
        stepped += s
        waiting += w
        max_waiting = max(max_waiting, mw)
    grants.sort(key=lambda g: (g[0], g[1]))
    return ModelRun(grants, writes, end, stepped, waiting, max_waiting)


class _ChannelRun:
    """One channel under the testbench's rules: its model, spec §8's upstream
    driver and memory side, the MODE probabilities, and what it logged."""

    def __init__(self, params, c, cfg):
        self.params = params
        self.c = c
        self.ch = ChannelModel(params, cfg)
        self.driver = ChannelDriver(params.tenants)  # spec §8's upstream driver: items (bytes, id)
        self.mem = MemorySide(1, 64)  # spec §8's memory side, B from MEMORY events
        self.p_idle = self.p_bp = self.p_cr = 0
        self.grants = []
        self.stepped = 0
        self.max_waiting = 0

    def event(self, kind, x) -> None:
        """A request, MODE or MEMORY event of this cycle."""
        if kind == _REQ:
            self.driver.arrive(x[0], (x[1], x[2]))
            if self.driver.waiting > self.max_waiting:
                self.max_waiting = self.driver.waiting
        elif kind == MODE:
            self.driver.strict = bool(x.a & 1)
            self.p_idle, self.p_bp, self.p_cr = x.b, x.c, x.d
        elif kind == MEMORY:
            self.mem.set_rate(Fraction(x.a, x.b))

    def in_reset(self) -> None:
        self.driver.flush()
        self.mem.reset()

    def step(self, t, now, seed):
        """Cycle t (``now`` the fabric's timestamp): drive, step, observe.
        Returns the request presented (or None) and the model's StepResult."""
        p_idle, p_bp, p_cr = self.p_idle, self.p_bp, self.p_cr
        z = draw(seed, t, self.c, self.params.channels) if (p_idle or p_bp or p_cr) else 0xFFFFFFFFFFFFFFFF
        tag = self.driver.present(self.ch.queue_full, p_idle and (z & 0xFFF) < p_idle)
        req = None
        if tag >= 0:
            nbytes, rid = self.driver.head(tag)
            req = Request(tag, nbytes, rid)
        ready = self.mem.ready_on(0, t, p_bp and (z >> 12 & 0xFFF) < p_bp)
        if p_cr:
            cr = (int((z >> 24 & 0xFFF) < p_cr), int((z >> 36 & 0xFFF) < p_cr),
                  int((z >> 48 & 0xFFF) < p_cr))
        else:
            cr = NO_CREDIT_RETURN
        res = self.ch.step(now, req, ready, cr)
        self.stepped += 1
        self.driver.handshake(tag, res.accepted)
        g = res.transferred
        if g is not None:
            self.grants.append((t, self.c, g.tenant, g.bytes, g.id, g.kind))
            self.mem.transfer(0, t, g.bytes)
        return req, res


def _cycle_events(timeline, ti, t):
    """The events of cycle t from position ``ti`` of ``timeline``, in
    stimulus order (none past END), and the position after them."""
    events = []
    while timeline[ti][0] == t and timeline[ti][2] != END:
        events.append(timeline[ti][2:])
        ti += 1
    return ti, events


def _run_channel(params, c, glob, mine, seed, end):
    ts_mask = (1 << params.ts_bits) - 1
    reset_cfg = FabricConfig.reset(params.tenants)
    cfg = reset_cfg
    run = _ChannelRun(params, c, cfg)
    epoch = 0  # the cycle that is the fabric's cycle 0 (after the last reset)
    rst_until = 0
    fresh = False  # a reset ended: the channel restarts from reset state
    timeline = list(heapq.merge(glob, mine, key=lambda x: (x[0], x[1])))
    timeline.append((end, 1 << 62, END, None))
    ti = 0
    t = 0
    while t < end:
        ti, events = _cycle_events(timeline, ti, t)
        zero = False
        for kind, x in events:
            if kind == _CFG:
                cfg = x[0]
                run.ch.config = cfg
            elif kind == RESET:
                rst_until = t + x
                cfg = reset_cfg
            elif kind == ZERO:
                zero = True
            else:
                run.event(kind, x)
        if t < rst_until:
            run.in_reset()
            fresh = True
            t += 1
            continue
        ch = run.ch
        if fresh:
            ch = run.ch = ChannelModel(params, cfg)
            epoch = t
            fresh = False
        if zero:
            ch.restart_buckets()
        driver, p_cr = run.driver, run.p_cr
        # Fast-forward: nothing waiting, nothing held, channel quiescent and no
        # credit return that could change an in-flight counter.
        if (not driver.waiting and ch.quiescent()
                and (p_cr == 0 or not any(ch.inflight))):
            nxt = timeline[ti][0]
            if nxt > t + 1:
                ch.skip(nxt - t)
                t = nxt
                continue
        # Inert stretches (as the model's replay engine does): nothing presented
        # (nothing waiting, or every waiting tenant's queue full, which stays so
        # without a selection), no ingress, no credit return that counts, and
        # either the grant register held by a busy memory side or no head
        # competing; ChannelModel.advance_inert is exact for them.
        if ch.ingress is None and (p_cr == 0 or not any(ch.inflight)) and driver.blocked(ch.queue_full):
            k = 0
            if ch.grant is not None:
                k = run.mem.busy_until[0] - t
            else:
                k = ch.cycles_until_competing()
                k = (end - t) if k is None else k
            k = min(k, timeline[ti][0] - t)
            if k > 1:
                ch.advance_inert((t - epoch) & ts_mask, k)
                t += k
                continue
        run.step(t, (t - epoch) & ts_mask, seed)
        t += 1
    return run.grants, run.stepped, run.driver.waiting, run.max_waiting


def _run_coordinated(params, glob, per_channel, seed, end):
    """Every channel in lockstep with the coordinator (spec §13), for a
    program that enables it: the channels' rates then depend on each other's
    demand, so no channel runs or skips alone. The order of a cycle is the
    fabric model's: a result due in it applies before the channels step, the
    acceptances count after them, and a configuration (with the tenants
    whose COMMIT it was) reaches the coordinator between cycles."""
    ts_mask = (1 << params.ts_bits) - 1
    reset_cfg = FabricConfig.reset(params.tenants)
    cfg = reset_cfg
    runs = [_ChannelRun(params, c, cfg) for c in range(params.channels)]
    coord = Coordinator(params)
    epoch = rst_until = 0
    fresh = False
    timeline = list(heapq.merge(glob, *per_channel, key=lambda x: (x[0], x[1])))
    timeline.append((end, 1 << 62, END, None))
    ti = 0

    def load():
        for run, chan_cfg in zip(runs, coord.channel_configs(cfg)):
            run.ch.config = chan_cfg

    for t in range(end):
        ti, events = _cycle_events(timeline, ti, t)
        zero = any(kind == ZERO for kind, _ in events)
        for kind, x in events:
            if kind == _CFG:
                old, cfg = cfg, x[0]
                if cfg.coord_enable or old.coord_enable:
                    coord.configure(old, cfg, x[1])
                load()
            elif kind == RESET:
                rst_until, cfg = t + x, reset_cfg
            elif kind != ZERO:
                for run in (runs[x[3]],) if kind == _REQ else runs:
                    run.event(kind, x)
        if t < rst_until:
            for run in runs:
                run.in_reset()
            fresh = True
            continue
        if fresh:
            for run in runs:
                run.ch = ChannelModel(params, cfg)
            coord = Coordinator(params)
            epoch = t
            fresh = False
        if zero:
            for run in runs:
                run.ch.restart_buckets()
        if coord.due(t):
            coord.apply()
            load()
        now = (t - epoch) & ts_mask
        for c, run in enumerate(runs):
            req, res = run.step(t, now, seed)
            if cfg.coord_enable and res.accepted and not res.dropped:
                coord.count(c, req.tenant, req.bytes, run.ch.queue_full()[req.tenant])
        if cfg.coord_enable:
            coord.end_cycle(t, cfg)
    grants = [g for run in runs for g in run.grants]
    return (grants, sum(run.stepped for run in runs), sum(run.driver.waiting for run in runs),
            max(run.max_waiting for run in runs))


def _worker(params, stimulus_path, channels):
    t0 = time.process_time()
    run = model_log(params, *read_stimulus(stimulus_path, params), channels)
    run.cpu_seconds = time.process_time() - t0
    return run


def model_log_parallel(params, stimulus_path, jobs: int) -> ModelRun:
    """:func:`model_log` of a stimulus file with the channels shared by ``jobs``
    processes (each reads the file itself, so no event crosses a pipe)."""
    if jobs <= 1 or params.channels == 1:
        return _worker(params, stimulus_path, None)
    from concurrent.futures import ProcessPoolExecutor
    groups = [list(range(k, params.channels, jobs)) for k in range(min(jobs, params.channels))]
    with ProcessPoolExecutor(len(groups)) as pool:
        runs = list(pool.map(_worker, [params] * len(groups), [stimulus_path] * len(groups), groups))
    grants = sorted((g for r in runs for g in r.grants), key=lambda g: (g[0], g[1]))
    return ModelRun(grants, runs[0].writes, runs[0].end, sum(r.stepped for r in runs),
                    sum(r.waiting_at_end for r in runs), max(r.max_waiting for r in runs),
                    sum(r.cpu_seconds for r in runs))
