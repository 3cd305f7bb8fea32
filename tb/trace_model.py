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
exactly (``ChannelModel.skip``), like the model's replay engine.  The
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
                                           (r.tenant, r.bytes, r.id & id_mask)))
    seed = 0
    end = wait = None
    for k, e in enumerate(events):
        op = e.op
        if op == WRITE:
            writes.append((e.cycle, e.a))
            mirror.write(e.a, e.b, e.c)
            if mirror.changed:
                glob.append((e.cycle + 2, k, _CFG, mirror.config))
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


def _run_channel(params, c, glob, mine, seed, end):
    n = params.tenants
    channels = params.channels
    ts_mask = (1 << params.ts_bits) - 1
    reset_cfg = FabricConfig.reset(n)
    cfg = reset_cfg
    ch = ChannelModel(params, cfg)
    epoch = 0  # the cycle that is the fabric's cycle 0 (after the last reset)
    rst_until = 0
    fresh = False  # a reset ended: the channel restarts from reset state
    driver = ChannelDriver(n)  # spec §8's upstream driver: items (bytes, id)
    mem = MemorySide(1, 64)  # spec §8's memory side, B from MEMORY events
    max_waiting = 0
    p_idle = p_bp = p_cr = 0
    grants = []
    stepped = 0
    timeline = list(heapq.merge(glob, mine, key=lambda x: (x[0], x[1])))
    timeline.append((end, 1 << 62, END, None))
    ti = 0
    t = 0
    while t < end:
        # Events of cycle t, in stimulus order.
        zero = False
        while timeline[ti][0] == t:
            _, _, kind, x = timeline[ti]
            ti += 1
            if kind == _REQ:
                driver.arrive(x[0], (x[1], x[2]))
                if driver.waiting > max_waiting:
                    max_waiting = driver.waiting
            elif kind == _CFG:
                cfg = x
                ch.config = cfg
            elif kind == RESET:
                rst_until = t + x
                cfg = reset_cfg
            elif kind == MODE:
                driver.strict = bool(x.a & 1)
                p_idle, p_bp, p_cr = x.b, x.c, x.d
            elif kind == MEMORY:
                mem.set_rate(Fraction(x.a, x.b))
            elif kind == ZERO:
                zero = True
            elif kind == END:
                break
        if t < rst_until:
            driver.flush()
            mem.reset()
            fresh = True
            t += 1
            continue
        if fresh:
            ch = ChannelModel(params, cfg)
            epoch = t
            fresh = False
        if zero:
            ch.restart_buckets()
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
                k = mem.busy_until[0] - t
            else:
                k = ch.cycles_until_competing()
                k = (end - t) if k is None else k
            k = min(k, timeline[ti][0] - t)
            if k > 1:
                ch.advance_inert((t - epoch) & ts_mask, k)
                t += k
                continue
        z = draw(seed, t, c, channels) if (p_idle or p_bp or p_cr) else 0xFFFFFFFFFFFFFFFF
        tag = driver.present(ch.queue_full, p_idle and (z & 0xFFF) < p_idle)
        req = None
        if tag >= 0:
            nbytes, rid = driver.head(tag)
            req = Request(tag, nbytes, rid)
        ready = mem.ready_on(0, t, p_bp and (z >> 12 & 0xFFF) < p_bp)
        if p_cr:
            cr = (int((z >> 24 & 0xFFF) < p_cr), int((z >> 36 & 0xFFF) < p_cr),
                  int((z >> 48 & 0xFFF) < p_cr))
        else:
            cr = NO_CREDIT_RETURN
        res = ch.step((t - epoch) & ts_mask, req, ready, cr)
        stepped += 1
        driver.handshake(tag, res.accepted)
        g = res.transferred
        if g is not None:
            grants.append((t, c, g.tenant, g.bytes, g.id, g.kind))
            mem.transfer(0, t, g.bytes)
        t += 1
    return grants, stepped, driver.waiting, max_waiting


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
