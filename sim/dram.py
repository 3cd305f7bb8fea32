"""Command-level model of one HBM3 channel: the mechanism of the controller.

One :class:`Channel` holds the bank state of both pseudo-channels, the shared
row- and column-command buses, and the controller's transaction queue.  Each
call to :meth:`Channel.tick` may issue one column command (RD/WR) and one row
command (ACT/PRE/REFpb), the most the shared buses carry in a clock.  Which
ones is decided by the policy objects of :mod:`sim.controller` (scheduler,
admission, write drain, refresh, credit return: Ramulator 2's split of
channel legality from ``IScheduler`` / ``IRefreshManager``), which read the
channel and return decisions; only the channel writes its own state.

Open-page policy: a row stays open until a request to another row of the
same bank (or a refresh) closes it.  Refresh is per bank (REFpb): every
``tREFIpb`` one bank of each pseudo-channel is closed and refreshed for
``tRFCpb``, in the order the refresh policy picks.

Time is an integer cycle count.  The row-command bus is booked in half
cycles because an activate occupies it for 1.5 clocks; a command is issued
on a clock edge once the bus is free within that clock, and timing
constraints are counted from that edge (so they are never shorter than
JEDEC's).
"""

import heapq

from .controller import BURST_CLASS, NoDrain, RoundRobinRefresh, SharedQueues, WatermarkDrain, make_scheduler
from .hbm3 import HBM3_6400, HBM3_GEOMETRY

__all__ = ["Request", "Channel", "HIT", "MISS", "CONFLICT", "NEVER"]

NEVER = 1 << 62
# Commands a bank can want next (identity-compared sentinels).
_COL, _ACT, _PRE, _REF = "COL", "ACT", "PRE", "REF"

# How a request found its bank when it was served.
HIT, MISS, CONFLICT = 1, 2, 3


class Request:
    """One 32-byte access (one column command).

    Attributes
    ----------
    tenant : int
        Tenant tag (the essay's 4-bit tag in the memory request).
    is_write : bool
    bank, row : int
        Flat bank index within the channel and row within the bank.
    arrival : int
        Cycle the request entered the memory system (source queue).
    owner : object
        The transaction the access belongs to (see :mod:`sim.system`).
    seq : int
        Global arrival order, unique per access (a transaction's accesses
        in address order); ties in ``arrival`` are broken by it.
    rank : int
        Scheduling order among equals (lower first): ``seq``, unless the
        front end marks the request as less urgent.
    admitted, issued, done : int
        Cycles of entry into the transaction queue, of the column command,
        and of the end of the data burst.
    acted : int
        Cycle of the first row command issued for it (the precharge that
        closed another row for it, or its activate; -1: none, a row hit):
        the start of its bank's part of the wait (:meth:`Channel.enable_waits`).
    kind : int
        HIT, MISS or CONFLICT, set when served.
    evicted : int
        For a CONFLICT, the tenant whose open row was closed for it.
    qclass : int
        QoS class (0 urgent, 1 guaranteed, 2 burst/best effort), set by the
        front end; only class-aware controller policies look at it.
    axqos : int
        AXI-style QoS value 0..15 the front end derived the rank from.
    """

    __slots__ = (
        "tenant", "is_write", "bank", "row", "arrival", "owner", "seq", "rank",
        "admitted", "issued", "done", "kind", "nbytes", "evicted", "qclass", "axqos", "acted",
    )

    def __init__(self, tenant, is_write, bank, row, arrival, owner=None, nbytes=32):
        self.tenant = tenant
        self.is_write = is_write
        self.bank = bank
        self.row = row
        self.arrival = arrival
        self.owner = owner
        self.seq = 0
        self.rank = 0
        self.admitted = -1
        self.issued = -1
        self.done = -1
        self.kind = 0
        self.evicted = -1
        self.nbytes = nbytes
        self.qclass = BURST_CLASS
        self.axqos = 0
        self.acted = -1

    def __repr__(self):
        op = "WR" if self.is_write else "RD"
        return (f"Request(t{self.tenant} {op} bank={self.bank} row={self.row} "
                f"arr={self.arrival} seq={self.seq})")


