"""The KV tier model: a paged fast tier, a slow tier, continuous batching.

One decode instance runs steps back to back.  At the start of each step, in
this order:

1. **Finish and arrive.**  Requests that produced their last token leave and
   free their pages; requests that have arrived join the waiting queue.
2. **Grow.**  A running request whose next token starts a new page gets it
   in the fast tier (a free one, or one the eviction policy frees).
3. **Admit** (first come, first served) while the batch budget has room and
   the running requests' pages plus the newcomer's prompt pages stay within
   the page budget.  Its prompt's KV lands in the fast tier (prefill ran on
   another instance); pages the policy cannot free stay in the slow tier.
4. **Select.**  Every running request with all its pages in the fast tier is
   in the step and its pages are kept (no policy may take them in this
   step).  Then, in admission order, each one with pages in the slow tier
   gets them promoted if the policy can free room among the requests not
   kept; if it can, it is in the step too, else it sits out the step.
5. **Run.**  The step first waits for its promotions over the slow tier
   (one set-up latency, then the bytes at the slow tier's bandwidth: the
   promotions of a step share it), then reads the weights and the pages the
   policy's ``reads`` gives each request in the step (by default all of its
   pages: a long request may instead read part of them, carrying its
   progress to the next step).  Each request whose reads since its last
   token cover all its pages adds one token at the step's end.

Admission (3.) also asks the policy (``admits``), after the batch and page
budgets.

A request sits out only because pages of its were evicted; the step it runs
in is as long as everyone's promotions and everyone's reads.  So each gap
between a request's tokens splits into the steps it sat out (eviction), the
promotion wait of the step it ran in (promotion bandwidth) and that step's
reads (batch), which is what :mod:`.metrics` attributes a p99 to.

Demotions and promotions are recorded as ``(time ns, tenant, bytes)``
streams: :func:`.metrics.byte_stream` bins them per tenant, the form the HBM
system model's tenants take.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field

from .config import Request, TierConfig
from .policies import View

__all__ = ["Result", "simulate", "fresh"]


@dataclass
class Result:
    config: TierConfig
    policy: str
    requests: list
    #: (start ns, promotion ns, compute ns, requests in the step, promoted pages)
    steps: list = field(default_factory=list)
    #: (ns, tenant, bytes) of each demotion (fast -> slow) and promotion (slow -> fast).
    demotions: list = field(default_factory=list)
    promotions: list = field(default_factory=list)
    #: Samples of (ns, {request id: (fast pages, all pages)}) for residency shares.
    residency: list = field(default_factory=list)
    end_ns: int = 0
    wall_s: float = 0.0


class _Engine:
    def __init__(self, config, policy, requests, sample_every):
        self.c = config
        self.policy = policy
        self.pending = sorted(requests, key=lambda r: (r.arrival_ns, r.rid))
        self.next = 0  # index of the next arrival in pending
        self.waiting = []
        self.running = []
        self.used = 0
        self.step = 0
        self.now = 0
        self.seq = 0
        self.sample_every = sample_every
        self.res = Result(config, policy.name, self.pending)

    # -- the fast tier's pages ------------------------------------------------------

    def free(self):
        return self.c.hbm_pages - self.used

    def make_room(self, need, kept):
        """Evict until ``need`` pages are free, taking only from requests not in
        ``kept``; False (nothing evicted beyond what was possible) if it cannot."""
        if self.free() >= need:
            return True
        if self.free() + sum(r.resident for r in self.running if r not in kept) < need:
            return False
        view = View(self.step, self.c.hbm_pages, tuple(self.running))
        while self.free() < need:
            candidates = [r for r in self.running if r.resident and r not in kept]
            victim, pages = self.policy.victim(candidates, view)
            if victim not in candidates or pages < 1:
                raise RuntimeError(f"policy {self.policy.name} chose {victim!r}, {pages} pages: not a candidate")
            self.evict(victim, min(pages, victim.resident, need - self.free()))
        return True

    def evict(self, r, pages):
        if r.resident == r.pages:
            r.evictions += 1
        r.resident -= pages
        r.evicted_pages += pages
        self.used -= pages
        self.res.demotions.append((self.now, r.tenant, pages * self.c.page_bytes))

    def place(self, r, pages, kept):
        """``pages`` new pages for ``r``: in the fast tier if room can be made."""
        r.pages += pages
        fast = pages if self.make_room(pages, kept) else min(pages, max(0, self.free()))
        r.resident += fast
        self.used += fast

    # -- one step ---------------------------------------------------------------

    def finish_and_arrive(self):
        for r in [r for r in self.running if r.tokens >= r.generated]:
            self.running.remove(r)
            self.used -= r.resident
            r.finished_ns = self.now
        while self.next < len(self.pending) and self.pending[self.next].arrival_ns <= self.now:
            self.waiting.append(self.pending[self.next])
            self.next += 1

    def grow(self):
        for r in self.running:
            need = self.c.pages_for(r.prompt + r.tokens) - r.pages
            if need > 0 and r.tokens < r.generated:
                self.place(r, need, kept={r})

    def admit(self):
        c = self.c
        while self.waiting and len(self.running) < c.max_batch:
            r = self.waiting[0]
            pages = c.pages_for(r.prompt + 1)
            if c.pages_for(r.prompt + r.generated) > c.hbm_pages:
                # It could never have all its pages in the fast tier at once.
                self.waiting.pop(0)
                r.rejected = True
                continue
            if sum(x.pages for x in self.running) + pages > c.budget or not self.policy.admits(r, pages, self.running, c):
                break
            self.waiting.pop(0)
            r.seq, self.seq = self.seq, self.seq + 1
            r.admitted_ns = r.last_token_ns = self.now
            r.tokens = 1  # the prefill's token
            r.last_run = self.step
            self.running.append(r)
            self.place(r, pages, kept={r})

    def select(self):
        kept = {r for r in self.running if r.resident == r.pages and r.tokens < r.generated}
        promoted = 0
        for r in self.running:
            if r in kept or r.tokens >= r.generated:
                continue
            need = r.pages - r.resident
            if self.make_room(need, kept | {r}):
                r.resident += need
                r.promoted_pages += need
                self.used += need
                promoted += need
                self.res.promotions.append((self.now, r.tenant, need * self.c.page_bytes))
                kept.add(r)
        return [r for r in self.running if r in kept], promoted

    def run_step(self):
        c = self.c
        self.finish_and_arrive()
        self.grow()
        self.admit()
        batch, promoted = self.select()
        if not batch:
            return False
        reads = self.policy.reads(batch, c)
        promo = c.promote_ns(promoted)
        compute = c.step_fixed_ns + c.read_ns(sum(reads.values()))
        start = self.now
        self.now += promo + compute
        self.res.steps.append((start, promo, compute, len(batch), promoted))
        for r in self.running:
            if r.tokens >= r.generated:
                continue
            acc = r.acc
            if r not in reads:
                acc[0] += promo + compute
                continue
            acc[1] += promo
            acc[2] += compute
            acc[3] += 1
            acc[4] += reads[r]
            if reads[r]:
                r.last_run = self.step
            if acc[4] >= r.pages:
                r.gaps.append((self.now - r.last_token_ns, acc[0], acc[1], acc[2], acc[3]))
                r.acc = [0, 0, 0, 0, 0]
                r.last_token_ns = self.now
                r.tokens += 1
        if self.sample_every and self.step % self.sample_every == 0:
            self.res.residency.append((start, {r.rid: (r.resident, r.pages) for r in self.running}))
        self.step += 1
        return True

    def run(self):
        while self.next < len(self.pending) or self.waiting or self.running:
            if self.run_step():
                continue
            if any(r.tokens < r.generated for r in self.running):
                raise RuntimeError("tier model stuck: running requests none of which can run")
            if not self.running and not self.waiting and self.next < len(self.pending):
                # Idle until the next arrival.
                self.now = max(self.now, self.pending[self.next].arrival_ns)
        self.res.end_ns = self.now
        return self.res


def simulate(requests, config: TierConfig, policy, sample_every=0):
    """Run ``requests`` (fresh :class:`Request` records, consumed) under ``policy``.

    ``sample_every``: record every n-th step's fast-tier residency per request
    (0: none).  Returns a :class:`Result`.
    """
    start = _time.process_time()
    res = _Engine(config, policy, requests, sample_every).run()
    res.wall_s = _time.process_time() - start
    return res


def fresh(requests):
    """Copies of ``requests`` with their run state cleared (the same workload run again)."""
    return [Request(r.rid, r.arrival_ns, r.prompt, r.generated, r.tenant, r.whale) for r in requests]
