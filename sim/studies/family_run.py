"""One run of the workload family (:mod:`kvfabric.sim.studies.family`): build
the system ``kvfabric system`` would, run it, return plain data.

Kept apart from the family's driver so that it imports nothing but the
system model and the standard library: PyPy runs it (:mod:`.pypy`), and
PyPy has no NumPy.
"""

import time

from ..hbm3 import peak_bytes_per_cycle

__all__ = ["build_system", "simulate", "union_length"]


def build_system(contract_path, workload_path, policy, seed, cycles=None):
    """``(system, workload, contract doc)``: what ``kvfabric system`` builds
    (:func:`kvfabric.system.build_system`), at workload ``seed``;
    "decode-only" idles every prefill and runs FR-FCFS."""
    from kvfabric.system import build_system as system_of

    decode_only = policy == "decode-only"
    run = system_of(contract_path, workload_path, "frfcfs" if decode_only else policy, seed=seed, cycles=cycles,
                    idle_prefills=decode_only)
    return run.system, run.workload, run.channel_doc


def simulate(spec):
    """Run one spec of :func:`kvfabric.sim.studies.family.plan`; return ``(key, result)`` of plain data.

    ``cpu_s`` and ``wall_s`` are this process's, so a run in a PyPy child
    reports the child's time, not its parent's wait.
    """
    t0, w0 = time.process_time(), time.perf_counter()
    system, workload, _ = build_system(spec["contract"], spec["workload"], spec["policy"], spec["seed"],
                                       spec["cycles"])
    system.run(workload.cycles)
    horizon = workload.cycles
    stats = system.channel.stats
    decodes, prefills = {}, {}
    busy = []  # every prefill's job intervals, for the cycles in which some prefill had a job
    for ts, t in zip(workload.tenants, system.tenants):
        if ts.kind == "decode":
            decodes[ts.id] = {"lat": [lat for _, lat in t.steps], "parts": [list(p) for p in t.step_parts],
                              "bytes": stats.bytes[t.tenant_id]}
        elif ts.kind == "prefill":
            spans = [(s, e) for _, s, e in t.jobs] + ([(t.job_start, horizon)] if t.running else [])
            busy += spans
            prefills[ts.id] = {"bytes": stats.bytes[t.tenant_id], "active": sum(e - s for s, e in spans),
                               "jobs": len(t.jobs)}
    result = {"cycles": horizon, "decodes": decodes, "prefills": prefills, "prefills_busy": union_length(busy),
              # A float, as before: the channel's peak is a Fraction, and the report is JSON.
              "utilisation": float(sum(stats.bytes) / (horizon * peak_bytes_per_cycle())),
              "cpu_s": time.process_time() - t0, "wall_s": time.perf_counter() - w0}
    return (spec["draw"], spec["policy"], spec["seed"]), result


def union_length(spans):
    """Cycles covered by at least one of the ``(start, end)`` spans."""
    total, reach = 0, None
    for s, e in sorted(spans):
        if reach is None or s > reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total
