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
from pathlib import Path

from .trace_compare import first_mismatch, read_sim_log, write_model_log
from .trace_format import END, write_stimulus
from .trace_model import model_log_parallel
from .trace_tb import build_trace_tb, run_trace_tb

__all__ = ["SimResult", "CheckResult", "run_check"]


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
    stimulus_events: int
    stimulus_seconds: float
    model_seconds: float
    model_cpu_seconds: float
    model_grants: int
    model_stepped: int
    waiting_at_end: int
    max_waiting: int
    wall_seconds: float
    sims: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.mismatch is None for s in self.sims)


def run_check(params, events, sims, work_dir, *, jobs: int = 2, log=print,
              stimulus_seconds: float = 0.0) -> CheckResult:
    """Check ``events`` (a soak stimulus, ending in END) on every simulator of ``sims``
    against the model; everything is written under ``work_dir``."""
    t_start = time.monotonic()
    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    stim = work_dir / "stimulus.txt"
    nev = write_stimulus(stim, events, params.channels)
    end = next(e.cycle for e in reversed(events) if e.op == END)
    builds = {}
    for sim in sims:  # one at a time: a Verilator 8x8 build takes minutes
        builds[sim] = build_trace_tb(params, sim, log=log)
    runs, errors = {}, {}

    def simulate(sim):
        try:
            runs[sim] = run_trace_tb(builds[sim], stim, work_dir / f"{sim}.log")
        except BaseException as e:  # reported below, after the model finished
            errors[sim] = e
    threads = [threading.Thread(target=simulate, args=(s,)) for s in sims]
    for th in threads:
        th.start()
    t0 = time.monotonic()
    model = model_log_parallel(params, stim, jobs)
    model_s = time.monotonic() - t0
    write_model_log(work_dir / "model.log", model)
    log(f"[trace-check] model: {end} cycles in {model_s:.1f} s ({end / model_s:,.0f} cycles/s, "
        f"{model.cpu_seconds:.1f} CPU s in {jobs} processes, "
        f"{model.stepped:,} channel-cycles stepped, the rest skipped exactly)")
    for th in threads:
        th.join()
    if errors:
        raise next(iter(errors.values()))
    result = CheckResult(end, nev, stimulus_seconds, model_s, model.cpu_seconds, len(model.grants),
                         model.stepped,
                         model.waiting_at_end, model.max_waiting, 0.0)
    for sim in sims:
        r = runs[sim]
        actual = read_sim_log(r.log)
        mm = first_mismatch(model, actual, params.channels)
        result.sims.append(SimResult(sim, end, r.seconds, r.cpu_seconds, builds[sim].build_seconds,
                                     len(actual.grants), mm, r.log))
    result.wall_seconds = time.monotonic() - t_start
    return result
