"""Golden model of one arbitration channel (spec §4–§6), cycle by cycle.

Written for clarity first: every cycle reads the registers of cycle t, decides,
and writes the registers of cycle t+1, in the order the spec describes. The
RTL is compared against this class every cycle, so it follows the spec
literally, modular comparisons included.

One method per spec rule, named as in the RTL (:mod:`kvfabric.hw.channel`,
:mod:`kvfabric.hw.keys`): ``_request_handshake`` (§4), ``select`` (§6.2),
``_update_buckets`` (§6.3), ``_next_virtual_time`` and ``_update_tags``
(§6.4), ``_count_credits`` (§6.6), ``_advance_queues`` (§4's queues and
§6.2's grant register).
"""

from __future__ import annotations

from collections import deque

from .compat import frozen_record
from kvfabric.spec import (BULK_RUN_BITS, BURST, CREDIT_BITS, CREDIT_CLASSES, FCFS, GUARANTEED, KIND_NAMES, URGENT,
                           credit_class)

from .registers import FabricConfig
NO_CLASS = 6  # a head that does not compete
#: Grant kind of each selection class 0..5 (spec §6.2): urgent, guaranteed x4, burst.
_KIND_OF_SELECTION = (URGENT, GUARANTEED, GUARANTEED, GUARANTEED, GUARANTEED, BURST)
NO_CREDIT_RETURN = (0, 0, 0)
_INFLIGHT_MAX = (1 << CREDIT_BITS) - 1
_RUN_MAX = (1 << BULK_RUN_BITS) - 1


@frozen_record
class Request:
    """Payload of the request port."""

    tenant: int
    bytes: int
    id: int


@frozen_record
class QueueEntry:
    """One FIFO entry: the request plus what ingress added (timestamp, cost)."""

    bytes: int
    id: int
    ts: int
    cost: int


@frozen_record
class Grant:
    """Contents of the grant register (the grant port's payload)."""

    tenant: int
    bytes: int
    id: int
    kind: int
    ts: int


@frozen_record
class StepResult:
    """What happened on the channel's ports in one cycle."""

    accepted: bool  # the offered request was accepted (valid & ready)
    dropped: bool  # ... and it was invalid, so it was counted and discarded
    transferred: Grant | None  # grant handed to the memory side this cycle


def mod_lt(a: int, b: int, bits: int) -> bool:
    """``a < b`` for ``bits``-bit modular values (spec §6.1)."""
    return ((a - b) & ((1 << bits) - 1)) >= (1 << (bits - 1))


def mod_max(a: int, b: int, bits: int) -> int:
    return b if mod_lt(a, b, bits) else a


def mod_min(a: int, b: int, bits: int) -> int:
    return b if mod_lt(b, a, bits) else a


def request_cost(nbytes: int, inv_weight: int, params) -> int:
    """Weighted tag increment ``ceil(bytes * inv_weight / 2^(WFRAC+TAG_SHIFT))`` (spec §3)."""
    shift = params.wfrac + params.tag_shift
    return (nbytes * inv_weight + (1 << shift) - 1) >> shift


def served_units(nbytes: int, params) -> int:
    """Unweighted tag units of a grant: ``ceil(bytes / TAG_UNIT)`` (spec §3)."""
    return (nbytes + (1 << params.tag_shift) - 1) >> params.tag_shift


