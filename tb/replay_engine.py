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

from kvfabric.model.trace import LogRow, read_log

from .design import build_for, config_to_json, params_to_json
from .runner import BUILD_ROOT, SIMS, run, waves_from_env

__all__ = ["replay_rtl", "replay_trace_tb", "match_grants"]


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
    b = build_for(params, sim)
    run(b, "kvfabric.tb.tests.replay_tests", work_dir, extra_env={"KVF_JOB": str(job)},
        vcd=Path(vcd).resolve() if waves else None, log_file=work_dir / "sim.log")
    if waves:
        print(f"VCD of the top level written to {vcd}")
    return read_log(out)


def replay_trace_tb(params, config, trace_rows, sim: str, *, bytes_per_cycle, work_dir) -> list:
    """The replay on the trace-driven testbench (tb/trace_tb.py): the grant log as
    ``model.trace.LogRow`` sorted by id, like :func:`replay_rtl`.

    Grants are matched to their requests by :func:`match_grants`.
    """
    from kvfabric.model.replay import stall_limit

    from .trace_check import valid_rule
    from .trace_compare import read_sim_log
    from .trace_format import WAIT, Event, write_stimulus
    from .trace_stimulus import replay_stimulus
    from .trace_tb import build_trace_tb, run_trace_tb

    rows = list(trace_rows)
    valid = valid_rule(params, config)
    events, start = replay_stimulus(params, config, rows, bytes_per_cycle)
    expected = sum(1 for r in rows if valid(r))
    last = max(e.cycle for e in events)
    events.append(Event(WAIT, last, expected, stall_limit(params, config)))
    work_dir = Path(work_dir)
    write_stimulus(work_dir / "stimulus.txt", events, params.channels)
    b = build_trace_tb(params, sim)
    t0 = time.monotonic()

    def progress(cycle, grants):
        if time.monotonic() - t0 < 5:  # a short replay says nothing
            return
        print(f"[replay {sim}] cycle {max(0, cycle - start):,}: {grants:,} of {expected:,} requests "
              f"granted ({time.monotonic() - t0:.0f} s)", flush=True)
    run = run_trace_tb(b, work_dir / "stimulus.txt", work_dir / "grants.log", progress=progress)
    got = read_sim_log(run.log)
    log, waiting = match_grants(rows, [(g[0] - start, *g[1:]) for g in got.grants], valid,
                                params.id_width, where=run.log)
    if got.stalled is not None or waiting:
        raise AssertionError(f"no progress for {stall_limit(params, config)} cycles at cycle "
                             f"{(got.stalled or got.end or 0) - start}: ids {waiting[:8]} never "
                             f"granted ({run.log})")
    return log


def match_grants(rows, grants, valid, id_width: int, *, where="") -> tuple[list, list]:
    """The grant log (``model.trace.LogRow`` per row, in row order) of ``grants``
    ``(cycle, channel, tenant, bytes, port id, kind)`` (cycles of the trace),
    and the ids of valid rows left without a grant.

    Port ids are row indices mod 2^id_width, which repeat once a channel has
    more than 2^id_width requests waiting; so a grant is matched to the oldest
    valid request of its (channel, tenant) not yet granted (the upstream
    driver presents a tenant's requests in row order and the arbiter's queue
    per tenant is a FIFO, spec §2, §8), and its id, bytes and cycle are
    checked against that request's (AssertionError naming the grant)."""
    from collections import deque

    from kvfabric.model.channel import KIND_NAMES

    id_mask = (1 << id_width) - 1
    candidates: dict = {}
    for r in rows:
        if valid(r):
            candidates.setdefault((r.channel, r.tenant), deque()).append(r)
    log: dict[int, LogRow] = {}
    for cycle, c, tenant, nbytes, gid, kind in grants:
        lst = candidates.get((c, tenant))
        if not lst:
            raise AssertionError(f"cycle {cycle} channel {c}: grant of tenant {tenant} "
                                 f"(id {gid}) with no request of that tenant waiting ({where})")
        row = lst.popleft()
        if (row.id & id_mask, row.bytes) != (gid, nbytes) or cycle < row.cycle:
            raise AssertionError(f"cycle {cycle} channel {c}: grant of tenant {tenant} id "
                                 f"{gid} bytes {nbytes}, but its oldest waiting request is {row} "
                                 f"({where})")
        log[row.id] = LogRow(row.id, row.cycle, cycle, c, tenant, nbytes, KIND_NAMES.get(kind, str(kind)))
    for r in rows:
        if not valid(r):
            log[r.id] = LogRow(r.id, r.cycle, None, r.channel, r.tenant, r.bytes, "dropped")
    waiting = sorted(r.id for lst in candidates.values() for r in lst)
    return [log[r.id] for r in rows if r.id in log], waiting
