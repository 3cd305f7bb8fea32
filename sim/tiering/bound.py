"""A feasibility bound for issue #44's three targets, from first principles (no policy's result).

The question: can *any* batcher keep the minnows' p99 inter-token latency
within ``a`` (1.2) x their p99 without whales, ``P``, and the whales' p99
within ``b`` (1.5) x theirs under LRU, ``L``?  The engine's cost model
(a step costs the weights, ``fixed``, plus every page it reads at the fast
tier's bandwidth) answers it step by step.

Assumptions (1, 2, 4 and 6 make the bound *looser*, so that "feasible" only
says the bound cannot rule it out; 3 is a steady-state approximation and 5
the one a batcher can break, which the any-batcher verdict drops):

1. **Minnows read in full in every step they are running** (a minnow that
   sits a step out, or reads part of its token, has a gap of two steps or
   more, which only lengthens it): a step carrying minnows of ``S`` pages
   lasts at least ``T_s = fixed + c(S)``.
2. **Minnow target per step**: every step while minnows run lies inside a
   gap of each of them, so a step may last ``Tmax = a x P`` at most.  The
   whales read in what is left: ``Tmax - T_s`` per step.
3. **Whale target per token**: a whale token of ``W`` pages must have read
   them within ``D = b x L`` of its last token.  Several whales running
   together each need a token per ``D``: their pages add up (``sum W``; their
   windows taken as aligned).
4. **The most reads that fit in D** with steps of at most ``Tmax`` each
   costing ``T_s`` (steps start at the last token): ``n = floor(D / Tmax)``
   full steps and one shorter last one if it has room,
   ``R = n (Tmax - T_s) + max(0, D - n Tmax - T_s)``.  A whale step is
   *infeasible* when ``c(sum W) > R``; when ``T_s >= Tmax`` the minnows'
   gaps pass ``Tmax`` anyway, so the whales' reads cost nothing (counted
   feasible).
5. **Where and when**: the whale tokens and the minnows' load are LRU's run's
   (LRU admits with the slow tier as overflow, so the minnows run when they
   arrive): one whale step per LRU step with whales in it.  A batcher that
   delays whales to quieter moments, or holds minnows in the queue while
   whales run, is not covered.
6. **p99 slack**: the targets are on p99, so ``G - ceil(0.99 G)`` of a
   class's ``G`` gaps may pass its bound.  An infeasible step is rescued
   either by running long (each minnow in it spends one of the minnows'
   slack) or by its whale tokens being late (each spends one of the whales').
   The bound gives the rescue the fractional-knapsack best (cheapest minnow
   cost per whale token first), which no integral choice beats, and counts no
   minnow gap as already over ``Tmax``.

The workload is **infeasible with the minnows admitted as they come** when
the whale tokens left unrescued by the minnows' whole slack exceed the
whales' slack.  Without assumption 5 a batcher may hold the minnows in the
queue while whales run (their queue wait is in no target), so the bound for
*any* batcher is only that a whale step run alone, ``fixed + c(sum W)``,
fits ``D``: the workload is **infeasible for any batcher** when the whale
tokens of the steps that miss ``D`` even alone exceed the whales' slack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .policies import LRU

__all__ = ["max_reads_ns", "WhaleStep", "Recorder", "bound", "minnow_floor"]


def max_reads_ns(D, Tmax, T_s):
    """The most whale read time (ns) that fits in ``D`` with steps of at most
    ``Tmax`` that each cost ``T_s`` (assumption 4); ``math.inf`` when ``T_s >= Tmax``."""
    if T_s >= Tmax:
        return math.inf
    n = int(D // Tmax)
    return n * (Tmax - T_s) + max(0.0, D - n * Tmax - T_s)


@dataclass(frozen=True)
class WhaleStep:
    """One LRU step with whales: the minnows' pages and count, each whale's pages."""

    minnow_pages: int
    minnows: int
    whale_pages: tuple


class Recorder(LRU):
    """LRU that records every step's minnow pages and whales' pages (the bound's input).

    Its choices are LRU's: it only reads ``Request.whale``, the workload's label."""

    def __init__(self):
        self.steps = []

    def reads(self, batch, config):
        out = super().reads(batch, config)
        whales = tuple(out[r] for r in batch if r.whale)
        if whales:
            minnows = [r for r in batch if not r.whale]
            self.steps.append(WhaleStep(sum(out[r] for r in minnows), len(minnows), whales))
        return out


def _slack(gaps, q=99):
    return gaps - math.ceil(q / 100 * gaps) if gaps else 0


def bound(steps, config, P, L, minnow_gaps, whale_gaps, minnow_target=1.2, whale_target=1.5, q=99):
    """The bound's verdict on ``steps`` (:class:`WhaleStep` list) for a minnow
    no-whale p99 ``P`` and an LRU whale p99 ``L`` (ns); ``minnow_gaps`` and
    ``whale_gaps``: the classes' gap counts (their p99 slack).

    Returns a dict: ``feasible`` (minnows admitted as they come), ``feasible_any``
    (any batcher: whale steps alone within ``D``) with ``alone_late_tokens``, the step cap ``Tmax`` and deadline ``D``, whale
    steps and tokens, the infeasible ones, the rescue the minnows' slack buys,
    both slacks, and ``largest_feasible_pages`` at the median whale step's
    minnow load (the largest sum of whale pages the bound lets through there).
    """
    Tmax, D = minnow_target * P, whale_target * L
    bad = []  # (minnows, whale tokens) of each infeasible step
    for s in steps:
        T_s = config.step_fixed_ns + config.read_ns(s.minnow_pages)
        if config.read_ns(sum(s.whale_pages)) > max_reads_ns(D, Tmax, T_s):
            bad.append((s.minnows, len(s.whale_pages)))
    m_slack, w_slack = _slack(minnow_gaps, q), _slack(whale_gaps, q)
    # Fractional knapsack: spend the minnows' slack where a minnow gap rescues the most whale tokens.
    budget, rescued = m_slack, 0.0
    for minnows, tokens in sorted(bad, key=lambda x: x[0] / x[1]):
        if minnows <= budget:
            budget -= minnows
            rescued += tokens
        else:
            rescued += tokens * budget / minnows if minnows else tokens
            break
    late = sum(t for _, t in bad) - rescued
    alone_late = sum(len(s.whale_pages) for s in steps
                     if config.step_fixed_ns + config.read_ns(sum(s.whale_pages)) > D)
    loads = sorted(config.step_fixed_ns + config.read_ns(s.minnow_pages) for s in steps)
    median = loads[(len(loads) - 1) // 2] if loads else math.nan
    room = max_reads_ns(D, Tmax, median) if loads else math.nan
    largest = (math.inf if math.isinf(room) else int(room * config.hbm_bytes_per_ns // config.page_bytes)
               ) if loads else None
    return {"feasible": late <= w_slack, "feasible_any": alone_late <= w_slack, "alone_late_tokens": alone_late,
            "Tmax_ns": Tmax, "D_ns": D, "whale_steps": len(steps),
            "whale_tokens": sum(len(s.whale_pages) for s in steps), "infeasible_steps": len(bad),
            "infeasible_tokens": sum(t for _, t in bad), "rescued_tokens": rescued, "late_tokens": late,
            "minnow_slack": m_slack, "whale_slack": w_slack, "median_minnow_step_ns": median,
            "largest_feasible_pages": largest}


def minnow_floor(steps, config, P, L, minnow_gaps, whale_gaps, whale_target=1.5, q=99, hi=2.0):
    """The smallest minnow target (p99 ratio), in steps of 0.005 from 1 to ``hi``, at which
    :func:`bound` calls ``steps`` feasible with the minnows admitted as they come (None if
    none): the minnow ratio the bound's assumptions leave a batcher that admits them so.

    A scan, not a bisection: the verdict is not monotone in the target, because a step whose
    minnows alone reach the step cap reads its whales for free (assumption 4) and a higher
    cap can make it pay.  Under assumptions 3 and 5 (not conservative) this is the bound's
    figure, not a proof that no batcher does better; without assumption 5 (minnows may
    queue) the bound rules out no target above 1."""
    for k in range(200, int(round(hi * 200)) + 1):
        a = k / 200
        if bound(steps, config, P, L, minnow_gaps, whale_gaps, a, whale_target, q)["feasible"]:
            return a
    return None
