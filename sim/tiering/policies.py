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

from dataclasses import dataclass

__all__ = ["View", "Policy", "LRU", "Footprint", "RequestQuota", "GrowingQuota", "TenantQuota",
           "StalledFirst", "ReadBudget", "POLICIES", "make_policy"]


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

    def admits(self, r, pages, running, config):
        if not self.gate or pages > self.chunk_pages:
            return True
        return sum(x.pages for x in running if x.pages <= self.chunk_pages) + pages <= self.budget_pages

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


POLICIES = {p.name: p for p in (LRU, Footprint, RequestQuota, GrowingQuota, TenantQuota, StalledFirst)}


def make_policy(name, config=None, read_budget_pages=None, chunk_pages=512, spread_steps=None, gate=True, **kwargs):
    """A policy by name; the quota policies take the batch budget from ``config``.

    ``read_budget_pages``: wrap it in a :class:`ReadBudget` of that many pages
    per step (``chunk_pages``: its short-request bound and chunk).
    """
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"Unknown eviction policy {name!r}; one of {', '.join(POLICIES)}") from None
    if cls in (RequestQuota, StalledFirst) and config is not None and "max_batch" not in kwargs:
        kwargs["max_batch"] = config.max_batch
    policy = cls(**kwargs)
    if read_budget_pages is not None:
        return ReadBudget(read_budget_pages, chunk_pages, evict=policy, spread_steps=spread_steps, gate=gate)
    return policy