class ChannelModel:
    """One channel: ingress register, per-tenant FIFOs, buckets, tags, V, grant register.

    Parameters
    ----------
    params : hw.params.FabricParams
        Sizes and widths.
    config : FabricConfig
        Active configuration; the owner may replace ``self.config`` between
        cycles (a COMMIT), which takes effect in the next :meth:`step`.
    """

    def __init__(self, params, config: FabricConfig):
        self.params = params
        self.config = config
        n = params.tenants
        self.level = [0] * n
        self.peak = [0] * n
        self.tag = [0] * n
        self.fifo: list[deque[QueueEntry]] = [deque() for _ in range(n)]
        self.ingress: tuple[int, int, int, int, int] | None = None  # tenant, bytes, id, ts, cost
        self.grant: Grant | None = None
        self.vt = 0
        #: V of the previous cycle (0 in cycle 0): eligibility is taken against
        #: it (spec §6.2), so the RTL tests it from registers a cycle ahead.
        self.vt_prev = 0
        self.served = 0
        self.vmin = 0
        self.vmin_valid = 0
        #: Per-channel in-flight counters of the credit classes (spec §6.6).
        self.inflight = [0] * CREDIT_CLASSES
        #: The bulk run (spec §6.2): the bulk tenant of the last bulk fabric
        #: grant and how many bulk grants in a row it has had (0: no run yet),
        #: saturating at 2^BULK_RUN_BITS - 1.
        self.run_tenant = 0
        self.run_count = 0
        #: Each tenant's ``enable`` in the previous cycle (0 before cycle 0):
        #: a tenant enabled in this cycle starts with full buckets (spec §6.3).
        self.enable_prev = [0] * n

    # ---- combinational outputs of cycle t -------------------------------------------
    def is_invalid(self, tenant: int, nbytes: int) -> bool:
        """Spec §4: invalid requests are accepted, counted and discarded."""
        p = self.params
        return (tenant >= p.tenants or not self.config.tenants[tenant].enable
                or nbytes == 0 or nbytes > p.max_request_bytes)

    def occupancy(self) -> list[int]:
        occ = [len(q) for q in self.fifo]
        if self.ingress is not None:
            occ[self.ingress[0]] += 1
        return occ

    def queue_full(self) -> list[bool]:
        depth = self.params.queue_depth
        return [o >= depth for o in self.occupancy()]

    def req_ready(self, tenant: int, nbytes: int) -> bool:
        if self.is_invalid(tenant, nbytes):
            return True
        return self.occupancy()[tenant] < self.params.queue_depth

    def has_credit(self) -> tuple[bool, bool, bool]:
        """Spec §6.6: class k may compete iff its limit is 0 or ``inflight[k] < limit[k]``."""
        return tuple(limit == 0 or held < limit
                     for limit, held in zip(self.config.credits, self.inflight))

    def quiescent(self) -> bool:
        """True when a cycle without inputs changes nothing but bucket refills
        (and ``vt_prev``, which catches up with the constant V)."""
        return (self.ingress is None and self.grant is None and self.served == 0
                and not self.vmin_valid and not any(self.fifo))

    # ---- selection (spec §6.2) ----------------------------------------------------------
    def _head_key(self, i: int, head: QueueEntry, now: int):
        """(class, eligible, finish, ts) of tenant i's head; class NO_CLASS = not competing."""
        p = self.params
        cfg = self.config.tenants[i]
        need = head.bytes << p.frac
        peak_ok = self.peak[i] >= need
        # A tenant whose committed rate is 0 has no guaranteed tokens, whatever
        # its level (spec §6.2): its heads never conform.
        conform = peak_ok and cfg.rate != 0 and self.level[i] >= need
        if conform:
            # old: ts_le(ts, now - starve_limit), i.e. age >= starve_limit
            # while the age is below half the timestamp range (spec §6.2).
            limit = self.config.starve_limit
            deadline = (now - limit) & ((1 << p.ts_bits) - 1)
            old = not mod_lt(deadline, head.ts, p.ts_bits)
            cls = 0 if (limit != 0 and old) else 1 + cfg.priority
        elif peak_ok:
            cls = 5
        else:
            cls = NO_CLASS
        # tag_le(tag_i, V at t-1) (spec §6.2): V one cycle old.
        eligible = not mod_lt(self.vt_prev, self.tag[i], p.tag_bits)
        finish = (self.tag[i] + head.cost) & ((1 << p.tag_bits) - 1)
        return cls, eligible, finish, head.ts

    def _credit_class_of(self, cls: int, tenant: int) -> int:
        """Credit class of ``tenant``'s head of selection class ``cls`` (spec
        §6.2, §6.6): the kind that class grants, at the tenant's priority
        (``cls - 1`` for classes 1..4; a burst head's class depends on it too)."""
        cfg = self.config
        return credit_class(_KIND_OF_SELECTION[cls], cfg.tenants[tenant].priority, cfg.bulk_prio,
                            cfg.arrival_prio)

    def _in_arrival_order(self, cls: int) -> bool:
        """Whether heads of selection class ``cls`` are ordered oldest first:
        urgent heads, and conforming heads of a priority marked in
        ``arrival_prio`` (spec §6.2)."""
        return cls == 0 or (cls <= 4 and self.config.arrival_prio >> (cls - 1) & 1 == 1)

    def _beats(self, a, b) -> bool:
        """True if head key ``a`` strictly beats ``b`` (the index tie-break is the caller's)."""
        p = self.params
        if a[0] != b[0]:
            return a[0] < b[0]
        if self._in_arrival_order(a[0]):
            return mod_lt(a[3], b[3], p.ts_bits)
        if a[1] != b[1]:
            return a[1]
        return mod_lt(a[2], b[2], p.tag_bits)

    def select(self, now: int) -> tuple[int, int] | None:
        """Winner ``(tenant, kind)`` among the heads at cycle t, or None."""
        p = self.params
        best = None
        best_key = None
        if self.config.fcfs_bypass:
            for i, q in enumerate(self.fifo):
                if q and (best is None or mod_lt(q[0].ts, best_key, p.ts_bits)):
                    best, best_key = i, q[0].ts
            return None if best is None else (best, FCFS)
        credit = self.has_credit()
        run = self._run_holder(now, credit)
        for i, q in enumerate(self.fifo):
            if not q:
                continue
            key = self._head_key(i, q[0], now)
            if key[0] == NO_CLASS or not credit[self._credit_class_of(key[0], i)]:
                continue  # a head without credit for its own class does not compete
            if run is not None and i != run and key[0] != 0 and self._is_bulk(i):
                continue  # another bulk tenant's run holds this non-urgent head out
            if best is None or self._beats(key, best_key):
                best, best_key = i, key
        if best is None:
            return None
        cls = best_key[0]
        return best, (URGENT if cls == 0 else GUARANTEED if cls <= 4 else BURST)

    def _is_bulk(self, tenant: int) -> bool:
        """Whether ``tenant``'s priority is marked in ``bulk_prio`` (spec §6.6)."""
        return self.config.bulk_prio >> self.config.tenants[tenant].priority & 1 == 1

    def _run_holder(self, now: int, credit) -> int | None:
        """Spec §6.2's bulk run: the run tenant while its run is shorter than
        ``bulk_run`` and its head competes with credit (it is bulk), else None."""
        n, t = self.run_count, self.run_tenant
        if not 0 < n < self.config.bulk_run or not self.fifo[t] or not self._is_bulk(t):
            return None
        cls = self._head_key(t, self.fifo[t][0], now)[0]
        if cls == NO_CLASS or not credit[self._credit_class_of(cls, t)]:
            return None
        return t

    def _count_run(self, choice: tuple[int, int] | None) -> None:
        """Spec §6.2: a fabric grant to a bulk tenant extends its run (the count
        saturates) or starts a new one at 1; other grants leave the run alone."""
        if choice is None or choice[1] == FCFS or not self._is_bulk(choice[0]):
            return
        if choice[0] == self.run_tenant and self.run_count:
            self.run_count = min(self.run_count + 1, _RUN_MAX)
        else:
            self.run_tenant, self.run_count = choice[0], 1

    # ---- one clock cycle ----------------------------------------------------------------
    def step(self, now: int, req: Request | None, grant_ready: bool,
             credit_return=NO_CREDIT_RETURN) -> StepResult:
        """Advance from cycle t to t+1 with the port inputs of cycle t.

        ``now`` is the fabric timestamp ``t mod 2^TS_BITS``; ``credit_return``
        is the channel's 3-bit ``credit_return`` input as (urgent, guaranteed,
        burst) bits (spec §6.6). Every rule reads cycle-t state and the next
        state is written at the end, one method per spec section.
        """
        if credit_return is not NO_CREDIT_RETURN:
            if len(credit_return) != CREDIT_CLASSES or any(b not in (0, 1) for b in credit_return):
                raise ValueError(f"credit_return must be {CREDIT_CLASSES} bits (urgent, guaranteed, "
                                 f"burst), each 0 or 1, not {credit_return!r}")
        accepted, dropped = self._request_handshake(req)
        transferred = self.grant if (self.grant is not None and grant_ready) else None
        load = self.grant is None or grant_ready
        choice = self.select(now) if load else None

        winner, kind = choice if choice is not None else (-1, None)
        fabric_grant = choice is not None and kind != FCFS
        head = self.fifo[winner][0] if choice is not None else None

        next_vt = self._next_virtual_time(head if fabric_grant else None)
        self._update_buckets(winner if fabric_grant else -1, kind, head)
        self._update_tags(winner if fabric_grant else -1, head)
        self._count_credits(choice, credit_return)
        self._count_run(choice)
        self.vt_prev, self.vt = self.vt, next_vt
        self._advance_queues(now, req if accepted and not dropped else None, choice, load)
        return StepResult(accepted, dropped, transferred)

    def _request_handshake(self, req: Request | None) -> tuple[bool, bool]:
        """Spec §4 in cycle t: ``(accepted, dropped)``. An invalid request is
        accepted and dropped; a valid one waits while its queue is full."""
        if req is None:
            return False, False
        if self.is_invalid(req.tenant, req.bytes):
            return True, True
        occ = len(self.fifo[req.tenant])
        if self.ingress is not None and self.ingress[0] == req.tenant:
            occ += 1
        return occ < self.params.queue_depth, False

    def _next_virtual_time(self, fabric_head: QueueEntry | None) -> int:
        """Spec §6.4 from cycle-t registers: returns V at t+1 and writes
        ``served`` and ``vmin``/``vmin_valid`` of t+1 (``fabric_head``: the
        fabric-mode winner's head, or None)."""
        p = self.params
        tag_mask = (1 << p.tag_bits) - 1
        next_vt = (self.vt + self.served) & tag_mask
        if self.vmin_valid:
            next_vt = mod_max(next_vt, self.vmin, p.tag_bits)
        nonempty = [i for i in range(p.tenants) if self.fifo[i]]
        if nonempty:
            vmin = self.tag[nonempty[0]]
            for i in nonempty[1:]:
                vmin = mod_min(vmin, self.tag[i], p.tag_bits)
            self.vmin, self.vmin_valid = vmin, 1
        else:
            self.vmin, self.vmin_valid = 0, 0
        # served(s) = ceil(s / TAG_UNIT), as served_units(), inlined (hot spot).
        self.served = ((fabric_head.bytes + (1 << p.tag_shift) - 1) >> p.tag_shift
                       if fabric_head is not None else 0)
        return next_vt

    def _update_buckets(self, winner: int, kind: int | None, head: QueueEntry | None) -> None:
        """Spec §6.3: every bucket refills; a fabric-mode ``winner`` (-1: none)
        is debited its head (guaranteed or urgent) or spends its committed
        tokens (burst); a tenant enabled in this cycle is full instead
        (:meth:`_fill_enabled_buckets`, inlined). Locals and inlined min: the
        model's hot spot."""
        pcap = self.params.pcap
        level, peak, prev = self.level, self.peak, self.enable_prev
        for i, cfg in enumerate(self.config.tenants):
            if i == winner:
                debit = head.bytes << self.params.frac
                if kind != BURST:  # guaranteed or urgent
                    level[i] = min(level[i] - debit + cfg.rate, cfg.capacity)
                else:
                    level[i] = min(cfg.rate, cfg.capacity)
                peak[i] = min(peak[i] - debit + cfg.peak_rate, pcap)
            else:
                x = level[i] + cfg.rate
                level[i] = x if x < cfg.capacity else cfg.capacity
                x = peak[i] + cfg.peak_rate
                peak[i] = x if x < pcap else pcap
            if cfg.enable != prev[i]:  # an enable edge (spec §6.3's start)
                prev[i] = cfg.enable
                if cfg.enable:  # enabled now: full at t+1
                    level[i] = cfg.capacity
                    peak[i] = pcap

    def _fill_enabled_buckets(self) -> None:
        """Spec §6.3's start: a tenant enabled in this cycle (``enable`` 1 now,
        0 in the previous cycle) has full buckets at t+1, whatever the refill
        wrote; only the enabling edge fills. :meth:`_update_buckets` applies
        the same inline; :meth:`_refill` calls this."""
        pcap = self.params.pcap
        prev = self.enable_prev
        for i, cfg in enumerate(self.config.tenants):
            if cfg.enable != prev[i]:  # an enable edge, as in _update_buckets
                prev[i] = cfg.enable
                if cfg.enable:  # enabled now, as in _update_buckets
                    self.level[i] = cfg.capacity
                    self.peak[i] = pcap

    def restart_buckets(self) -> None:
        """Bucket levels and every tenant's previous-cycle ``enable`` back to
        their reset values (0), as in cycle 0, so that a tenant enabled now
        fills in this cycle (spec §6.3). The replay engines do this to the
        RTL (and the lockstep checks to the model) at a trace's start, after
        the configuration was programmed, to start from the model engine's
        initial state."""
        n = self.params.tenants
        self.level = [0] * n
        self.peak = [0] * n
        self.enable_prev = [0] * n

    def _update_tags(self, winner: int, head: QueueEntry | None) -> None:
        """Spec §6.4 with cycle-t V: a fabric-mode ``winner``'s start tag
        becomes its finish tag; every other tag is raised to V (empty queue)
        or ``V - LAG_WINDOW`` (backlogged), then capped at ``V + LAG_WINDOW``."""
        p = self.params
        tag_mask = (1 << p.tag_bits) - 1
        half = 1 << (p.tag_bits - 1)
        vt = self.vt
        lag_floor = (vt - p.lag_window) & tag_mask
        ceiling = (vt + p.lag_window) & tag_mask
        tag, fifo = self.tag, self.fifo
        for i in range(p.tenants):
            if i == winner:
                tag[i] = (tag[i] + head.cost) & tag_mask
                continue
            floor = lag_floor if fifo[i] else vt
            if ((tag[i] - floor) & tag_mask) >= half:  # tag_max(tag, floor)
                tag[i] = floor
            if ((ceiling - tag[i]) & tag_mask) >= half:  # tag_min(tag, ceiling)
                tag[i] = ceiling

    def _count_credits(self, choice: tuple[int, int] | None, credit_return) -> None:
        """Spec §6.6: count the selected winner's credit class, then take a
        return unless nothing of that class is in flight."""
        won = None
        if choice is not None:
            winner, kind = choice
            cfg = self.config
            won = credit_class(kind, cfg.tenants[winner].priority, cfg.bulk_prio, cfg.arrival_prio)
        inflight = self.inflight
        for k in range(CREDIT_CLASSES):
            x = inflight[k] + (k == won)
            x = x if x < _INFLIGHT_MAX else _INFLIGHT_MAX
            inflight[k] = x - 1 if (credit_return[k] and x > 0) else x

    def _advance_queues(self, now: int, admitted: Request | None, choice: tuple[int, int] | None,
                        load: bool) -> None:
        """Spec §4 and §6.2's register writes: the winner's queue pops, the
        ingress register pushes into its queue and takes the ``admitted``
        request (its cost at this cycle's ``inv_weight``), and on ``load`` the
        grant register takes the winner (or empties)."""
        head = None
        if choice is not None:
            head = self.fifo[choice[0]].popleft()
        if self.ingress is not None:
            t_i, b_i, id_i, ts_i, cost = self.ingress
            self.fifo[t_i].append(QueueEntry(b_i, id_i, ts_i, cost))
        self.ingress = ((admitted.tenant, admitted.bytes, admitted.id, now,
                         request_cost(admitted.bytes, self.config.tenants[admitted.tenant].inv_weight,
                                      self.params))
                        if admitted is not None else None)
        if load:
            self.grant = (Grant(choice[0], head.bytes, head.id, choice[1], head.ts)
                          if choice is not None else None)

    def skip(self, cycles: int) -> None:
        """Advance ``cycles`` quiescent cycles at once (exact: only buckets refill)."""
        assert self.quiescent(), "skip() is only exact on a quiescent channel"
        if cycles <= 0:
            return
        # One real cycle applies the idle tag clamp; after it V is constant, so the
        # clamp is idempotent and buckets follow min(level + k*rate, cap).
        self._refill(cycles)
        self.vt_prev = self.vt  # V is constant while quiescent
        for i in range(self.params.tenants):
            self.tag[i] = mod_max(self.tag[i], self.vt, self.params.tag_bits)

    def _refill(self, cycles: int) -> None:
        """``cycles`` refills without grants: min(x + rate, cap) applied k times
        (after the first, a tenant enabled in it is full, spec §6.3)."""
        pcap = self.params.pcap
        for i, cfg in enumerate(self.config.tenants):
            self.level[i] = min(self.level[i] + cycles * cfg.rate, cfg.capacity)
            self.peak[i] = min(self.peak[i] + cycles * cfg.peak_rate, pcap)
        self._fill_enabled_buckets()

    def cycles_until_competing(self) -> int | None:
        """Cycles until some head's peak bucket covers it (0: one competes now),
        or None if no head ever will without a configuration change.

        With a credit limit set the answer is 0 whenever a head is queued: a
        head's credit class moves with its buckets and age, so the exact wait
        is not worth deriving, and 0 only means "step normally" (exact)."""
        p = self.params
        if self.config.fcfs_bypass or any(self.config.credits):
            return 0 if any(self.fifo) else None
        best = None
        for i, q in enumerate(self.fifo):
            if not q:
                continue
            need = q[0].bytes << p.frac
            if self.peak[i] >= need:
                return 0
            rate = self.config.tenants[i].peak_rate
            if rate:
                k = -(-(need - self.peak[i]) // rate)
                best = k if best is None else min(best, k)
        return best

    def advance_inert(self, now: int, cycles: int) -> None:
        """Advance ``cycles`` cycles in which nothing is offered and nothing can be
        selected (the grant register is held by a busy memory side, or no head
        competes). The caller guarantees that; the result is exact.

        Only V, served, vmin and the tag clamps evolve besides the buckets, and
        they depend on nothing else, so once one cycle leaves them unchanged the
        rest is a closed-form refill.
        """
        assert self.ingress is None
        mask = (1 << self.params.ts_bits) - 1
        while cycles > 0:
            before = (self.vt_prev, self.vt, self.served, self.vmin, self.vmin_valid, tuple(self.tag))
            held = self.grant
            self.step(now & mask, None, False)
            assert self.grant is held, "advance_inert() called on a cycle with a selection"
            now += 1
            cycles -= 1
            if before == (self.vt_prev, self.vt, self.served, self.vmin, self.vmin_valid, tuple(self.tag)):
                break
        if cycles > 0:
            self._refill(cycles)
