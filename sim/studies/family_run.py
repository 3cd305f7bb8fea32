"""One run of the workload family (:mod:`kvfabric.sim.studies.family`): build
the system ``kvfabric system`` would, run it, return plain data.

Kept apart from the family's driver so that it imports nothing but the
system model and the standard library: PyPy runs it (:mod:`.pypy`), and
PyPy has no NumPy.
"""

import time

from ..hbm3 import peak_bytes_per_cycle

__all__ = ["CHUNK_CYCLES", "WAIT_PARTS", "build_system", "simulate", "merged_spans", "union_length",
           "covered_chunks", "wait_split"]

#: Where a step's last transaction waited (cycles), in this order: for and in
#: the arbiter (from the step's start to its grant), for controller room, then
#: in the controller until its last column command, split by what held it:
#: its bank's refresh (picked to refresh until tRFCpb ends), its
#: pseudo-channel's write drain (write mode), its own row commands (its first
#: precharge or activate to the column command: the bank), and the rest
#: (queued behind other requests: the controller queue); DRAM service (column
#: command to the end of data).  A step whose last transaction went to CXL:
#: all service.  A span held by both refresh and drain counts as refresh,
#: by either and by its row commands as that one.
WAIT_PARTS = ("arbiter", "admission", "queue", "bank", "write drain", "refresh", "service")

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
    channels = system.channels
    for ch in channels:
        ch.enable_waits()
    stats = [ch.stats for ch in channels]
    n_t = len(system.tenants)

    def tenant_bytes():
        return [sum(st.bytes[t] for st in stats) for t in range(n_t)]

    snapshots = []  # every tenant's bytes at the end of each chunk, over every channel
    for end in range(CHUNK_CYCLES, horizon + CHUNK_CYCLES, CHUNK_CYCLES):
        system.run(min(end, horizon))
        snapshots.append(tenant_bytes())
    total = tenant_bytes()
    spans = [ch.wait_spans() for ch in channels]
    decodes, prefills = {}, {}
    busy = []  # every prefill's job intervals, for the cycles in which some prefill had a job
    kind = {}  # channel tenant id -> "decode" or "prefill"
    for ts, t in zip(workload.tenants, system.tenants):
        kind[t.tenant_id] = ts.kind
        if ts.kind == "decode":
            lat = [lat for _, lat in t.steps]
            decodes[ts.id] = {"lat": lat, "parts": [list(p) for p in t.step_parts],
                              "waits": [wait_split(p, last, spans, channels)
                                        for p, last in zip(t.step_parts, t.step_last)],
                              "portions": [sorted(p.items()) for p in t.step_portions],
                              "bytes": total[t.tenant_id]}
        elif ts.kind == "prefill":
            jobs = [(s, e) for _, s, e in t.jobs] + ([(t.job_start, horizon)] if t.running else [])
            busy += jobs
            prefills[ts.id] = {"bytes": total[t.tenant_id], "active": sum(e - s for s, e in jobs),
                               "jobs": len(t.jobs)}
    # The channel's bytes, decodes' and prefills' apart, in the chunks wholly
    # inside some prefill's job: where the prefills' bandwidth goes.
    in_jobs = {"cycles": 0, "decodes": 0, "prefills": 0}
    previous = [0] * n_t
    for covered, now in zip(covered_chunks(busy, CHUNK_CYCLES, horizon), snapshots):
        if covered:
            in_jobs["cycles"] += CHUNK_CYCLES
            for tid, (a, b) in enumerate(zip(previous, now)):
                if kind.get(tid) in ("decode", "prefill"):
                    in_jobs[kind[tid] + "s"] += b - a
        previous = now
    result = {"cycles": horizon, "channels": len(channels), "decodes": decodes, "prefills": prefills, "prefills_busy": union_length(busy),
              "in_jobs": in_jobs,
              # A float, as before: the channel's peak is a Fraction, and the report is JSON.
              "utilisation": float(sum(total) / (horizon * len(channels) * peak_bytes_per_cycle())),
              "cpu_s": time.process_time() - t0, "wall_s": time.perf_counter() - w0}
    return (spec["draw"], spec["policy"], spec["seed"]), result


def wait_split(parts, last, spans, channels):
    """A step's :data:`WAIT_PARTS` (cycles) from its last transaction's split
    ``parts`` (arbiter, admission, controller, service: ``DecodeTenant.step_parts``),
    its last access ``last`` (``DecodeTenant.step_last``: channel, bank,
    admitted, acted, issued; None: CXL) and the channels' recorded
    ``spans`` (``Channel.wait_spans``) of refresh and write drain."""
    arbiter, admission, controller, service = parts
    if last is None:
        return [arbiter, admission, controller, 0, 0, 0, service]
    c, bank, a, acted, issued = last
    if issued <= a:
        return [arbiter, admission, controller, 0, 0, 0, service]
    held = (_clipped(spans[c]["refresh"][bank], a, issued),
            _clipped(spans[c]["drain"][channels[c].pc_of[bank]], a, issued),
            [(acted, issued)] if acted >= a else [])
    cuts = sorted({a, issued, *(x for segs in held for s in segs for x in s)})
    out = [0, 0, 0]  # refresh, drain, bank
    for lo, hi in zip(cuts, cuts[1:]):
        for i, segs in enumerate(held):
            if any(s <= lo and hi <= e for s, e in segs):
                out[i] += hi - lo
                break
    refresh, drain, bank = out
    return [arbiter, admission, controller - refresh - drain - bank, bank, drain, refresh, service]


def _clipped(segs, a, b):
    """The ``(start, end)`` spans of ``segs`` (disjoint, in order: a bank's
    refreshes, a pseudo-channel's write-mode spans) that overlap ``[a, b]``, clipped to it."""
    from bisect import bisect_left

    i = bisect_left(segs, (b,))
    out = []
    while i > 0:
        i -= 1
        s, e = segs[i]
        if e <= a:
            break
        out.append((max(s, a), min(e, b)))
    return out


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
