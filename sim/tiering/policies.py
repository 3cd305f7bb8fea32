"""Eviction policies of the fast tier, behind one interface.

A policy is asked, each time the fast tier needs a free page and has none,
which request gives up pages: ``victim(candidates, view)`` returns one of
``candidates`` (the requests with pages in the fast tier that the engine may
take from: never the one being served, never one already kept for the
current step) and how many of its pages to take before the policy is asked
again.  It reads the requests and the :class:`View`; only the engine moves
pages (Ramulator 2's split: the scheduler picks, the controller acts).

Recency is per request, not per page: a decode step reads every page of
every request in it, so all of a request's pages were last touched in the
same step.  Requests that ran in the same step are ordered by when their
reads ended: a paged-attention kernel gives each sequence its own thread
block walking its pages, so a shorter sequence's last read ends first.
That is the tie rule of :class:`LRU` (fewer pages = less recent), and the
reason the essay gives for LRU never choosing the whale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["View", "Policy", "LRU", "Footprint", "RequestQuota", "GrowingQuota", "TenantQuota",
           "StalledFirst", "ReadBudget", "SloBudget", "TailEstimate", "POLICIES", "make_policy"]


@dataclass(frozen=True)
class View:
    """What a policy may read besides the candidates (read-only)."""

    step: int
    hbm_pages: int
    #: Every running request (candidates or not), in admission order.
    running: tuple


def _lru_key(r):
    return (r.last_run, r.pages, r.seq)


def _left(r):
    """Pages ``r`` has still to read for its next token (the engine's carried count)."""
    return r.pages - r.acc[4]


class Policy:
    """The interface: ``victim(candidates, view) -> (request, pages)``, and
    ``reads(batch, config) -> {request: pages}``, the pages each request in
    the step reads (the default: all it has left of its token, at most
    ``config.read_cap_pages``)."""

    name = "policy"

    def victim(self, candidates, view):  # pragma: no cover - interface
        raise NotImplementedError

    def admits(self, r, pages, running, config):
        """May ``r`` (``pages`` pages at admission) join the batch, beyond the
        engine's batch and page budgets?  The default: yes."""
        return True

    def reads(self, batch, config):
        cap = config.read_cap_pages
        return {r: _left(r) if cap is None else min(cap, _left(r)) for r in batch}


class LRU(Policy):
    """Global LRU (today's stacks): the request whose pages were read least recently.

    Takes all of its fast pages: they share one recency, so page-granular LRU
    would take them in a row.
    """

    name = "lru"

    def victim(self, candidates, view):
        r = min(candidates, key=_lru_key)
        return r, r.resident


class Footprint(Policy):
    """The essay's proposal: evict from the owner with the largest footprint.

    Footprint is the request's pages in both tiers, so a whale that has
    already lost pages stays the first victim (its evictions are
    concentrated, not spread over the minnows); ties by LRU.
    """

    name = "footprint"

    def victim(self, candidates, view):
        r = min(candidates, key=lambda r: (-r.pages, _lru_key(r)))
        return r, r.resident


class _OverQuota(Policy):
    """Requests over their quota lose pages first (the most over first, down to
    its quota); without one over quota, LRU."""

    def quota(self, r, view):  # pragma: no cover - interface
        raise NotImplementedError

    def victim(self, candidates, view):
        best, over = None, 0
        for r in candidates:
            o = r.resident - self.quota(r, view)
            if o > over or (o == over and o > 0 and _lru_key(r) < _lru_key(best)):
                best, over = r, o
        if best is not None:
            return best, over
        return LRU.victim(self, candidates, view)


class RequestQuota(_OverQuota):
    """A static per-request quota: ``pages`` fast pages each (default: the fast
    tier over the batch budget, one slot's share)."""

    name = "quota"

    def __init__(self, pages=None, max_batch=None):
        self.pages = pages
        self.max_batch = max_batch

    def quota(self, r, view):
        if self.pages is not None:
            return self.pages
        return view.hbm_pages // max(1, self.max_batch or len(view.running))


class GrowingQuota(_OverQuota):
    """A per-request quota growing with its length: the fast tier shared in
    proportion to the running requests' pages (``hbm x pages / sum pages``)."""

    name = "growing-quota"

    def quota(self, r, view):
        total = sum(x.pages for x in view.running)
        return view.hbm_pages * r.pages // max(1, total)


class TenantQuota(Policy):
    """Per-tenant quotas (``{tenant: pages}``, default an equal split of the
    fast tier over the running tenants): the tenant most over its quota loses
    pages, its least recently used request first; none over, LRU."""

    name = "tenant-quota"

    def __init__(self, quotas=None):
        self.quotas = dict(quotas or {})

    def victim(self, candidates, view):
        use = {}
        for r in view.running:
            use[r.tenant] = use.get(r.tenant, 0) + r.resident
        equal = view.hbm_pages // max(1, len(use))
        over = {t: u - self.quotas.get(t, equal) for t, u in use.items()}
        mine = [r for r in candidates if over[r.tenant] > 0]
        if not mine:
            return LRU.victim(self, candidates, view)
        worst = max(over[r.tenant] for r in mine)
        r = min((r for r in mine if over[r.tenant] == worst), key=_lru_key)
        return r, min(worst, r.resident)


class StalledFirst(Policy):
    """Footprint with two rules the measurements asked for (this module's proposal).

    1. A request already sitting out (some of its pages in the slow tier)
       loses pages first, the largest first: it cannot run until all its
       pages are back, so taking more from it costs promotion bandwidth but
       no further stalled request.
    2. Requests within the protected page budget (``protect_pages``, default
       the fast tier over the batch budget) are taken from only when nothing
       else is left; above it, the largest footprint first.
    """

    name = "stalled-first"

    def __init__(self, protect_pages=None, max_batch=None):
        self.protect_pages = protect_pages
        self.max_batch = max_batch

    def victim(self, candidates, view):
        protect = (self.protect_pages if self.protect_pages is not None
                   else view.hbm_pages // max(1, self.max_batch or len(view.running)))
        r = min(candidates, key=lambda r: (r.resident == r.pages, r.pages <= protect, -r.pages, _lru_key(r)))
        return r, r.resident


class ReadBudget(Policy):
    """A per-step KV-read budget: a batcher in front of an eviction policy
    (``evict``, LRU by default, makes every eviction choice).

    vLLM's scheduler and Sarathi-Serve's stall-free batching bound each step's
    work by a token budget chosen from the time-between-tokens target: the
    running decodes are scheduled first and in full, a long prefill is cut
    into chunks that fill what is left, and a waiting request is scheduled
    only from the budget left after the running ones.  A decode step's cost
    in this model is its KV reads, so here the budget is ``budget_pages``
    pages read per step, and a request is *short* while it has at most
    ``chunk_pages`` pages to read for its token, *long* otherwise:

    1. **Short requests read in full** every step they are in, even past the
       budget (stall-free: the budget never makes a short one wait a step).
    2. **Long requests take turns at what is left**, ``budget_pages`` minus
       the short reads: the long request whose last token is oldest first
       (ties: admission order), each reading as much of its token's remaining
       pages as the room left allows (split-KV attention whose partial
       softmax carries over to the next step, as flash-decoding's splits do
       within a step); one finding no room reads nothing in this step (it
       stays resident and keeps its progress).
    3. **Floors** (a long request reads at least this, room or not): the
       first long request in that order ``chunk_pages`` (none is starved by a
       burst of short ones); with ``spread_steps`` = n, every long request an
       even share of its token's remaining pages over the steps left of n,
       ``ceil(left / max(1, n - steps it has been in since its last token))``,
       so its token takes at most n steps.
    4. **Admission gate** (``gate``): a request short at admission (at most
       ``chunk_pages`` pages) joins only if the running short requests' pages
       plus its own stay within ``budget_pages`` (vLLM schedules a waiting
       request from the budget the running ones leave); a long one needs only
       the engine's page budget.  Without it, short requests queued behind a
       whale all join when it leaves, a burst the budget cannot cut.

    A step therefore reads the short requests' pages (within the budget by
    the gate, but for requests admitted before a long one shrank the room)
    plus at most ``max(room, floors)`` for the long ones.
    """

    def __init__(self, budget_pages, chunk_pages=512, evict=None, spread_steps=None, gate=True):
        for field, value in (("budget_pages", budget_pages), ("chunk_pages", chunk_pages)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"ReadBudget.{field} must be a positive integer (pages), not {value!r}")
        if chunk_pages > budget_pages:
            # A short request alone must fit the gate, or admission could wait forever.
            raise ValueError(f"ReadBudget.chunk_pages ({chunk_pages}) must be at most budget_pages ({budget_pages})")
        if spread_steps is not None and (not isinstance(spread_steps, int) or spread_steps < 1):
            raise ValueError(f"ReadBudget.spread_steps must be a positive integer or None, not {spread_steps!r}")
        self.budget_pages = budget_pages
        self.chunk_pages = chunk_pages
        self.spread_steps = spread_steps
        self.gate = gate
        self.evict = evict if evict is not None else LRU()
        self.name = f"{self.evict.name}+budget"

    def victim(self, candidates, view):
        return self.evict.victim(candidates, view)

    def gate_pages(self, config):
        """The short requests' pages the admission gate lets run at once."""
        return self.budget_pages

    def long_share(self, running):
        """The pages a step keeps for the running long requests before short ones are
        admitted (none here: the fixed budget's room is what the short ones leave)."""
        return 0

    def short_pages(self, running):
        """The running short requests' pages (those of at most ``chunk_pages``)."""
        return sum(x.pages for x in running if x.pages <= self.chunk_pages)

    def admits(self, r, pages, running, config):
        if not self.gate or pages > self.chunk_pages:
            return True
        return self.short_pages(running) + self.long_share(running) + pages <= self.gate_pages(config)

    def reads(self, batch, config):
        out = {r: _left(r) for r in batch if _left(r) <= self.chunk_pages}
        room = self.budget_pages - sum(out.values())
        longs = sorted((r for r in batch if r not in out), key=lambda r: (r.last_token_ns, r.seq))
        for k, r in enumerate(longs):
            floor = self.chunk_pages if k == 0 else 0
            if self.spread_steps is not None:
                # Its token within spread_steps steps: an even share of what is left.
                floor = max(floor, -(-_left(r) // max(1, self.spread_steps - r.acc[3])))
            take = min(_left(r), max(room, floor, 0))
            out[r] = take
            room -= take
        return out


class TailEstimate:
    """A running weighted percentile of durations (ns), kept in bins of
    ``2 ** shift`` ns: ``add(ns, weight)`` counts ``weight`` samples of
    ``ns``; ``value`` is the ``q``-th percentile (nearest rank, the largest
    duration its bin holds), recomputed every ``every`` adds and on the first.
    ``total`` is the weight so far."""

    def __init__(self, q=99, shift=13, every=32):
        self.q, self.shift, self.every = q, shift, every
        self.counts = []
        self.total = 0
        self.adds = 0
        self.value = None

    def add(self, ns, weight=1):
        if weight < 1:
            return
        b = int(ns) >> self.shift
        if b >= len(self.counts):
            self.counts.extend([0] * (b + 1 - len(self.counts)))
        self.counts[b] += weight
        self.total += weight
        self.adds += 1
        if self.value is None or self.adds % self.every == 0:
            self.value = self.percentile()

    def percentile(self):
        """The nearest-rank ``q``-th percentile now (None before any sample)."""
        if not self.total:
            return None
        above = self.total - max(1, -(-self.q * self.total // 100))  # samples ranked above it
        seen = 0
        for b in range(len(self.counts) - 1, -1, -1):
            seen += self.counts[b]
            if seen > above:
                return ((b + 1) << self.shift) - 1
        return None  # pragma: no cover - seen reaches total > above


class SloBudget(ReadBudget):
    """A per-step KV-read budget derived at run time from issue #44's two
    latency targets, not a fixed page count (a batcher in front of ``evict``,
    LRU by default, which makes every eviction choice).

    Sarathi-Serve and vLLM's chunked prefill take the step's token budget from
    the time-between-tokens SLO through a cost model of the step; here the SLO
    is relative (the short requests' p99 ITL within ``minnow_target`` of their
    own without the long ones, the long ones' p99 within ``whale_target`` of a
    batcher that reads everything) and the cost model is the engine's (a step
    costs the weights plus each page read).  Each step, with ``S`` the pages
    the short requests read and ``c(.)`` the engine's read time:

    1. **Short requests read in full** (``chunk_pages`` or fewer left of their
       token), as in :class:`ReadBudget`.  The step they would take alone is
       ``t_short = fixed + c(S)``; the step reading every page of the batch,
       what a read-everything batcher (LRU) gives this batch, ``t_full``.
    2. **The references**, running nearest-rank ``q``-th percentiles over the
       run so far (:class:`TailEstimate`): ``P`` of ``t_short`` weighted by the
       short requests in the step (each is one of their inter-token gaps: ``P``
       estimates the short requests' p99 ITL with no long one reading), ``L``
       of ``t_full`` weighted by the long requests (each one gap of theirs under
       a read-everything batcher).  Until ``warmup`` samples, this step's own
       ``t_short`` / ``t_full``.
    3. **The cap and the deadline**: a step may last ``cap = minnow_target x
       (1 - margin) x P`` (the short requests' target, less a margin for the
       estimate's error); a long token must be done within ``deadline =
       whale_target x (1 - margin) x L`` of its last token.  The room for long
       reads is the pages ``cap - t_short`` reads.
    4. **Long requests by deadline** (earliest last token first, then
       admission order), each reading ``max(room left, floor)`` of what is
       left of its token, where ``floor = ceil(left / k)`` and ``k = max(1,
       floor((deadline - time it has spent since its last token) / cap))``, the
       steps of at most ``cap`` that fit before its deadline: a long token is
       spread over as many steps as the room needs but never more than keeps
       it within its deadline.  When the floor passes the room the step runs
       over the cap: the target lets 1 % of the short gaps do so.
    5. **p99 slack** (``slack``): the targets are on p99, so 1 % of each class's
       gaps may pass.  The policy counts the short gaps in steps over their
       bound (``minnow_target x P``) and the long tokens done past their
       deadline; when a floor would push the step over the bound and the short
       requests have spent ``slack`` x 1 % of their gaps, a long token still
       within the long class's ``slack`` x 1 % (or missing its deadline by less
       than the step would miss the bound) is late instead: it reads the room,
       and up to a chunk more only as far as the step stays within the bound
       (possibly nothing this step).  A whole chunk regardless, as first
       written, kept late tokens moving but put the steps past the bound it
       was meant to spare: on the held-out mix-12 at 10,240 pages, 1.35 % of the
       short gaps against the 0.5 % spent by floors, minnows 1.21x with none of
       the whales' slack used (1.10x); reading within the bound, 1.20x.  A late
       token reading nothing makes no progress until the short requests'
       slack comes back (its floor then applies) or its own class's is spent.
    6. **Admission gate** (``gate``): a request joins only if the running short
       requests' pages, each running long request's share of a step and its
       own (its pages if short, its share if long) fit the pages ``cap -
       fixed`` reads (never fewer than one short request's ``chunk_pages``; a
       long request with nothing running joins; the last step's cap and
       deadline, no gate before the first step).  A long request's share is
       ``ceil(pages / k)``, ``k = max(1, floor(deadline x (1 - margin) /
       cap))``: its token spread evenly over the steps of at most ``cap`` its
       deadline allows, the floor of rule 4 for a token just begun, with the
       deadline given the margin the cap has.  The gate plans whole steps, and
       a plan with no room to spare is a plan to be late: on the drawn mix
       mix-4 at 10,240 pages, ``k = floor(23.5 / 7.72) = 3`` steps left 0.4 ms
       of the whales' deadline for their promotions and the steps the floors
       had pushed past the cap (whale p99 1.51x LRU's, minnows 1.29x their
       own); with the margin, ``k = 2`` (1.395x, 1.165x; minnow queue wait p99
       6.8 -> 8.6 s).  The running requests are served
       first, a waiting one from what they leave (vLLM's order): without the
       long requests' share, short ones admitted while a long one runs take the
       room its floor needs, and a long one admitted beside short ones that
       fill the cap has no room; either way the floor then pushes steps past the
       short requests' bound.  What the gate holds back waits in the queue
       (admission is first come, first served: the requests behind a long one
       wait with it; the report shows the queue waits).

    Why these and not a fitted page count: every quantity is one the batcher
    has at run time (its cost model, the pages of the requests in the step,
    the times its requests have waited), and the only constants are the
    targets themselves, the percentile they are stated at, and ``margin``
    (3 %: the running estimate's error, about one bin of 8 us against a 7 ms
    step plus the with-long batch's different short requests).
    """

    def __init__(self, minnow_target=1.2, whale_target=1.5, margin=0.03, q=99, chunk_pages=512, evict=None,
                 gate=True, slack=0.5, warmup=500, short_ref_ns=None, long_ref_ns=None):
        super().__init__(chunk_pages, chunk_pages, evict=evict, gate=gate)
        for field, value in (("minnow_target", minnow_target), ("whale_target", whale_target)):
            if not isinstance(value, (int, float)) or value <= 1:
                raise ValueError(f"SloBudget.{field} must be a number above 1, not {value!r}")
        if not 0 <= margin < 1 or not 0 <= slack <= 1:
            raise ValueError(f"SloBudget.margin must be in [0, 1) and slack in [0, 1], not {margin!r}, {slack!r}")
        self.minnow_target, self.whale_target, self.margin, self.q = minnow_target, whale_target, margin, q
        self.slack, self.warmup = slack, warmup
        self.short_ref_ns, self.long_ref_ns = short_ref_ns, long_ref_ns
        self.name = f"{self.evict.name}+slo"
        self.short_tail, self.long_tail = TailEstimate(q), TailEstimate(q)
        self.cap_ns = self.deadline_ns = None
        #: [short gaps, of them in steps over the cap, long tokens, of them past the deadline]
        self.spent = [0, 0, 0, 0]

    def gate_pages(self, config):
        # Never below one short request's pages: alone, any short one may join.
        if self.cap_ns is None:
            return math.inf
        return max(self.chunk_pages, _pages_in(self.cap_ns - config.step_fixed_ns, config))

    def share(self, pages):
        """A long request's share of a step (rule 6): ``pages`` over the steps of at
        most the cap its deadline, less the margin, allows."""
        return -(-pages // max(1, int(self.deadline_ns * (1 - self.margin) // self.cap_ns)))

    def long_share(self, running):
        if self.cap_ns is None:
            return 0
        return sum(self.share(x.pages) for x in running if x.pages > self.chunk_pages)

    def admits(self, r, pages, running, config):
        if not self.gate or pages <= self.chunk_pages or self.cap_ns is None or not running:
            return super().admits(r, pages, running, config)
        return self.short_pages(running) + self.long_share(running) + self.share(pages) <= self.gate_pages(config)

    def limits(self, t_short, t_full):
        """(target, cap, deadline) in ns for a step whose short requests alone take
        ``t_short`` and whose every page takes ``t_full``: the short requests' bound
        on a step, the cap (the bound less the margin) and the long tokens' deadline."""
        p, w = self.short_ref_ns, self.long_ref_ns
        if p is None:
            p = self.short_tail.value if self.short_tail.total >= self.warmup else t_short
        if w is None:
            w = self.long_tail.value if self.long_tail.total >= self.warmup else t_full
        target = self.minnow_target * p
        return target, target * (1 - self.margin), self.whale_target * w

    def _slack_left(self, over, total):
        return over <= self.slack * (100 - self.q) / 100 * total

    def reads(self, batch, config):
        out = {r: _left(r) for r in batch if _left(r) <= self.chunk_pages}
        shorts = len(out)
        longs = sorted((r for r in batch if r not in out), key=lambda r: (r.last_token_ns, r.seq))
        read = sum(out.values())
        t_short = config.step_fixed_ns + config.read_ns(read)
        t_full = config.step_fixed_ns + config.read_ns(sum(r.pages for r in batch))
        self.short_tail.add(t_short, shorts)
        if longs:
            self.long_tail.add(t_full, len(longs))
        target, cap, deadline = self.limits(t_short, t_full)
        self.cap_ns, self.deadline_ns = cap, deadline
        room = _pages_in(cap - t_short, config)
        spent = self.spent
        for r in longs:
            left, waited = _left(r), _waited(r)
            floor = -(-left // max(1, int((deadline - waited) // cap)))
            take = min(left, max(room, floor))
            step = config.step_fixed_ns + config.read_ns(read + take)
            if take > room and step > target and not self._slack_left(spent[1] + shorts, spent[0] + shorts):
                # The floor would push the step past the short ones' bound and their p99 slack
                # is spent: the token is late instead (reading what the room leaves, and up to a
                # chunk more within the bound) while the long ones' slack lasts, or when it misses
                # its deadline by less than the step would miss the bound.
                fit = _pages_in(target - config.step_fixed_ns - config.read_ns(read), config)
                late = min(left, max(room, min(self.chunk_pages, fit)))
                finish = waited + -(-left // late) * cap if late else math.inf
                if self._slack_left(spent[3] + 1, spent[2] + 1) or finish / deadline < step / target:
                    take = late
            out[r] = take
            room -= take
            read += take
        t_step = config.step_fixed_ns + config.read_ns(read)
        spent[0] += shorts
        spent[1] += shorts if t_step > target else 0
        for r in longs:
            if out[r] == _left(r):
                spent[2] += 1
                spent[3] += _waited(r) + t_step > deadline
        return out


def _waited(r):
    """Time ``r`` has run since its last token, ns: the engine's steps it sat out, its
    promotion waits and its steps' compute (``acc[0..2]``)."""
    return r.acc[0] + r.acc[1] + r.acc[2]


def _pages_in(ns, config):
    """Pages the fast tier reads in ``ns`` (none for ``ns`` <= 0)."""
    return max(0, int(ns * config.hbm_bytes_per_ns // config.page_bytes))


POLICIES = {p.name: p for p in (LRU, Footprint, RequestQuota, GrowingQuota, TenantQuota, StalledFirst)}


def make_policy(name, config=None, read_budget_pages=None, chunk_pages=512, spread_steps=None, gate=True, slo=None,
                **kwargs):
    """A policy by name; the quota policies take the batch budget from ``config``.

    ``read_budget_pages``: wrap it in a :class:`ReadBudget` of that many pages
    per step (``chunk_pages``: its short-request bound and chunk); ``slo``
    (a dict of :class:`SloBudget`'s keywords, ``{}`` for its defaults): wrap it
    in a :class:`SloBudget` instead.
    """
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"Unknown eviction policy {name!r}; one of {', '.join(POLICIES)}") from None
    if cls in (RequestQuota, StalledFirst) and config is not None and "max_batch" not in kwargs:
        kwargs["max_batch"] = config.max_batch
    policy = cls(**kwargs)
    if slo is not None:
        return SloBudget(**{"chunk_pages": chunk_pages, "gate": gate, **slo}, evict=policy)
    if read_budget_pages is not None:
        return ReadBudget(read_budget_pages, chunk_pages, evict=policy, spread_steps=spread_steps, gate=gate)
    return policy
