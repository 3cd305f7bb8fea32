"""What a tier-model run measured: eviction rates, inter-token latency, p99 causes, shares, byte streams.

Pure functions of a :class:`~.engine.Result`.  Definitions (the report
repeats them):

* **inter-token latency (ITL)**: the time between two consecutive output
  tokens of a request (the prefill's token to the first decoded one, then
  each next); percentiles pool every gap of a class's requests, nearest rank.
* **queue wait**: arrival to admission (the model has no prefill, so this is
  the part of the time to first token the decode instance adds);
* **eviction rate**: times a request lost pages while it had all of them in
  the fast tier, per 1000 output tokens of its class (an eviction episode;
  the pages it lost are counted apart).
* **cause of a tail gap** (the slowest 1 %): a gap is the steps the request sat out (eviction: only
  missing pages keep a running request out of a step), the promotion wait of
  the step it ran in (promotion bandwidth, shared by the step's promotions)
  and that step's reads (batch: the weights and every page of the step);
  a tail gap's cause is the largest of sat-out time, promotion wait and the
  step's KV reads, the weights' fixed read set aside as no request's doing.
"""

from __future__ import annotations

import math

__all__ = ["pct", "CAUSES", "gaps", "class_stats", "tail_causes", "hbm_share", "hbm_share_longest_running", "tokens_per_s", "byte_stream"]

CAUSES = ("eviction", "promotion", "batch")


def pct(values, q):
    """Nearest-rank percentile ``q`` (0-100) of ``values``; NaN for none."""
    xs = sorted(values)
    if not xs:
        return math.nan
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)]


def _members(res, whale):
    return [r for r in res.requests if not r.rejected and (whale is None or r.whale == whale)]


def gaps(res, whale=None, ids=None):
    """Every gap of the class's requests (``whale``: True, False, None for all;
    ``ids``: only these request ids)."""
    return [g for r in _members(res, whale) if ids is None or r.rid in ids for g in r.gaps]


def class_stats(res, whale):
    """ITL p50 / p99 (ns), eviction rate, evicted pages and tokens of one class."""
    rs = _members(res, whale)
    itl = [g[0] for r in rs for g in r.gaps]
    tokens = sum(r.tokens for r in rs)
    events = sum(r.evictions for r in rs)
    return {
        "requests": len(rs),
        "rejected": sum(1 for r in res.requests if r.rejected and r.whale == whale),
        "tokens": tokens,
        "itl_p50_ns": pct(itl, 50),
        "itl_p99_ns": pct(itl, 99),
        "evictions": events,
        "evicted_pages": sum(r.evicted_pages for r in rs),
        "eviction_rate_per_1k_tokens": 1000 * events / tokens if tokens else math.nan,
        "requests_evicted": sum(1 for r in rs if r.evictions),
        "wait_p50_ns": pct([r.admitted_ns - r.arrival_ns for r in rs if r.admitted_ns >= 0], 50),
        "wait_p99_ns": pct([r.admitted_ns - r.arrival_ns for r in rs if r.admitted_ns >= 0], 99),
    }


def tail_causes(res, whale=False, q=99):
    """The class's slowest ``100 - q`` per cent of gaps (at least one), by cause.

    Returns ``{"threshold_ns", "gaps", "count": {cause: n}, "mean_ns": {cause
    or "weights": mean ns}}``; ``threshold_ns`` is the ``q``-th percentile.
    """
    gs = sorted(gaps(res, whale), key=lambda g: g[0])
    threshold = pct([g[0] for g in gs], q)
    tail = gs[len(gs) - max(1, math.ceil(len(gs) * (100 - q) / 100)):] if gs else []
    fixed = res.config.step_fixed_ns
    count = dict.fromkeys(CAUSES, 0)
    sums = dict.fromkeys((*CAUSES, "weights"), 0)
    for gap, sat, promo, compute, steps in tail:
        parts = {"eviction": sat, "promotion": promo, "batch": compute - fixed * steps}
        count[max(CAUSES, key=lambda c: (parts[c], -CAUSES.index(c)))] += 1
        for c in CAUSES:
            sums[c] += parts[c]
        sums["weights"] += fixed * steps
    n = len(tail)
    return {"threshold_ns": threshold, "gaps": n, "count": count,
            "mean_ns": {k: (v / n if n else math.nan) for k, v in sums.items()}}


def hbm_share(res, ids):
    """Share of fast-tier page-time held by requests ``ids`` over the run's
    residency samples (``simulate(..., sample_every=n)``); NaN without samples."""
    mine = total = 0
    for _, sample in res.residency:
        for rid, (resident, _) in sample.items():
            total += resident
            if rid in ids:
                mine += resident
    return mine / total if total else math.nan


def hbm_share_longest_running(res, share=0.05):
    """Mean over the residency samples of the fast-tier share held by the
    longest ``share`` (rounded up, at least one) of the requests running at
    that moment, longest by pages in both tiers; NaN without samples."""
    ratios = []
    for _, sample in res.residency:
        total = sum(resident for resident, _ in sample.values())
        if not total:
            continue
        n = max(1, math.ceil(len(sample) * share))
        longest = sorted(sample.items(), key=lambda kv: (-kv[1][1], kv[0]))[:n]
        ratios.append(sum(resident for _, (resident, _) in longest) / total)
    return sum(ratios) / len(ratios) if ratios else math.nan


def tokens_per_s(res):
    """Output tokens over the run (first arrival to last token), per second."""
    tokens = sum(r.tokens for r in res.requests if not r.rejected)
    return tokens * 1e9 / res.end_ns if res.end_ns else math.nan


def byte_stream(res, window_ns):
    """Promotion and demotion bytes per tenant in windows of ``window_ns``:
    ``{tenant: {"promote": [bytes per window], "demote": [...]}}``, every list
    as long as the run (the stream a tenant of the HBM system model carries)."""
    if window_ns < 1:
        raise ValueError(f"byte_stream window must be a positive number of ns, not {window_ns!r}")
    n = res.end_ns // window_ns + 1
    out = {}
    for kind, events in (("promote", res.promotions), ("demote", res.demotions)):
        for at, tenant, nbytes in events:
            if tenant not in out:
                out[tenant] = {"promote": [0] * n, "demote": [0] * n}
            out[tenant][kind][at // window_ns] += nbytes
    return out