class Channel:
    """One HBM3 channel: bank state machines, timing checks, scheduler.

    The channel is the mechanism (bank state, timing legality, buses,
    queues); the policies are strategy objects from :mod:`sim.controller`.

    Parameters
    ----------
    scheduler : {"fcfs", "frfcfs", "qos"} or scheduler object
        A name takes the scheduler's defaults (:func:`~sim.controller.make_scheduler`).
    admission : admission object or None
        Which requests fit; default :class:`~sim.controller.SharedQueues`
        (its default read and write queues).
    drain : write-drain object or None
        Default: :class:`~sim.controller.WatermarkDrain` at its default
        watermarks for schedulers that batch writes, none for FCFS.
    refresh_policy : refresh object or None
        Default :class:`~sim.controller.RoundRobinRefresh`.
    refresh : bool
        Model per-bank refresh.  Latency tests turn it off to see the bare
        timing set.
    n_tenants : int
        Size of the per-tenant statistics arrays.
    log_commands : bool
        Keep ``(cycle, command, bank, row, row_bus_start_half)`` for every
        command (the last is None for column commands), for the independent
        timing checker in the tests.

    What a policy may read: ``pc_of``, ``open_row``, ``bank_queue``,
    ``bypassed``, ``write_mode``, ``write_batch``, ``read_turn``, ``stuck``, ``pc_queued``,
    ``pc_writes``, ``pc_class_reads``, ``pc_class_writes``, ``class_queued``,
    ``class_freed``, the timing and the bank timers.  It writes none of them
    (tests/test_sim_sched.py checks the source).
    """

    def __init__(self, *, timing=HBM3_6400, geometry=HBM3_GEOMETRY, scheduler="frfcfs",
                 admission=None, drain=None, refresh_policy=None, refresh=True, n_tenants=8,
                 log_commands=False):
        self.policy = make_scheduler(scheduler)
        self.admission = admission or SharedQueues()
        if drain is None:
            drain = WatermarkDrain() if self.policy.batches_writes else NoDrain()
        self.drain = drain
        self.refresh_policy = refresh_policy or RoundRobinRefresh()
        self.timing = timing
        self.geometry = geometry
        self.batches_writes = self.policy.batches_writes
        self.scheduler = self.policy.name
        self._act_gate = getattr(self.policy, "may_activate", None)
        self._drain_release = getattr(self.drain, "wake", None)
        self.refresh = refresh
        g = geometry
        nb = g.banks
        nbg = nb // g.banks_per_group
        npc = g.pseudo_channels
        self.pc_of = [g.split_bank_id(b)[0] for b in range(nb)]
        self._sid_of = [g.split_bank_id(b)[1] for b in range(nb)]
        self._bg_of = [g.bank_group_id(b) for b in range(nb)]
        # Bank state: open row (-1 closed) and earliest cycle of each command.
        self.open_row = [-1] * nb
        self.next_act = [0] * nb
        self.next_pre = [0] * nb
        self.next_rd = [0] * nb
        self.next_wr = [0] * nb
        self.refresh_pending = [False] * nb
        self._conflict_pending = [False] * nb
        self._evicted_tenant = [-1] * nb
        self._row_tenant = [-1] * nb
        # Bank-group and pseudo-channel constraints.
        self.bg_next_rd = [0] * nbg
        self.bg_next_wr = [0] * nbg
        self.bg_next_act = [0] * nbg
        self._no_group_timer = [0] * nbg  # a precharge's (see _candidate)
        self.pc_next_rd = [0] * npc
        self.pc_next_wr = [0] * npc
        self.pc_next_act = [0] * npc
        self.pc_next_pre = [0] * npc
        self.pc_last_col = [-NEVER] * npc
        self.pc_last_sid = [-1] * npc
        self.pc_faw = [[-NEVER] * 4 for _ in range(npc)]  # last four ACTs, oldest first
        self.row_bus_free_half = 0
        # Per-bank refresh, round robin, pseudo-channels staggered by half a slot.
        self.ref_due = [timing.tREFIpb + p * (timing.tREFIpb // npc) for p in range(npc)]
        self.ref_todo = [set() for _ in range(npc)]
        self.ref_bank = [-1] * npc  # bank whose refresh is pending, per pseudo-channel
        self._next_ref_due = min(self.ref_due)
        # Transaction queue, kept per bank in arrival order.
        self.bank_queue = [[] for _ in range(nb)]
        self._cand = [False] * nb  # cached _candidate() per bank; False = stale
        # A lower bound of the cycle the cached candidate can issue (NEVER: no
        # candidate, -1: stale), so tick() passes over a bank until then.
        self._bound = [-1] * nb
        self._pc_work = [0] * npc  # banks per pseudo-channel with a fresh candidate
        self.bypassed = [0] * nb  # row hits served past an older request since the ACT
        self.active = set()
        self.occupancy = 0         # reads and writes queued
        self.writes_queued = 0
        self.tenant_occupancy = [0] * n_tenants
        self.class_queued = [0] * 3  # entries per QoS class
        self.class_freed = [0] * 3   # entries freed per QoS class so far (credit returns)
        # Bus direction per pseudo-channel: each has its own data bus, so
        # each turns around on its own.
        self.pc_queued = [0] * npc
        self.pc_writes = [0] * npc
        self.write_mode = [False] * npc
        self.write_batch = [0] * npc  # writes issued in the current write batch
        self.read_turn = [0] * npc    # reads issued since the pseudo-channel last left write mode
        self.stuck = [False] * npc    # no candidate in the current direction
        self.pc_class_reads = [[0] * 3 for _ in range(npc)]
        self.pc_class_writes = [[0] * 3 for _ in range(npc)]
        # In-flight data bursts: (done cycle, seq, request).
        self.inflight = []
        # Statistics.
        self.stats = ChannelStats(n_tenants)
        self.log = [] if log_commands else None
        #: Where queued requests wait (None until :meth:`enable_waits`).
        self.waits = None

    # -- queue -------------------------------------------------------------
    def has_room(self, entries=1, is_write=False, qclass=BURST_CLASS):
        """Whether ``entries`` accesses of this direction and class fit (admission policy)."""
        return self.admission.has_room(self, entries, is_write, qclass)

    @property
    def entries(self):
        """Total queue entries."""
        return self.admission.entries

    def _invalidate(self, b):
        """Bank ``b``'s candidate is stale: recompute it at the next tick."""
        if self._cand[b]:
            self._pc_work[self.pc_of[b]] -= 1
        self._cand[b] = False
        self._bound[b] = -1

    def enqueue(self, req, now):
        """Accept a request into the transaction queue (caller checks room)."""
        req.admitted = now
        b = req.bank
        pc = self.pc_of[b]
        if self._cand[b]:
            self._pc_work[pc] -= 1
        self._cand[b] = False
        self._bound[b] = -1
        self.bank_queue[b].append(req)
        self.active.add(b)
        self.occupancy += 1
        self.tenant_occupancy[req.tenant] += 1
        k = req.qclass
        self.class_queued[k] += 1
        self.pc_queued[pc] += 1
        if req.is_write:
            self.pc_writes[pc] += 1
            self.pc_class_writes[pc][k] += 1
            self.writes_queued += 1
        else:
            self.pc_class_reads[pc][k] += 1

    def pop_completions(self, now):
        """Requests whose data burst has ended by ``now``."""
        inflight = self.inflight
        if not inflight or inflight[0][0] > now:
            return []
        done = []
        while inflight and inflight[0][0] <= now:
            done.append(heapq.heappop(inflight)[2])
        return done

    def next_completion(self):
        return self.inflight[0][0] if self.inflight else NEVER

    # -- readiness ---------------------------------------------------------
    def _column_ready(self, req):
        b = req.bank
        pc = self.pc_of[b]
        if req.is_write:
            t = max(self.next_wr[b], self.bg_next_wr[self._bg_of[b]], self.pc_next_wr[pc])
        else:
            t = max(self.next_rd[b], self.bg_next_rd[self._bg_of[b]], self.pc_next_rd[pc])
        if self.pc_last_sid[pc] != self._sid_of[b]:
            t = max(t, self.pc_last_col[pc] + self.timing.tCCD_R)
        return t

    def _act_ready(self, b):
        pc = self.pc_of[b]
        return max(self.next_act[b], self.bg_next_act[self._bg_of[b]], self.pc_next_act[pc],
                   self.pc_faw[pc][0] + self.timing.tFAW, self._row_bus_cycle())

    def _pre_ready(self, b):
        return max(self.next_pre[b], self.pc_next_pre[self.pc_of[b]], self._row_bus_cycle())

    def _row_bus_cycle(self):
        # A row command may start in the clock whose second half frees the bus.
        return self.row_bus_free_half // 2

    # -- issue -------------------------------------------------------------
    def _issue_column(self, req, now):
        tm = self.timing
        b = req.bank
        pc = self.pc_of[b]
        bg = self._bg_of[b]
        queue = self.bank_queue[b]
        if self.policy.bypasses(self, req):
            self.bypassed[b] += 1
        queue.remove(req)
        if self._cand[b]:
            self._pc_work[pc] -= 1
        self._cand[b] = False
        self._bound[b] = -1
        if not queue:
            self.active.discard(b)
        self.occupancy -= 1
        self.tenant_occupancy[req.tenant] -= 1
        k = req.qclass
        self.class_queued[k] -= 1
        self.class_freed[k] += 1
        self.pc_queued[pc] -= 1
        if req.is_write:
            self.pc_writes[pc] -= 1
            self.pc_class_writes[pc][k] -= 1
            self.writes_queued -= 1
            self.write_batch[pc] += 1
            end = now + tm.CWL + tm.burst
            self.next_pre[b] = max(self.next_pre[b], end + tm.tWR)
            self.bg_next_wr[bg] = max(self.bg_next_wr[bg], now + tm.tCCD_L)
            self.bg_next_rd[bg] = max(self.bg_next_rd[bg], end + tm.tWTR_L)
            self.pc_next_wr[pc] = max(self.pc_next_wr[pc], now + tm.tCCD_S)
            self.pc_next_rd[pc] = max(self.pc_next_rd[pc], end + tm.tWTR_S)
        else:
            self.pc_class_reads[pc][k] -= 1
            self.read_turn[pc] += 1
            end = now + tm.CL + tm.burst
            self.next_pre[b] = max(self.next_pre[b], now + tm.tRTP)
            self.bg_next_rd[bg] = max(self.bg_next_rd[bg], now + tm.tCCD_L)
            self.pc_next_rd[pc] = max(self.pc_next_rd[pc], now + tm.tCCD_S)
            self.pc_next_wr[pc] = max(self.pc_next_wr[pc], now + tm.tRTW)
        self.pc_last_col[pc] = now
        self.pc_last_sid[pc] = self._sid_of[b]
        if not req.kind:
            req.kind = HIT
        req.issued = now
        req.done = end
        heapq.heappush(self.inflight, (end, req.seq, req))
        self.stats.count_access(req, end)
        if self.log is not None:
            self.log.append((now, "WR" if req.is_write else "RD", b, req.row, None))

    def _row_command_edge(self, now, bus_half):
        """Book the row bus; return the clock edge timing is counted from.

        A command that has to wait for the second half of ``now`` is treated
        as issued at the next edge, so no constraint ends up shorter.
        """
        start_half = max(2 * now, self.row_bus_free_half)
        self.row_bus_free_half = start_half + bus_half
        return (start_half + 1) // 2

    def _issue_act(self, b, req, now):
        tm = self.timing
        pc = self.pc_of[b]
        now = self._row_command_edge(now, tm.act_bus_half)
        if req.acted < 0:
            req.acted = now
        self.open_row[b] = req.row
        self._invalidate(b)
        self.bypassed[b] = 0
        self.next_rd[b] = now + tm.tRCD_RD
        self.next_wr[b] = now + tm.tRCD_WR
        self.next_pre[b] = now + tm.tRAS
        self.next_act[b] = now + tm.tRC
        bg = self._bg_of[b]
        self.bg_next_act[bg] = max(self.bg_next_act[bg], now + tm.tRRD_L)
        self.pc_next_act[pc] = max(self.pc_next_act[pc], now + tm.tRRD_S)
        faw = self.pc_faw[pc]
        faw.pop(0)
        faw.append(now)
        if self._conflict_pending[b]:
            req.kind = CONFLICT
            req.evicted = self._evicted_tenant[b]
        else:
            req.kind = MISS
        self._conflict_pending[b] = False
        self._row_tenant[b] = req.tenant
        self.stats.acts += 1
        if self.log is not None:
            self.log.append((now, "ACT", b, req.row, self.row_bus_free_half - tm.act_bus_half))

    def _issue_pre(self, b, now, cause):
        """Close bank ``b``; ``cause`` is the request that needs another row, or None."""
        tm = self.timing
        now = self._row_command_edge(now, tm.pre_bus_half)
        self.next_act[b] = max(self.next_act[b], now + tm.tRP)
        pc = self.pc_of[b]
        self.pc_next_pre[pc] = now + tm.tPPD
        if cause is not None:
            if cause.acted < 0:
                cause.acted = now
            self._conflict_pending[b] = True
            self._evicted_tenant[b] = self._row_tenant[b]
        if self.log is not None:
            self.log.append((now, "PRE", b, self.open_row[b], self.row_bus_free_half - tm.pre_bus_half))
        self.open_row[b] = -1
        self._invalidate(b)
        self.stats.pres += 1

    def _issue_ref(self, b, now):
        tm = self.timing
        now = self._row_command_edge(now, tm.ref_bus_half)
        self.next_act[b] = now + tm.tRFCpb
        if self.waits is not None:
            self.waits["refresh"][b].append((self._ref_since[b], now + tm.tRFCpb))
        self.refresh_pending[b] = False
        self._invalidate(b)
        pc = self.pc_of[b]
        self.ref_bank[pc] = -1
        self._next_ref_due = min(self._next_ref_due, self.ref_due[pc])
        self._conflict_pending[b] = False
        self.stats.refs += 1
        if self.log is not None:
            self.log.append((now, "REF", b, -1, self.row_bus_free_half - tm.ref_bus_half))

    # -- refresh -----------------------------------------------------------
    def _refresh_due(self, now):
        """Pick the bank to refresh for every pseudo-channel whose slot has come.

        Each bank is refreshed once per round of ``banks_per_pc`` slots
        (one tREFI).  Within a round the order is free, so the controller
        picks a bank with no queued work, closed if possible, and only falls
        back to the busiest-last choice when every remaining bank is in use.
        """
        g = self.geometry
        per_pc = g.banks_per_pc
        retry = NEVER
        for pc in range(g.pseudo_channels):
            # One refresh outstanding per pseudo-channel; a late one is
            # caught up right after, as JEDEC's postponement allows.
            if self.ref_bank[pc] < 0 and self.ref_due[pc] <= now:
                todo = self.ref_todo[pc]
                if not todo:
                    todo.update(range(pc * per_pc, (pc + 1) * per_pc))
                again = self.refresh_policy.postpone(self, pc, todo, now)
                if again is not None:
                    retry = min(retry, max(again, now + 1))
                    self.stats.ref_postponed += 1
                    continue
                b = self.refresh_policy.pick(self, pc, todo)
                todo.discard(b)
                self.refresh_pending[b] = True
                if self.waits is not None:
                    self._ref_since[b] = now
                self._invalidate(b)
                self.ref_bank[pc] = b
                self.ref_due[pc] += self.timing.tREFIpb
                self.stats.ref_late_max = max(self.stats.ref_late_max, now - (self.ref_due[pc] - self.timing.tREFIpb))
        due = [max(d, retry) if d <= now else d for pc, d in enumerate(self.ref_due) if self.ref_bank[pc] < 0]
        self._next_ref_due = min(due) if due else NEVER

    # -- scheduling ----------------------------------------------------------
    def _candidate(self, b):
        """What bank ``b`` wants next: ``(command, request, rank, bank_timers,
        group_timers, pc_timers, bank_group, pseudo_channel)``.

        None if nothing.  The three timer lists are those the command waits
        for, indexed by bank, bank group and pseudo-channel (a precharge has
        no bank-group timer: a list of zeros); an activation also waits for
        tFAW and both row commands for the row bus.  Cached per bank and
        recomputed only when the bank's queue, open row, refresh state or
        the bus direction changes.
        """
        if self.refresh_pending[b]:
            return None
        choice = self.policy.candidate(self, b)
        if choice is None:
            return None
        head, is_hit = choice
        g = self._bg_of[b]
        p = self.pc_of[b]
        if is_hit:
            if head.is_write:
                return (_COL, head, head.rank, self.next_wr, self.bg_next_wr, self.pc_next_wr, g, p)
            return (_COL, head, head.rank, self.next_rd, self.bg_next_rd, self.pc_next_rd, g, p)
        if self.open_row[b] >= 0:
            return (_PRE, head, head.rank, self.next_pre, self._no_group_timer, self.pc_next_pre, g, p)
        return (_ACT, head, head.rank, self.next_act, self.bg_next_act, self.pc_next_act, g, p)

    def tick(self, now, horizon=NEVER):
        """Issue at most one column and one row command at cycle ``now``.

        Parameters
        ----------
        horizon : int
            The caller's next visit for other reasons; the wake-up time is
            not worked out beyond it.

        Returns
        -------
        int
            The next cycle at which a command could possibly issue (or a
            refresh fall due), so that the caller may skip idle clocks.
        """
        # This is the hot loop of every experiment: what each bank wants is
        # cached with a lower bound of when it can issue (banks below their
        # bound are passed over), and exact ready times are computed only
        # when nothing issues and the caller needs to know how far to skip.
        if self.refresh and now >= self._next_ref_due:
            self._refresh_due(now)
        if self.batches_writes:
            for pc, mode in self.drain.update(self, now):
                if self.waits is not None and mode != self.write_mode[pc]:
                    if mode:
                        self._drain_since[pc] = now
                    else:
                        self.waits["drain"][pc].append((self._drain_since[pc], now))
                        self._drain_since[pc] = None
                self.set_write_mode(pc, mode)
            stuck = self.stuck  # the drain has looked at it: start over
            if True in stuck:
                stuck[:] = [False] * len(stuck)
        cache = self._cand
        bound = self._bound
        active = self.active
        pc_of, sid_of = self.pc_of, self._sid_of
        pc_work = self._pc_work
        pc_faw = self.pc_faw
        pc_last_sid, pc_last_col = self.pc_last_sid, self.pc_last_col
        tCCD_R = self.timing.tCCD_R
        tFAW = self.timing.tFAW
        row_bus = self.row_bus_free_half // 2
        act_gate = self._act_gate
        candidate = self._candidate

        best_col = None
        best_col_rank = NEVER
        best_row = None       # (command, bank, request)
        best_row_rank = NEVER
        deferred = []         # refresh commands that were not ready, for the wake-up time
        need_wake = horizon > now + 1
        # Refresh first: a pending refresh beats any other row command.
        if max(self.ref_bank) >= 0:
            open_row, next_act, next_pre, pc_next_pre = self.open_row, self.next_act, self.next_pre, self.pc_next_pre
            for b in self.ref_bank:
                if b < 0:
                    continue
                if open_row[b] >= 0:
                    if row_bus <= now and pc_next_pre[pc_of[b]] <= now and next_pre[b] <= now:
                        best_row, best_row_rank = (_PRE, b, None), -1
                        break
                    need_wake and deferred.append((_PRE, b))
                else:
                    if row_bus <= now and next_act[b] <= now:
                        best_row, best_row_rank = (_REF, b, None), -1
                        break
                    need_wake and deferred.append((_REF, b))

        # A bank's bound is a lower bound of the cycle its candidate can
        # issue: the latest of the bank, bank-group, pseudo-channel and
        # row-bus timers that command waits for.  Each of them only grows,
        # and a command to the bank (which changes its own timers) or a
        # change of its queue, row or bus direction invalidates the
        # candidate, so the bound stays one until then and the bank need not
        # be looked at before it.  The tCCD_R term is left out (it goes away
        # when the pseudo-channel's stack ID changes), as is the scheduler's
        # hold on an activation.  Banks are looked at in ``active``'s order,
        # the first of equal rank winning.  A column command ranked no better
        # than the best found so far cannot win this cycle, so its timers are
        # not looked at (its bound stays: a bound is only ever a lower bound).
        for b in active:
            if bound[b] > now:
                continue
            cand = cache[b]
            if cand is False:
                cand = cache[b] = candidate(b)
                if cand is None:
                    bound[b] = NEVER
                    continue
                pc_work[pc_of[b]] += 1
            cmd, req, rank, own, group, pcs, g, p = cand
            if cmd is _COL and rank >= best_col_rank:
                continue
            t = own[b]
            u = group[g]
            if u > t:
                t = u
            u = pcs[p]
            if u > t:
                t = u
            if cmd is _COL:
                ok = t <= now
                if ok and pc_last_sid[p] != sid_of[b]:
                    ok = pc_last_col[p] + tCCD_R <= now
                if ok:
                    best_col, best_col_rank = req, rank
                elif t > now:
                    bound[b] = t
                continue
            if cmd is _ACT:
                u = pc_faw[p][0] + tFAW
                if u > t:
                    t = u
            if row_bus > t:
                t = row_bus
            if t > now:
                bound[b] = t
            elif rank < best_row_rank:
                # The scheduler may hold an activation back (a policy
                # decision); it is looked at again next cycle.
                if cmd is _PRE or act_gate is None or act_gate(self, req, p, now):
                    best_row, best_row_rank = (cmd, b, req), rank

        if self.batches_writes:
            # A direction with nothing it can do hands the bus over.
            for pc, work in enumerate(pc_work):
                if not work and self.pc_queued[pc]:
                    self.stuck[pc] = True
        if best_col is not None:
            self._issue_column(best_col, now)
        if best_row is not None:
            cmd, b, req = best_row
            if cmd is _ACT:
                self._issue_act(b, req, now)
            elif cmd is _PRE:
                self._issue_pre(b, now, req)
            else:
                self._issue_ref(b, now)
        if best_col is not None or best_row is not None or not need_wake:
            return now + 1
        # Nothing issued: wake up at the earliest exact ready cycle of any
        # candidate (none is below its bound).
        wake = min(self._next_ref_due if self.refresh else NEVER, horizon, self._drain_wake())
        for cmd, b in deferred:
            if cmd is _PRE:
                t = self._pre_ready(b)
            else:
                t = max(self.next_act[b], self._row_bus_cycle())
            if t < wake:
                wake = t
        for b in active:
            if bound[b] >= wake:
                continue
            cmd, req = cache[b][:2]
            if cmd is _COL:
                t = self._column_ready(req)
            elif cmd is _ACT:
                t = self._act_ready(b)
            else:
                t = self._pre_ready(b)
            if t < wake:
                wake = t
                if wake <= now + 1:
                    break
        return max(wake, now + 1)

    def enable_waits(self):
        """Record the intervals in which a queued request can wait for something
        other than its turn (the workload family's wait attribution): per bank
        ``waits["refresh"][b]`` the ``(start, end)`` of each refresh, from its
        bank's pick (closed to new work) to the end of tRFCpb; per
        pseudo-channel ``waits["drain"][pc]`` each write-mode span (reads
        held), an open one as ``(start, None)``.  Bookkeeping only: nothing
        simulated depends on it."""
        g = self.geometry
        self.waits = {"refresh": [[] for _ in range(g.banks)], "drain": [[] for _ in range(g.pseudo_channels)]}
        self._ref_since = [0] * g.banks
        self._drain_since = [None] * g.pseudo_channels
        return self.waits

    def wait_spans(self):
        """:attr:`waits` with any open write-mode span closed at NEVER."""
        drain = [spans + ([(s, NEVER)] if s is not None else [])
                 for spans, s in zip(self.waits["drain"], self._drain_since)]
        return {"refresh": self.waits["refresh"], "drain": drain}

    def _drain_wake(self):
        # A drain policy that holds a due drain back names when it lets go.
        t = self._drain_release() if self._drain_release is not None else None
        return NEVER if t is None else t

    def _pending_refresh_banks(self):
        return [b for b in self.ref_bank if b >= 0]

    def set_write_mode(self, pc, mode):
        """Turn pseudo-channel ``pc``'s data bus to writes (True) or reads; a
        new write batch, or a new read turn, starts counting from 0."""
        self.write_mode[pc] = mode
        if mode:
            self.write_batch[pc] = 0
        else:
            self.read_turn[pc] = 0
        per_pc = self.geometry.banks_per_pc
        for b in range(pc * per_pc, (pc + 1) * per_pc):
            self._invalidate(b)


class ChannelStats:
    """Counters the experiments read; all integers."""

    def __init__(self, n_tenants):
        self.bytes = [0] * n_tenants
        self.accesses = [0] * n_tenants
        self.hits = [0] * n_tenants
        self.misses = [0] * n_tenants
        self.conflicts = [0] * n_tenants
        self.inter_tenant_conflicts = [0] * n_tenants
        self.acts = 0
        self.pres = 0
        self.refs = 0
        self.ref_postponed = 0    # refresh decisions deferred by the refresh policy
        self.ref_late_max = 0     # cycles the latest refresh was issued after its slot
        self.last_data_cycle = 0
        self.window = 0
        self.timeline = None  # per-window bytes per tenant, if enabled

    def enable_timeline(self, window_cycles):
        """Record bytes per tenant in windows of ``window_cycles`` cycles."""
        self.window = window_cycles
        self.timeline = {}

    def count_access(self, req, end):
        t = req.tenant
        self.bytes[t] += req.nbytes
        self.accesses[t] += 1
        if req.kind == HIT:
            self.hits[t] += 1
        elif req.kind == MISS:
            self.misses[t] += 1
        else:
            self.conflicts[t] += 1
            if req.evicted != t:
                self.inter_tenant_conflicts[t] += 1
        self.last_data_cycle = end
        if self.timeline is not None:
            w = end // self.window
            row = self.timeline.get(w)
            if row is None:
                row = self.timeline[w] = [0] * len(self.bytes)
            row[t] += req.nbytes
