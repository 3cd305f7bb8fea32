"""Derived metrics of one experiment run (percentiles, utilisation, shares, latency split).

Pure functions of the raw result dicts of :mod:`sim.studies.experiments`; the
claims table, the plots and the JSON all read their numbers from here.
"""

import numpy as np

from kvfabric.model.replay import percentile

from ..hbm3 import HBM3_6400

__all__ = ["NS_PER_CYCLE", "PEAK_BYTES_PER_CYCLE", "derive", "job_rates", "pooled", "pct", "tail_split", "us",
           "shares", "isolation_error", "get", "ratio", "SPLIT_PARTS"]

NS_PER_CYCLE = HBM3_6400.tck_ps / 1000
PEAK_BYTES_PER_CYCLE = 32
#: Parts of a decode step's latency, in the order of ``DecodeTenant.step_parts``.
SPLIT_PARTS = ("arbiter", "admission", "queue", "service")


def derive(res):
    """Percentiles, utilisation, conflict rates and throughput of one run."""
    lat = np.array([lat for _, _, lat in res["steps"]], dtype=float)
    jobs = res["jobs"]
    intervals = res["prefill_busy"]
    contended = np.array([lat for _, start, lat in res["steps"]
                          if any(s <= start <= e for s, e in intervals)], dtype=float)
    acc = max(1, sum(res["accesses"]))
    total = sum(res["bytes"])
    d = {
        "steps": len(lat),
        "p50": pct(lat, 50), "p99": pct(lat, 99), "max": float(lat.max()) if len(lat) else float("nan"),
        "contended": len(contended), "contended_p50": pct(contended, 50),
        "util": total / (res["horizon"] * PEAK_BYTES_PER_CYCLE),
        "busy_util": total / max(1, res["busy_cycles"] * PEAK_BYTES_PER_CYCLE),
        "conflict": sum(res["conflicts"]) / acc,
        "inter_conflict": sum(res["inter_conflicts"]) / acc,
        "hit": sum(res["hits"]) / acc,
        "acts_per_mb": res["acts"] / max(1e-9, total / 1e6),
        "gbps": total / res["horizon"] * 1.6,
        "jobs_done": len(jobs),
    }
    rates = job_rates(res)
    d["job_gbps"] = float(np.mean(rates)) if rates else float("nan")
    d["job_cycles"] = float(np.mean([e - s for _, _, s, e in jobs])) if jobs else float("nan")
    # Where the tail comes from: the mean split of the steps at or above the p99.
    for name, value in zip(SPLIT_PARTS, tail_split(res.get("step_parts") or [], d["p99"])):
        d[f"tail_{name}"] = value
    prefill_bytes = sum(res["bytes"][tid] for tid in res["job_bytes"])
    d["prefill_gbps"] = prefill_bytes / res["horizon"] * 1.6
    return d


def tail_split(parts, p99):
    """Mean split (cycles, one value per :data:`SPLIT_PARTS`) of the steps whose
    parts add up to at least ``p99``; NaN for no such step."""
    tail = [p for p in parts if sum(p) >= p99]
    return [float(np.mean([p[i] for p in tail])) if tail else float("nan") for i in range(len(SPLIT_PARTS))]


def job_rates(res):
    """GB/s of every finished prefill job of a run (its bytes over its duration)."""
    return [res["job_bytes"][tid] / (e - s) * 1.6 for tid, _, s, e in res["jobs"] if e > s]


def pooled(runs):
    """Decode-step p99 and mean prefill job bandwidth over several runs of one
    workload (seeds): their steps and jobs taken together as one longer sample."""
    lat = np.array([lat for res in runs for _, _, lat in res["steps"]], dtype=float)
    rates = [r for res in runs for r in job_rates(res)]
    return {"runs": len(runs), "steps": len(lat), "p99": pct(lat, 99),
            "job_gbps": float(np.mean(rates)) if rates else float("nan")}


def pct(x, q):
    """The ``q``-th percentile by nearest rank, the one definition of
    :func:`kvfabric.model.replay.percentile` (replay summaries and ``kvfabric
    system`` report the same "p99"); NaN for no values."""
    return float(percentile(sorted(x), q)) if len(x) else float("nan")


def us(cycles):
    return cycles * NS_PER_CYCLE / 1000


def shares(res, skip=1):
    """Per-window share of served bytes per tenant (windows after ``skip``)."""
    rows = [r for _, r in res["timeline"][skip:-1] if sum(r)]
    return np.array([np.array(r) / sum(r) for r in rows]) if rows else np.zeros((0, len(res["bytes"])))


def isolation_error(res, target):
    """max and mean over windows of the worst tenant's |share - target| / target."""
    s = shares(res)
    if not len(s):
        return float("nan"), float("nan")
    err = np.abs(s - target).max(axis=1) / target
    return float(err.max()), float(err.mean())


def get(by, key, field):
    return by[key][field] if key in by else float("nan")


def ratio(a, b):
    return a / b if b and not np.isnan(a) and not np.isnan(b) else float("nan")
