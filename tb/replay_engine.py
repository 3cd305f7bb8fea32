"""``kvfabric replay --engine icarus|verilator``: a trace through the generated Verilog.

:func:`replay_rtl` builds (once, cached) the Verilog of the contract's
parameters for the chosen simulator and runs ``tb/tests/replay_tests.py``,
which drives the trace with the model engine's own upstream driver and memory
side and logs what the RTL's grant ports do.  For the same trace and
configuration the grant log is byte-identical to ``--engine model``'s (checked
by ``tests/test_cosim_replay.py``).

Without waves the replay takes the trace-driven path instead
(:func:`replay_trace_tb`): the plain-Verilog testbench of tb/trace_tb.py runs
the same driver and memory-side rules (spec §8) with no Python per cycle,
tens of times faster; with waves it takes the cocotb path above, whose VCD
``kvfabric vcd-check`` knows how to read.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from kvfabric.model.trace import read_log

from .design import build_for, config_to_json, params_to_json
from .runner import BUILD_ROOT, SIMS, run, waves_from_env

__all__ = ["replay_rtl", "replay_trace_tb"]


def replay_rtl(params, config, trace_rows, sim: str, *, bytes_per_cycle=None, waves: bool = False,
               vcd: str | Path | None = None, work_dir: str | Path | None = None):
    """Replay ``trace_rows`` (``model.trace.TraceRow``) through the RTL under ``sim``.

    Returns the grant log (``model.trace.LogRow`` sorted by id).  ``waves``
    dumps a VCD of the top level to ``vcd`` (default ``dump.vcd`` in the current
    directory), which ``kvfabric vcd-check`` reads back.  The simulator's log
    and results go to ``work_dir`` (default: a fresh directory under
    ``build/cocotb/replay/``).
    """
    if sim not in SIMS:
        raise ValueError(f"engine must be one of {SIMS}, not {sim!r}")
    if bytes_per_cycle is None:
        raise ValueError("bytes_per_cycle (the memory side's B, spec §8) is required")
    if work_dir is None:
        root = BUILD_ROOT / "replay"
        root.mkdir(parents=True, exist_ok=True)
        work_dir = tempfile.mkdtemp(prefix=f"{sim}-{time.strftime('%Y%m%d-%H%M%S')}-", dir=root)
    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    waves = waves or waves_from_env()
    if not waves:
        return replay_trace_tb(params, config, trace_rows, sim, bytes_per_cycle=bytes_per_cycle,
                               work_dir=work_dir)
    if waves and vcd is None:
        vcd = Path("dump.vcd")
    out = work_dir / "grants.csv"
    job = work_dir / "job.json"
    job.write_text(json.dumps({
        "params": params_to_json(params),
        "config": config_to_json(config),
        "bytes_per_cycle": str(Fraction(bytes_per_cycle)),
        "rows": [[r.id, r.cycle, r.channel, r.tenant, r.bytes] for r in trace_rows],
        "out": str(out),
    }))
    b = build_for(params, sim, waves=waves)
    run(b, "kvfabric.tb.tests.replay_tests", work_dir, extra_env={"KVF_JOB": str(job)},
        vcd=Path(vcd).resolve() if waves else None, log_file=work_dir / "sim.log")
    if waves:
        print(f"VCD of the top level written to {vcd}")
    return read_log(out)


def replay_trace_tb(params, config, trace_rows, sim: str, *, bytes_per_cycle, work_dir) -> list:
    """The replay on the trace-driven testbench (tb/trace_tb.py): the grant log as
    ``model.trace.LogRow`` sorted by id, like :func:`replay_rtl`.

    The testbench's grants become the grant log by
    :func:`kvfabric.model.replay.grant_log`.
    """
    from kvfabric.model.replay import grant_log, stall_limit

    from .trace_check import valid_rule
    from .trace_compare import read_sim_log
    from .trace_format import WAIT, Event, write_stimulus
    from .trace_stimulus import replay_stimulus
    from .trace_tb import build_trace_tb, run_trace_tb

    rows = list(trace_rows)
    valid = valid_rule(params, config)
    events, start = replay_stimulus(params, config, bytes_per_cycle)
    expected = sum(1 for r in rows if valid(r))
    last = start + max((r.cycle for r in rows), default=0)
    events.append(Event(WAIT, last, expected, stall_limit(params, config)))
    work_dir = Path(work_dir)
    write_stimulus(work_dir / "stimulus.txt", events, rows, params)
    b = build_trace_tb(params, sim)
    t0 = time.monotonic()

    def progress(cycle, grants):
        if time.monotonic() - t0 < 5:  # a short replay says nothing
            return
        print(f"[replay {sim}] cycle {max(0, cycle - start):,}: {grants:,} of {expected:,} requests "
              f"granted ({time.monotonic() - t0:.0f} s)", flush=True)
    run = run_trace_tb(b, work_dir / "stimulus.txt", work_dir / "grants.log", progress=progress)
    got = read_sim_log(run.log)
    log, waiting = grant_log(rows, [(g[0] - start, *g[1:]) for g in got.grants], valid,
                             params.id_width, where=str(run.log))
    if got.stalled is not None or waiting:
        raise AssertionError(f"no progress for {stall_limit(params, config)} cycles at cycle "
                             f"{(got.stalled or got.end or 0) - start}: ids {waiting[:8]} never "
                             f"granted ({run.log})")
    return log
