"""One run of the workload family (:mod:`kvfabric.sim.studies.family`): build
the system ``kvfabric system`` would, run it, return plain data.

Kept apart from the family's driver so that it imports nothing but the
system model and the standard library: PyPy runs it (:mod:`.pypy`), and
PyPy has no NumPy.
"""

import time

from ..hbm3 import peak_bytes_per_cycle

__all__ = ["CHUNK_CYCLES", "build_system", "simulate", "merged_spans", "union_length", "covered_chunks"]

#: Granularity of the bytes counted in the cycles in which a prefill had a job
#: (``in_jobs``): the run stops every this many memory cycles to read the
#: channel's byte counters (stopping and resuming changes nothing it
#: simulates, tests/test_sim_family.py).
CHUNK_CYCLES = 10_000


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
    horizon = workload.cycles
    stats = system.channel.stats
    snapshots = []  # every tenant's bytes at the end of each chunk
    for end in range(CHUNK_CYCLES, horizon + CHUNK_CYCLES, CHUNK_CYCLES):
        system.run(min(end, horizon))
        snapshots.append(list(stats.bytes))
    decodes, prefills = {}, {}
    busy = []  # every prefill's job intervals, for the cycles in which some prefill had a job
    kind = {}  # channel tenant id -> "decode" or "prefill"
    for ts, t in zip(workload.tenants, system.tenants):
        kind[t.tenant_id] = ts.kind
        if ts.kind == "decode":
            decodes[ts.id] = {"lat": [lat for _, lat in t.steps], "parts": [list(p) for p in t.step_parts],
                              "bytes": stats.bytes[t.tenant_id]}
        elif ts.kind == "prefill":
            spans = [(s, e) for _, s, e in t.jobs] + ([(t.job_start, horizon)] if t.running else [])
            busy += spans
            prefills[ts.id] = {"bytes": stats.bytes[t.tenant_id], "active": sum(e - s for s, e in spans),
                               "jobs": len(t.jobs)}
    # The channel's bytes, decodes' and prefills' apart, in the chunks wholly
    # inside some prefill's job: where the prefills' bandwidth goes.
    in_jobs = {"cycles": 0, "decodes": 0, "prefills": 0}
    previous = [0] * len(stats.bytes)
    for covered, now in zip(covered_chunks(busy, CHUNK_CYCLES, horizon), snapshots):
        if covered:
            in_jobs["cycles"] += CHUNK_CYCLES
            for tid, (a, b) in enumerate(zip(previous, now)):
                if kind.get(tid) in ("decode", "prefill"):
                    in_jobs[kind[tid] + "s"] += b - a
        previous = now
    result = {"cycles": horizon, "decodes": decodes, "prefills": prefills, "prefills_busy": union_length(busy),
              "in_jobs": in_jobs,
              # A float, as before: the channel's peak is a Fraction, and the report is JSON.
              "utilisation": float(sum(stats.bytes) / (horizon * peak_bytes_per_cycle())),
              "cpu_s": time.process_time() - t0, "wall_s": time.perf_counter() - w0}
    return (spec["draw"], spec["policy"], spec["seed"]), result


def merged_spans(spans):
    """The union of the ``(start, end)`` spans as disjoint ``[start, end]``
    lists in order (spans that touch or overlap are one)."""
    merged = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def union_length(spans):
    """Cycles covered by at least one of the ``(start, end)`` spans."""
    return sum(e - s for s, e in merged_spans(spans))


def covered_chunks(spans, chunk, horizon):
    """For each chunk ``[i * chunk, (i + 1) * chunk)`` that ends by ``horizon``
    (a last, shorter chunk is never covered), whether the union of the
    ``(start, end)`` spans covers it whole."""
    merged = merged_spans(spans)
    out, j = [], 0
    for i in range(-(-horizon // chunk)):
        a, b = i * chunk, (i + 1) * chunk
        while j < len(merged) and merged[j][1] < b:
            j += 1
        out.append(b <= horizon and j < len(merged) and merged[j][0] <= a)
    return out
