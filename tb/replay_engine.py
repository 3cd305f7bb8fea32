"""``kvfabric replay --engine icarus|verilator``: a trace through the generated Verilog.

:func:`replay_rtl` builds (once, cached) the Verilog of the contract's
parameters for the chosen simulator and runs ``tb/tests/replay_tests.py``,
which drives the trace with the model engine's own upstream driver and memory
side and logs what the RTL's grant ports do.  For the same trace and
configuration the grant log is byte-identical to ``--engine model``'s (checked
by ``tests/test_cosim_replay.py``).
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

__all__ = ["replay_rtl"]


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
