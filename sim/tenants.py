"""LLM tenants as seen by one HBM channel.

A tenant turns its work into 128-byte transactions and hands them to the
:class:`~sim.system.System`, which queues them at the memory controller's
front end.  Every tenant bounds the transactions it has in flight
(``window``): GPUs stall when their miss-status registers are full, so a
burst is a queue of that depth at the controller, not an unbounded flood.

:class:`DecodeTenant`
    Decode stream.  A step reads ``step_bytes`` of KV cache as random
    ``block_bytes`` chunks (a paged KV cache) and its latency is the time
    until the last of them is served; the next step starts one ``think``
    (compute) interval after the previous one ends.
:class:`PrefillTenant`
    Periodic prefill jobs that stream through a region, one in
    ``write_share`` 1 KiB blocks being KV writes.  Optionally split into
    chunks with a yield (compute) gap between them, as in the essay's §6.
:class:`GreedyTenant`
    Always backlogged, for isolation and calibration runs.
"""

import random
from collections import deque

from .dram import NEVER
from .system import TRANSACTION_ACCESSES

__all__ = ["DecodeTenant", "PrefillTenant", "GreedyTenant", "SoftwareThrottle"]

_TXN_BYTES = 32 * TRANSACTION_ACCESSES


class Tenant:
    """Common plumbing: identity, in-flight window, the system it runs in."""

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

    def attach(self, system):
        self.system = system
        self.start(0)

    def start(self, now):
        """Schedule the first event."""

    def capacity_transactions(self):
        return self.system.capacity_transactions(self.tenant_id)

    def _issue(self, txn_index, is_write, now, tag=None, to_cxl=False):
        txn = self.system.transaction(self, txn_index * TRANSACTION_ACCESSES, is_write, now,
                                      tag, to_cxl)
        self.in_flight += 1
        self.system.submit(txn, now)

    def complete(self, txn, now):
        raise NotImplementedError


