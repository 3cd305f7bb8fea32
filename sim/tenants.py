"""LLM tenants as seen by one HBM channel.

A tenant turns its work into 32-byte requests and hands them to the
:class:`~sim.system.System`, which queues them at the memory controller's
front end.  Every tenant bounds the requests it has in flight (``window``):
GPUs stall when their miss-status registers are full, so a burst is a queue
of that depth at the controller, not an unbounded flood.

:class:`DecodeTenant`
    Decode stream.  A step reads ``step_accesses`` of KV cache as random
    ``block``-access chunks (a paged KV cache) and its latency is the time
    until the last of them is served; the next step starts one ``think``
    (compute) interval after the previous one ends.
:class:`PrefillTenant`
    Periodic prefill jobs that stream through a region, one in four 1 KiB
    blocks being KV writes.  Optionally split into chunks with a yield
    (compute) gap between them, as in the essay's section 6.
:class:`GreedyTenant`
    Always backlogged, for isolation and calibration runs.
"""

import random
from collections import deque

from .dram import NEVER, Request

__all__ = ["DecodeTenant", "PrefillTenant", "GreedyTenant", "SoftwareThrottle"]


class Tenant:
    """Common plumbing: identity, source queue, in-flight window."""

    kind = "tenant"

    def __init__(self, tenant_id, *, name=None, window, priority=1):
        if not isinstance(window, int) or window <= 0:
            raise ValueError(f"Window must be a positive integer, not {window!r}")
        self.tenant_id = tenant_id
        self.name = name or f"{self.kind}{tenant_id}"
        self.window = window
        self.priority = priority
        self.in_flight = 0
        self.system = None
        self.address_map = None

    def attach(self, system):
        self.system = system
        self.address_map = system.address_map
        self.start(0)

    def start(self, now):
        """Schedule the first event."""

    def _request(self, index, is_write, now, tag=None, to_cxl=False):
        bank, row = self.address_map.locate(self.tenant_id, index)
        return Request(self.tenant_id, is_write, bank, row, now, owner=self, tag=tag,
                       to_cxl=to_cxl)

    def complete(self, req, now):
        raise NotImplementedError


class SoftwareThrottle:
    """Sleeps inserted by software to cap a tenant's average rate.

    In every ``period`` the tenant may issue ``quota`` accesses, as fast as
    it likes; then it sleeps until the next period.  This is the essay's
    "inserting sleeps": the average is capped, a burst within a period is
    not.
    """

    def __init__(self, quota, period):
        if quota <= 0 or period <= 0:
            raise ValueError(f"Throttle quota and period must be positive, not {quota}, {period}")
        self.quota = quota
        self.period = period
        self.period_start = -NEVER
        self.used = 0

    def allowed(self, now):
        """Accesses the tenant may still issue in the period containing ``now``."""
        if now >= self.period_start + self.period:
            self.period_start = now
            self.used = 0
        return self.quota - self.used

    def take(self):
        self.used += 1

    def next_period(self):
        return self.period_start + self.period


