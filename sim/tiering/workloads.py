"""Workloads of the tier model: the Azure LLM inference trace 2023 and drawn whale/minnow mixes.

:func:`azure_2023` reads the repository's copy of the trace
(``sim/data/azure_llm_2023/``, its README says where it came from and under
which licence): one request per row, the service (``conv`` or ``code``) as
its tenant, its arrival relative to the segment's start.  The trace's
longest 5 % of requests (prompt plus output, over the segment) are its
whales (:func:`mark_whales`).

:func:`whale_minnow` draws a mix from :data:`RANGES` at a seed (printed by
``make tiering``): minnows and whales arrive as two Poisson streams, each
request's prompt and output drawn log-uniformly from its class's ranges.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import random
from datetime import datetime
from pathlib import Path

from .config import Request

__all__ = ["DATA", "SERVICES", "RANGES", "MIX_SEED", "azure_2023", "mark_whales", "whale_minnow",
           "without_whales", "longest_share"]

DATA = Path(__file__).resolve().parents[1] / "data" / "azure_llm_2023"
SERVICES = ("conv", "code")
#: The drawn family's default seed (printed by every run, recorded in the report).
MIX_SEED = 44

#: The drawn ranges (inclusive; prompt and output lengths log-uniform, in tokens).
RANGES = {
    "minnow_prompt": (256, 4096),
    "minnow_output": (32, 512),
    "whale_prompt": (32_768, 131_072),
    "whale_output": (64, 512),
    "minnow_rate_per_s": (16.0, 32.0),      # Poisson arrivals: about 30-60 running minnows
    "whale_rate_per_s": (0.05, 0.2),
    "duration_s": 300,                       # arrivals over this long
}


def _read(service):
    path = DATA / f"AzureLLMInferenceTrace_{service}.csv.gz"
    with gzip.open(path, "rb") as f:
        text = io.TextIOWrapper(f, encoding="utf-8")
        return [(datetime.fromisoformat(row["TIMESTAMP"][:26]), int(row["ContextTokens"]),
                 int(row["GeneratedTokens"])) for row in csv.DictReader(text)]


def azure_2023(services=SERVICES, start_s=0.0, duration_s=None, whale_share=0.05, speedup=1):
    """The trace's requests from ``start_s`` for ``duration_s`` seconds (None: to
    the end; both in trace time), services merged by arrival, the longest
    ``whale_share`` whales, arrivals ``speedup`` times closer together (the
    trace samples a whole cluster: one instance at its real rate idles).

    Requests with no output token are left out (nothing to decode).
    """
    rows = []
    for service in services:
        if service not in SERVICES:
            raise ValueError(f"Azure 2023 service must be one of {SERVICES}, not {service!r}")
        rows += [(t, p, g, service) for t, p, g in _read(service)]
    rows.sort(key=lambda x: (x[0], x[3]))
    t0 = rows[0][0]
    out = []
    for t, p, g, service in rows:
        at = (t - t0).total_seconds() - start_s
        if at < 0 or (duration_s is not None and at >= duration_s) or g < 1 or p < 1:
            continue
        out.append(Request(len(out), round(at * 1e9 / speedup), p, g, tenant=service))
    mark_whales(out, whale_share)
    return out


def mark_whales(requests, share=0.05):
    """Mark the longest ``share`` of ``requests`` (prompt + output; ties by id) as whales."""
    n = max(1, math.ceil(len(requests) * share)) if requests else 0
    order = sorted(requests, key=lambda r: (-(r.prompt + r.generated), r.rid))
    for k, r in enumerate(order):
        r.whale = k < n
    return requests


def _log_uniform(rng, lo, hi):
    return round(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def whale_minnow(seed=MIX_SEED, ranges=None, duration_s=None):
    """A drawn mix: ``(requests, drawn)``; ``drawn`` has the rates drawn at ``seed``."""
    rr = {**RANGES, **(ranges or {})}
    rng = random.Random(seed)
    duration = rr["duration_s"] if duration_s is None else duration_s
    drawn = {"seed": seed, "duration_s": duration,
             "minnow_rate_per_s": round(rng.uniform(*rr["minnow_rate_per_s"]), 3),
             "whale_rate_per_s": round(rng.uniform(*rr["whale_rate_per_s"]), 4)}
    reqs = []
    for kind in ("minnow", "whale"):
        rate = drawn[f"{kind}_rate_per_s"]
        t = rng.expovariate(rate)
        while t < duration:
            reqs.append((round(t * 1e9), _log_uniform(rng, *rr[f"{kind}_prompt"]),
                         _log_uniform(rng, *rr[f"{kind}_output"]), kind))
            t += rng.expovariate(rate)
    reqs.sort()
    out = [Request(k, at, p, g, tenant=kind + "s", whale=kind == "whale") for k, (at, p, g, kind) in enumerate(reqs)]
    drawn["requests"] = len(out)
    drawn["whales"] = sum(r.whale for r in out)
    return out, drawn


def without_whales(requests):
    """The same requests but the whales (fresh records, same ids)."""
    return [Request(r.rid, r.arrival_ns, r.prompt, r.generated, r.tenant, False) for r in requests if not r.whale]


def longest_share(requests, share=0.05):
    """The ids of the longest ``share`` of ``requests`` by final length (prompt + output)."""
    n = max(1, math.ceil(len(requests) * share)) if requests else 0
    return {r.rid for r in sorted(requests, key=lambda r: (-(r.prompt + r.generated), r.rid))[:n]}