class SoftwareThrottle:
    """Sleeps inserted by software to cap a tenant's average rate.

    In every ``period`` the tenant may issue ``quota`` transactions, as fast
    as it likes; then it sleeps until the next period.  This is the essay's
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
        """Transactions the tenant may still issue in the period containing ``now``."""
        if now >= self.period_start + self.period:
            self.period_start = now
            self.used = 0
        return self.quota - self.used

    def take(self):
        self.used += 1

    def next_period(self):
        return self.period_start + self.period


class DecodeTenant(Tenant):
    """Decode steps of random KV-block reads, closed loop.

    Parameters
    ----------
    step_bytes : int
        KV bytes read per step in this channel.
    think : int
        Cycles of compute between the end of a step and the next step.
    block_bytes : int
        Contiguous bytes per KV chunk (a multiple of 128).
    cxl_fraction : float
        Share of KV chunks spilled to CXL memory (served by ``system.cxl``).
    hbm_blocks : int or None
        The tenant's HBM residency bound in blocks (its ``hbm_quota_mb``,
        :func:`kvfabric.sim.workload.residency`): blocks ``hbm_blocks`` and
        above of every step live in CXL memory, so no more than
        ``hbm_blocks * block_bytes`` of its KV is ever read from HBM; the
        blocks below it spill at ``cxl_fraction`` as without a quota. None:
        no bound.
    jitter : float
        Think time is drawn uniformly from ``think * (1 ± jitter)`` so that
        streams do not lock into one phase.
    """

    kind = "decode"

    def __init__(self, tenant_id, *, step_bytes, think, block_bytes=256, cxl_fraction=0,
                 hbm_blocks=None, jitter=0.25, seed=0, window=None, **kw):
        if block_bytes % _TXN_BYTES or step_bytes <= 0 or step_bytes % block_bytes:
            raise ValueError(f"Step of {step_bytes} B must be a positive multiple of the "
                             f"{block_bytes} B block, itself a multiple of {_TXN_BYTES} B")
        self.step_transactions = step_bytes // _TXN_BYTES
        super().__init__(tenant_id, window=window or self.step_transactions, **kw)
        self.step_bytes = step_bytes
        self.think = think
        self.block = block_bytes // _TXN_BYTES
        self.cxl_fraction = cxl_fraction
        self.hbm_blocks = hbm_blocks
        #: Transactions issued, and those of them read over CXL.
        self.transactions = self.cxl_transactions = 0
        self.jitter = jitter
        self.rng = random.Random(seed * 1000 + tenant_id)
        self.steps = []          # (start cycle, latency cycles)
        # Per step, its last transaction's latency split (cycles): waiting
        # for and in the arbiter, waiting for controller room or credit,
        # queued in the controller until its last column command, DRAM
        # service (column command to end of data).  Sums to the latency.
        self.step_parts = []
        # Per step, its portions: channel -> cycles from the step's start to
        # the end of its last HBM transaction on that channel (the step ends
        # with its slowest portion, or a CXL read); and its last
        # transaction's last access as (channel, bank, admitted, acted,
        # issued; acted: the first row command for any of its accesses) for
        # the wait attribution (None: it went to CXL).
        self.step_portions = []
        self.step_last = []
        self._portion = {}
        self._remaining = 0
        self._step_start = 0
        self._pending = deque()  # (txn index, to_cxl) of the step not yet issued (window)

    def start(self, now):
        self.system.schedule(now + self.rng.randrange(max(self.think, 1)), self._begin_step)

    def _begin_step(self, now):
        self._step_start = now
        self._remaining = self.step_transactions
        span = self.capacity_transactions() // self.block
        for k in range(self.step_transactions // self.block):
            base = self.rng.randrange(span) * self.block
            to_cxl = bool(self.cxl_fraction) and self.rng.random() < self.cxl_fraction
            if self.hbm_blocks is not None and k >= self.hbm_blocks:
                to_cxl = True
            self._pending.extend((base + i, to_cxl) for i in range(self.block))
        self._fill(now)

    def _fill(self, now):
        while self._pending and self.in_flight < self.window:
            index, to_cxl = self._pending.popleft()
            self._issue(index, False, now, to_cxl=to_cxl)
            self.transactions += 1
            self.cxl_transactions += to_cxl

    def complete(self, txn, now):
        self.in_flight -= 1
        self._remaining -= 1
        if not txn.to_cxl:
            self._portion[txn.channel] = now - self._step_start
        self._fill(now)
        if self._remaining == 0:
            self.steps.append((self._step_start, now - self._step_start))
            self.step_portions.append(self._portion)
            self._portion = {}
            if txn.to_cxl:
                self.step_parts.append((0, 0, 0, now - self._step_start))
                self.step_last.append(None)
            else:
                last = max(txn.accesses, key=lambda a: a.issued)
                issued = last.issued
                self.step_parts.append((txn.granted - self._step_start, txn.admitted - txn.granted,
                                        issued - txn.admitted, now - issued))
                # Its row commands: the first one issued for any of its accesses
                # (the last column command is often a row hit behind it).
                acted = min((a.acted for a in txn.accesses if a.acted >= 0), default=-1)
                self.step_last.append((txn.channel, last.bank, txn.admitted, acted, issued))
            span = self.think * self.jitter
            gap = max(1, round(self.think + self.rng.uniform(-span, span)))
            self.system.schedule(now + gap, self._begin_step)


class PrefillTenant(Tenant):
    """Periodic prefill jobs streaming through the tenant's region.

    Parameters
    ----------
    job_bytes : int
        Bytes per prefill job in this channel.
    period, phase : int
        A job arrives every ``period`` cycles from ``phase``; a job that
        arrives while the previous one runs waits for it.
    chunks : int
        Split each job into this many chunks; a chunk must be fully served,
        and ``yield_gap`` cycles pass, before the next is issued.
    write_share : int
        One in ``write_share`` 1 KiB blocks is a KV write (0: reads only).
    throttle : SoftwareThrottle or None
    max_jobs : int or None
        Stop after this many arrivals.

    Attributes
    ----------
    admit : callable or None
        ``admit(tenant, now) -> bool``, scheduler-level admission control.
        A refused job is deferred until the controller calls
        :meth:`release`.
    on_job_end : callable or None
        ``on_job_end(tenant, now)`` after each job, for that controller.
    """

    kind = "prefill"

    def __init__(self, tenant_id, *, job_bytes, period, phase=0, window=300, chunks=1,
                 yield_gap=0, write_share=4, throttle=None, max_jobs=None, **kw):
        super().__init__(tenant_id, window=window, **kw)
        job = job_bytes // _TXN_BYTES
        if chunks <= 0 or job <= 0 or job % chunks or job_bytes % _TXN_BYTES:
            raise ValueError(f"Job of {job_bytes} B must split into {chunks} equal chunks of "
                             f"{_TXN_BYTES} B transactions")
        self.job_transactions = job
        self.period = period
        self.phase = phase
        self.chunks = chunks
        self.yield_gap = yield_gap
        self.write_share = write_share
        self.throttle = throttle
        self.max_jobs = max_jobs
        self.admit = None
        self.on_job_end = None
        self.jobs = []            # (arrival, start, end)
        self.rejected = 0
        self._deferred = deque()
        self._queued_jobs = deque()
        self._running = False
        self._issued = 0          # transactions issued in the current chunk
        self._chunk_served = 0
        self._chunks_left = 0
        self._job_start = 0
        self._job_arrival = 0
        self._cursor = 0          # stream position, in transactions
        self._wake_pending = False
        self._arrivals = 0

    @property
    def chunk_transactions(self):
        return self.job_transactions // self.chunks

    def start(self, now):
        self.system.schedule(self.phase, self._job_arrives)

    def _job_arrives(self, now):
        self._arrivals += 1
        if self.max_jobs is None or self._arrivals < self.max_jobs:
            self.system.schedule(now + self.period, self._job_arrives)
        if self.admit is not None and not self.admit(self, now):
            self.rejected += 1
            self._deferred.append(now)
            return
        self._queued_jobs.append(now)
        if not self._running:
            self._start_job(now)

    def release(self, now):
        """Start the oldest deferred job (admission control said yes)."""
        self._queued_jobs.append(self._deferred.popleft())
        if not self._running:
            self._start_job(now)

    @property
    def deferred(self):
        return len(self._deferred)

    @property
    def running(self):
        return self._running

    @property
    def job_start(self):
        return self._job_start

    def _start_job(self, now):
        self._running = True
        self._job_arrival = self._queued_jobs.popleft()
        self._job_start = now
        self._chunks_left = self.chunks
        self._start_chunk(now)

    def _start_chunk(self, now):
        self._issued = 0
        self._chunk_served = 0
        self._chunks_left -= 1
        self._fill(now)

    def _fill(self, now):
        throttle = self.throttle
        allowed = NEVER if throttle is None else throttle.allowed(now)
        chunk = self.chunk_transactions
        # Reads and writes stream through separate halves of the region.
        half = self.capacity_transactions() // 2
        per_kib = 1024 // _TXN_BYTES
        while self._issued < chunk and self.in_flight < self.window and allowed > 0:
            block = self._cursor // per_kib
            is_write = bool(self.write_share) and block % self.write_share == self.write_share - 1
            index = self._cursor % half + (half if is_write else 0)
            self._cursor += 1
            self._issued += 1
            allowed -= 1
            if throttle is not None:
                throttle.take()
            self._issue(index, is_write, now)
        if self._issued < chunk and allowed <= 0 and not self._wake_pending:
            self._wake_pending = True
            self.system.schedule(throttle.next_period(), self._wake)

    def _wake(self, now):
        self._wake_pending = False
        if self._running:
            self._fill(now)

    def complete(self, txn, now):
        self.in_flight -= 1
        self._chunk_served += 1
        if self._chunk_served < self.chunk_transactions:
            self._fill(now)
            return
        if self._chunks_left:
            self.system.schedule(now + self.yield_gap, self._start_chunk)
            return
        self.jobs.append((self._job_arrival, self._job_start, now))
        self._running = False
        if self._queued_jobs:
            self._start_job(now)
        if self.on_job_end is not None:
            self.on_job_end(self, now)


class GreedyTenant(Tenant):
    """Keeps ``window`` transactions in flight for ever.

    Parameters
    ----------
    pattern : {"stream", "random"}
        Sequential addresses, or random ``block``-transaction chunks.
    write_share : int
        One in ``write_share`` transactions is a write (0: reads only).
    start_at, stop_at : int
        Active interval, to build on/off experiments.
    """

    kind = "greedy"

    def __init__(self, tenant_id, *, window=16, pattern="stream", block=1, write_share=0,
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
        if self.pattern == "random" and self._block_left == 0:
            span = self.capacity_transactions() // self.block
            self._cursor = self.rng.randrange(span) * self.block
            self._block_left = self.block
        self._block_left -= 1
        self._cursor += 1
        return self._cursor - 1

    def _fill(self, now):
        while self.in_flight < self.window and now < self.stop_at:
            self._count += 1
            is_write = bool(self.write_share) and self._count % self.write_share == 0
            self._issue(self._next_index(), is_write, now)

    def complete(self, txn, now):
        self.in_flight -= 1
        self._fill(now)