class DecodeTenant(Tenant):
    """Periodic decode steps of random KV-block reads.

    Parameters
    ----------
    step_accesses : int
        32-byte reads per step in this channel.
    think : int
        Cycles of compute between the end of a step and the next step.
    block : int
        Consecutive accesses per KV chunk.
    cxl_fraction : Fraction or float
        Share of KV blocks spilled to CXL memory (served by ``system.cxl``).
    jitter : float
        Think time is drawn uniformly from ``think * (1 ± jitter)`` so that
        streams do not lock into one phase.
    """

    kind = "decode"

    def __init__(self, tenant_id, *, step_accesses, think, block=8, cxl_fraction=0,
                 jitter=0.25, seed=0, window=None, **kw):
        if step_accesses <= 0 or step_accesses % block:
            raise ValueError(f"Step size must be a positive multiple of the block, not {step_accesses}")
        super().__init__(tenant_id, window=window or step_accesses, **kw)
        self.step_accesses = step_accesses
        self.think = think
        self.block = block
        self.cxl_fraction = cxl_fraction
        self.jitter = jitter
        self.rng = random.Random(seed * 1000 + tenant_id)
        self.steps = []          # (start cycle, latency cycles)
        self._remaining = 0
        self._step_start = 0
        self._pending = deque()  # requests of the step not yet submitted (window)

    def start(self, now):
        self.system.schedule(now + self.rng.randrange(max(self.think, 1)), self._begin_step)

    def _begin_step(self, now):
        self._step_start = now
        self._remaining = self.step_accesses
        span = self.address_map.capacity(self.tenant_id) // self.block
        for _ in range(self.step_accesses // self.block):
            base = self.rng.randrange(span) * self.block
            to_cxl = self.cxl_fraction and self.rng.random() < self.cxl_fraction
            for i in range(self.block):
                self._pending.append(self._request(base + i, False, now, to_cxl=to_cxl))
        self._fill(now)

    def _fill(self, now):
        while self._pending and self.in_flight < self.window:
            req = self._pending.popleft()
            req.arrival = now
            self.in_flight += 1
            self.system.submit(req, now)

    def complete(self, req, now):
        self.in_flight -= 1
        self._remaining -= 1
        self._fill(now)
        if self._remaining == 0:
            self.steps.append((self._step_start, now - self._step_start))
            span = self.think * self.jitter
            gap = max(1, round(self.think + self.rng.uniform(-span, span)))
            self.system.schedule(now + gap, self._begin_step)


class PrefillTenant(Tenant):
    """Periodic prefill jobs streaming through the tenant's region.

    Parameters
    ----------
    job_accesses : int
        32-byte accesses per prefill job in this channel.
    period, phase : int
        A job arrives every ``period`` cycles from ``phase``; a job that
        arrives while the previous one runs waits for it.
    chunks : int
        Split each job into this many chunks; a chunk must be fully served,
        and ``yield_gap`` cycles pass, before the next is issued.
    write_share : int
        One in ``write_share`` 1 KiB blocks is a KV write (0: reads only).
    throttle : SoftwareThrottle or None
    admit : callable or None
        ``admit(tenant, now) -> bool``: scheduler-level admission control;
        a rejected job is counted and dropped.
    """

    kind = "prefill"

    def __init__(self, tenant_id, *, job_accesses, period, phase=0, window=1200, chunks=1,
                 yield_gap=0, write_share=4, throttle=None, max_jobs=None, **kw):
        super().__init__(tenant_id, window=window, **kw)
        if chunks <= 0 or job_accesses % chunks:
            raise ValueError(f"Job size must split into {chunks} equal chunks, not {job_accesses}")
        self.job_accesses = job_accesses
        self.period = period
        self.phase = phase
        self.chunks = chunks
        self.yield_gap = yield_gap
        self.write_share = write_share
        self.throttle = throttle
        self.max_jobs = max_jobs
        self.admit = None
        self.jobs = []            # (arrival, start, end)
        self.rejected = 0
        self._queued_jobs = deque()
        self._running = False
        self._issued = 0          # accesses issued in the current chunk
        self._chunk_served = 0
        self._chunk_left = 0
        self._job_start = 0
        self._job_arrival = 0
        self._job_chunks_left = 0
        self._cursor = 0          # stream position in the tenant's region
        self._wake_pending = False
        self._arrivals = 0

    def start(self, now):
        self.system.schedule(self.phase, self._job_arrives)

    def _job_arrives(self, now):
        self._arrivals += 1
        if self.max_jobs is None or self._arrivals < self.max_jobs:
            self.system.schedule(now + self.period, self._job_arrives)
        if self.admit is not None and not self.admit(self, now):
            self.rejected += 1
            return
        self._queued_jobs.append(now)
        if not self._running:
            self._start_job(now)

    def _start_job(self, now):
        self._running = True
        self._job_arrival = self._queued_jobs.popleft()
        self._job_start = now
        self._job_chunks_left = self.chunks
        self._start_chunk(now)

    def _start_chunk(self, now):
        self._chunk_left = self.job_accesses // self.chunks
        self._issued = 0
        self._chunk_served = 0
        self._job_chunks_left -= 1
        self._fill(now)

    def _next_request(self, now):
        # Reads and writes stream through separate halves of the region.
        half = self.address_map.capacity(self.tenant_id) // 2
        row_accesses = self.address_map.geometry.columns
        block = self._cursor // row_accesses
        is_write = self.write_share and block % self.write_share == self.write_share - 1
        index = self._cursor % half + (half if is_write else 0)
        self._cursor += 1
        return self._request(index, bool(is_write), now)

    def _fill(self, now):
        throttle = self.throttle
        allowed = NEVER if throttle is None else throttle.allowed(now)
        chunk = self.job_accesses // self.chunks
        while self._issued < chunk and self.in_flight < self.window and allowed > 0:
            self.in_flight += 1
            self._issued += 1
            allowed -= 1
            if throttle is not None:
                throttle.take()
            self.system.submit(self._next_request(now), now)
        if self._issued < chunk and allowed <= 0 and not self._wake_pending:
            self._wake_pending = True
            self.system.schedule(throttle.next_period(), self._wake)

    def _wake(self, now):
        self._wake_pending = False
        if self._running:
            self._fill(now)

    def complete(self, req, now):
        self.in_flight -= 1
        self._chunk_served += 1
        chunk = self.job_accesses // self.chunks
        if self._chunk_served < chunk:
            self._fill(now)
            return
        if self._job_chunks_left:
            self.system.schedule(now + self.yield_gap, self._start_chunk)
            return
        self.jobs.append((self._job_arrival, self._job_start, now))
        self._running = False
        if self._queued_jobs:
            self._start_job(now)


class GreedyTenant(Tenant):
    """Keeps ``window`` requests in flight for ever.

    Parameters
    ----------
    pattern : {"stream", "random"}
        Sequential addresses, or random ``block``-access chunks.
    write_share : int
        One in ``write_share`` requests is a write (0: reads only).
    start_at, stop_at : int
        Active interval, to build on/off experiments.
    """

    kind = "greedy"

    def __init__(self, tenant_id, *, window=64, pattern="stream", block=1, write_share=0,
                 start_at=0, stop_at=NEVER, seed=0, **kw):
        if pattern not in ("stream", "random"):
            raise ValueError(f"Pattern must be 'stream' or 'random', not {pattern!r}")
        super().__init__(tenant_id, window=window, **kw)
        self.pattern = pattern
        self.block = block
        self.write_share = write_share
        self.start_at = start_at
        self.stop_at = stop_at
        self.rng = random.Random(seed * 1000 + tenant_id)
        self._cursor = 0
        self._block_left = 0
        self._count = 0

    def start(self, now):
        self.system.schedule(self.start_at, self._fill)

    def _next_index(self):
        if self.pattern == "stream":
            self._cursor += 1
            return self._cursor - 1
        if self._block_left == 0:
            span = self.address_map.capacity(self.tenant_id) // self.block
            self._cursor = self.rng.randrange(span) * self.block
            self._block_left = self.block
        self._block_left -= 1
        self._cursor += 1
        return self._cursor - 1

    def _fill(self, now):
        while self.in_flight < self.window and now < self.stop_at:
            self._count += 1
            is_write = bool(self.write_share) and self._count % self.write_share == 0
            self.in_flight += 1
            self.system.submit(self._request(self._next_index(), is_write, now), now)

    def complete(self, req, now):
        self.in_flight -= 1
        self._fill(now)
