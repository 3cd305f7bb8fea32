"""One trace-driven co-simulation check: stimulus -> simulators and model in parallel -> compare.

Why one module: ``make soak``, ``make bench`` and the tests all need the same
sequence (write the stimulus, build, run each simulator and the model at the
same time, compare the logs) and the same numbers out of it (cycles, seconds,
cycles per second, mismatches).  The simulators run as subprocesses and the
model in worker processes, so on two cores they overlap instead of adding up.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from .trace_compare import first_mismatch, read_sim_log
from .trace_format import END, write_stimulus
from .trace_model import model_log_parallel
from .trace_tb import PROGRESS_EVERY, build_trace_tb, run_trace_tb

__all__ = ["SimResult", "CheckResult", "run_check", "Differential", "differential_check", "valid_rule",
           "check_driver_rule"]


@dataclass
class SimResult:
    sim: str
    cycles: int
    seconds: float  # wall clock of the simulator's run
    cpu_seconds: float  # its CPU time
    build_seconds: float
    grants: int
    mismatch: object  # trace_compare.Mismatch or None
    log: Path

    @property
    def rate(self) -> float:
        return self.cycles / self.seconds if self.seconds else 0.0

    @property
    def cpu_rate(self) -> float:
        return self.cycles / self.cpu_seconds if self.cpu_seconds else 0.0

    @property
    def mismatches(self) -> int:
        """0 or 1: the comparison stops at the first mismatch."""
        return 0 if self.mismatch is None else 1


@dataclass
class CheckResult:
    cycles: int
    stimulus_events: int  # the program's events and its trace's rows
    stimulus_seconds: float
    model_seconds: float
    model_cpu_seconds: float
    model_grants: int
    model_stepped: int
    waiting_at_end: int
    max_waiting: int
    wall_seconds: float
    sims: list = field(default_factory=list)
    model: object = None  # trace_model.ModelRun

    @property
    def ok(self) -> bool:
        return all(s.mismatch is None for s in self.sims)


def run_check(params, events, rows, sims, work_dir, *, jobs: int = 2, log=print,
              stimulus_seconds: float = 0.0, progress_every: int = PROGRESS_EVERY) -> CheckResult:
    """Check program ``events`` (ending in END) and trace ``rows`` on every
    simulator of ``sims`` against the model; everything is written under
    ``work_dir``.  Each simulator logs its progress every ``progress_every``
    cycles (0: never)."""
    t_start = time.monotonic()
    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    stim = work_dir / "stimulus.txt"
    nev = write_stimulus(stim, events, rows, params) + len(rows)
    end = next(e.cycle for e in reversed(events) if e.op == END)
    builds = {}
    for sim in sims:  # one at a time: a Verilator 8x8 build takes minutes
        builds[sim] = build_trace_tb(params, sim, log=log)
    runs, errors = {}, {}

    def simulate(sim):
        try:
            runs[sim] = run_trace_tb(
                builds[sim], stim, work_dir / f"{sim}.log", every=progress_every or 1,
                progress=(lambda cyc, grants: log(f"[trace-check] {sim}: cycle {cyc:,} of {end:,}, "
                                                  f"{grants:,} grants")) if progress_every else None)
        except BaseException as e:  # reported below, after the model finished
            errors[sim] = e
    threads = [threading.Thread(target=simulate, args=(s,)) for s in sims]
    for th in threads:
        th.start()
    t0 = time.monotonic()
    model = model_log_parallel(params, stim, jobs)
    model_s = time.monotonic() - t0
    log(f"[trace-check] model: {end} cycles in {model_s:.1f} s ({end / model_s:,.0f} cycles/s, "
        f"{model.cpu_seconds:.1f} CPU s in {jobs} processes, "
        f"{model.stepped:,} channel-cycles stepped, the rest skipped exactly)")
    for th in threads:
        th.join()
    if errors:
        raise next(iter(errors.values()))
    result = CheckResult(end, nev, stimulus_seconds, model_s, model.cpu_seconds, len(model.grants),
                         model.stepped, model.waiting_at_end, model.max_waiting, 0.0, model=model)
    for sim in sims:
        r = runs[sim]
        actual = read_sim_log(r.log)
        mm = first_mismatch(model, actual, params.channels)
        result.sims.append(SimResult(sim, end, r.seconds, r.cpu_seconds, builds[sim].build_seconds,
                                     len(actual.grants), mm, r.log))
    result.wall_seconds = time.monotonic() - t_start
    return result


@dataclass
class Differential:
    """What :func:`differential_check` compared (every log path is kept)."""
    requests: int
    replay_logs: dict  # engine -> grant-log CSV of kvfabric replay
    replay_same: dict  # engine -> byte-identical to the model engine's CSV
    credit_check: CheckResult | None
    credit_same: dict  # simulator -> its grant-log CSV byte-identical to the model's
    max_waiting: int  # most requests waiting at once on one (channel, tenant), model engine
    credited_grants: int  # grants of the run with credits

    @property
    def ok(self) -> bool:
        return all(self.replay_same.values()) and all(self.credit_same.values())


def _max_waiting(log) -> int:
    """Most requests waiting (arrived, not granted) at once on one (channel, tenant)."""
    events = {}
    for r in log:
        if r.grant_cycle is not None:
            key = (r.channel, r.tenant)
            events.setdefault(key, []).extend([(r.arrival_cycle, 1), (r.grant_cycle, -1)])
    best = 0
    for ev in events.values():
        level = 0
        for _, d in sorted(ev, key=lambda e: (e[0], e[1])):  # a grant leaves before a same-cycle arrival
            level += d
            best = max(best, level)
    return best


def differential_check(params, config, rows, bytes_per_cycle, sims, work_dir, *,
                       credit_config=None, credit_return: float = 0.05, backpressure: float = 0.1,
                       seed: int = 0, log=print) -> Differential:
    """The engines of ``kvfabric replay`` on one trace, and the same trace with credits.

    1. ``rows`` replayed under ``config`` (spec §8's memory side: no credits) by
       the ``model`` engine and by each simulator of ``sims`` through the trace
       testbench (what ``kvfabric replay --engine <sim>`` runs without
       ``--waves``); the grant-log CSVs must be byte-identical.
    2. With ``credit_config`` (CREDITS limits and bulk priorities on): the same
       requests as a stimulus whose memory side also applies ``backpressure``
       and returns each credit class's credits with probability
       ``credit_return`` per cycle (late: a grant's credit comes back tens of
       cycles after it was selected), run by the trace model and each
       simulator (:func:`run_check`); their grant-log CSVs
       (:func:`kvfabric.model.replay.grant_log` of each port log) must be
       byte-identical too.  Spec §8's replay has no credit returns, so this
       half runs a testbench program (with the same trace).
    """
    import filecmp

    from kvfabric.model.replay import grant_log, replay_model
    from kvfabric.model.trace import write_log

    from .replay_engine import replay_rtl
    from .trace_format import Event
    from .trace_model import model_log
    from .trace_stimulus import replay_stimulus

    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    logs, same = {}, {}
    t0 = time.monotonic()
    model = replay_model(params, config, rows, bytes_per_cycle).log
    logs["model"] = work_dir / "replay-model.csv"
    write_log(logs["model"], model)
    log(f"[differential] {len(rows):,} requests: model engine {time.monotonic() - t0:.1f} s")
    for sim in sims:
        t0 = time.monotonic()
        got = replay_rtl(params, config, rows, sim, bytes_per_cycle=bytes_per_cycle,
                         work_dir=work_dir / f"replay-{sim}")
        logs[sim] = work_dir / f"replay-{sim}.csv"
        write_log(logs[sim], got)
        same[sim] = filecmp.cmp(logs["model"], logs[sim], shallow=False)
        log(f"[differential] {sim} replay {time.monotonic() - t0:.1f} s: "
            f"{'byte-identical' if same[sim] else 'DIFFERS'} ({logs[sim]})")
    result = Differential(len(rows), logs, same, None, {}, _max_waiting(model), 0)
    if credit_config is None:
        return result
    events, start = replay_stimulus(params, credit_config, bytes_per_cycle, backpressure=backpressure,
                                    credit_return=credit_return, seed=seed)
    # Long enough for every request to be granted (the model says how long).
    end = first = start + (rows[-1].cycle if rows else 0) + 1000
    while True:
        run = model_log(params, events + [Event(END, end)], rows)
        if run.waiting_at_end == 0 and not _in_flight(run, rows, credit_config, params):
            break
        if end > 64 * first:
            raise RuntimeError(f"with credits, requests are still waiting at cycle {end:,} in the "
                               f"model: credit_return {credit_return} too rare for this trace?")
        end *= 2
    events.append(Event(END, end + 100))
    check = run_check(params, events, rows, sims, work_dir / "credits", jobs=1, log=log)
    result.credit_check = check
    result.credited_grants = check.model_grants
    valid = valid_rule(params, credit_config)

    def csv_log(path, grants):
        write_log(path, grant_log(rows, [(g[0] - start, *g[1:]) for g in grants], valid,
                                  params.id_width, where=str(path))[0])
        return path
    model_csv = csv_log(work_dir / "credits" / "model.csv", check.model.grants)
    for s in check.sims:
        result.credit_same[s.sim] = s.mismatch is None and filecmp.cmp(
            model_csv, csv_log(s.log.with_suffix(".csv"), read_sim_log(s.log).grants), shallow=False)
        log(f"[differential] {s.sim} with credits: {s.cycles:,} cycles {s.seconds:.1f} s, "
            f"{s.grants:,} grants, " + ("byte-identical" if result.credit_same[s.sim] else
                                        f"DIFFERS: {s.mismatch or 'log bytes'}"))
    return result


def valid_rule(params, config):
    """``valid(row)``: the trace row is a request the arbiter serves under
    ``config`` (spec §4, the model's rule), not one it drops."""
    from kvfabric.model.channel import ChannelModel
    ch = ChannelModel(params, config)
    return lambda r: not ch.is_invalid(r.tenant, r.bytes)


def _in_flight(run, rows, config, params) -> bool:
    """Valid requests of ``rows`` the model's run has not granted yet."""
    valid = valid_rule(params, config)
    return len(run.grants) < sum(1 for r in rows if valid(r))


#: Fields of an ``I`` line of the testbench's ``+io`` log (tb/trace_tb.py).
IO_FIELDS = ("cycle", "channel", "queue_full", "valid", "payload", "grant_ready", "credit_return",
             "req_ready", "grant_valid", "grant_bytes")


def _io_lines(path):
    """``(line number, {field: value})`` of each ``I`` line of an ``+io`` log."""
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if len(parts) != 1 + len(IO_FIELDS) or parts[0] != "I":
                raise ValueError(f"{path}:{lineno}: expected 'I' and {len(IO_FIELDS)} fields "
                                 f"({' '.join(IO_FIELDS)}), got {line.strip()!r}")
            values = {}
            for name, text in zip(IO_FIELDS, parts[1:]):
                if not text.isdigit():
                    raise ValueError(f"{path}:{lineno}: {name} must be an unsigned decimal integer, "
                                     f"not {text!r}")
                values[name] = int(text)
            yield lineno, values


def check_driver_rule(params, stimulus, io_log) -> int:
    """Check the Verilog testbench's driver and memory side against the model's rule.

    ``io_log`` is what :func:`kvfabric.tb.trace_tb.run_trace_tb` (``io_log=``)
    recorded for ``stimulus``: each driven cycle's inputs of every channel and
    the RTL's outputs that the rules react to.  Here the Python rule
    (:class:`kvfabric.model.replay.ChannelDriver`, :class:`~kvfabric.model.replay.MemorySide`
    and :func:`kvfabric.tb.trace_format.draw`), with the trace's rows arriving
    at the program's TRACE cycle plus their own, is fed the same RTL outputs and
    must drive the same ``req`` (valid and payload), ``grant.ready`` and
    ``credit_return`` in every cycle; returns the number of channel-cycles
    checked, or raises AssertionError naming the first cycle, channel and
    field that differ."""
    from kvfabric.model.replay import ChannelDriver, MemorySide

    from .trace_format import END, MEMORY, MODE, RESET, SEED, WAIT, draw, read_stimulus, trace_start

    p = params
    C, n, BB = p.channels, p.tenants, p.bytes_bits
    events, rows = read_stimulus(stimulus, p)
    start = trace_start(events)
    if start is None:
        rows = []
    id_mask = (1 << p.id_width) - 1
    ri = 0  # the next trace row to arrive
    drivers = [ChannelDriver(n) for _ in range(C)]
    mem = MemorySide(C, 64)
    seed = 0
    p_idle = p_bp = p_cr = 0
    rst_until = 0
    ei = 0
    t = -1
    checked = 0
    for lineno, io in _io_lines(io_log):
        c = io["channel"]
        if io["cycle"] != t:
            if io["cycle"] < t or c != 0:
                raise AssertionError(f"{io_log}:{lineno}: cycle {io['cycle']} channel {c} out of order")
            # Every cycle up to this one: its events, and the reset cycles (not logged).
            while t < io["cycle"]:
                t += 1
                while ei < len(events) and events[ei].cycle == t and events[ei].op not in (END, WAIT):
                    e = events[ei]
                    ei += 1
                    if e.op == MODE:
                        for d in drivers:
                            d.strict = bool(e.a & 1)
                        p_idle, p_bp, p_cr = e.b, e.c, e.d
                    elif e.op == MEMORY:
                        mem.set_rate(Fraction(e.a, e.b))
                    elif e.op == SEED:
                        seed = e.a | e.b << 32
                    elif e.op == RESET:
                        rst_until = t + e.a
                while ri < len(rows) and start + rows[ri].cycle == t:
                    r = rows[ri]
                    drivers[r.channel].arrive(r.tenant, (r.bytes, r.id & id_mask))
                    ri += 1
                if t < rst_until:
                    for d in drivers:
                        d.flush()
                    mem.reset()
            if t < rst_until:
                raise AssertionError(f"{io_log}:{lineno}: cycle {t} is a reset cycle but was driven")
        d = drivers[c]
        z = draw(seed, t, c, C) if (p_idle or p_bp or p_cr) else (1 << 64) - 1
        full = [bool(io["queue_full"] >> i & 1) for i in range(n)]
        tag = d.present(full, bool(p_idle and (z & 0xFFF) < p_idle))
        expected = {"valid": int(tag >= 0),
                    "grant_ready": int(mem.ready_on(c, t, bool(p_bp and (z >> 12 & 0xFFF) < p_bp))),
                    "credit_return": sum(1 << k for k in range(3)
                                         if p_cr and (z >> (24 + 12 * k) & 0xFFF) < p_cr)}
        if tag >= 0:
            nbytes, rid = d.head(tag)
            expected["payload"] = rid << (4 + BB) | nbytes << 4 | tag
        for name, value in expected.items():
            if io[name] != value:
                raise AssertionError(f"{io_log}:{lineno}: cycle {t} channel {c}: the testbench drives "
                                     f"{name} = {io[name]}, the model's rule {value} "
                                     f"(queue_full {io['queue_full']:#x}, {d.waiting} waiting)")
        d.handshake(tag, bool(io["valid"] and io["req_ready"]))
        if io["grant_valid"] and io["grant_ready"]:
            mem.transfer(c, t, io["grant_bytes"])
        checked += 1
    return checked
