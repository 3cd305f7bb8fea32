"""Controller policies: the strategy objects a :class:`~sim.dram.Channel` is built with.

The channel is the mechanism: bank state, the JEDEC timing checks, the
command buses and the queues.  What it does with them is decided here, by
small objects passed in (the split follows Ramulator 2's ``IScheduler`` /
``IRefreshManager`` / ``IRowPolicy``):

scheduler
    per bank, which queued request it wants next (:meth:`candidate`) and the
    rank by which the channel orders the banks' wishes; asked at every
    column command whether it bypasses an older request (:meth:`bypasses`;
    the channel counts it for the row-hit cap); it may hold a legal
    activation back (optional :meth:`may_activate`).
admission
    which requests fit (:meth:`has_room`), entry accounting per class.
credit return
    when the freed entries of a class go back to the arbiter as credits
    (spec §6.6's ``credit_return`` port; only behind a credit-based front end).
write drain
    per pseudo-channel, whether the data bus serves reads or writes
    (:meth:`update` returns the ``(pc, write_mode)`` changes; the channel
    applies them).
refresh
    which bank of a pseudo-channel is refreshed next, and whether a due
    refresh may wait.

Requests carry a QoS class (``qclass``: 0 urgent, 1 guaranteed, 2 burst /
best effort, the arbiter's credit classes) and an AXI-style ``axqos``
(0..15, higher is more urgent).  A QoS-aware front end encodes ``axqos``
into the request's rank (:func:`qos_rank`), so "class first, then AxQOS,
then age" is simply the lowest rank.

Every policy reads the channel (the attributes :class:`~sim.dram.Channel`
lists) and returns its decision; none writes channel state.
"""

from collections import deque
from dataclasses import dataclass

from kvfabric.spec import CREDIT_BURST, CREDIT_CLASSES, CREDIT_GUARANTEED, CREDIT_URGENT

__all__ = [
    "URGENT_CLASS", "GUARANTEED_CLASS", "BURST_CLASS", "CLASS_NAMES", "qos_rank",
    "FcfsScheduler", "FrFcfsScheduler", "QosScheduler",
    "SharedQueues", "ReservedEntries",
    "WatermarkDrain", "PreemptingDrain", "NoDrain",
    "RoundRobinRefresh", "QosRefresh", "make_scheduler",
    "CreditReturn", "YieldingCreditReturn",
]

#: The controller's QoS classes are the arbiter's credit classes (spec §6.6).
URGENT_CLASS, GUARANTEED_CLASS, BURST_CLASS = CREDIT_URGENT, CREDIT_GUARANTEED, CREDIT_BURST
CLASS_NAMES = ("urgent", "guaranteed", "burst")
N_CLASSES = CREDIT_CLASSES
_AXQOS_SHIFT = 50
_CLASS_SHIFT = 54


def qos_rank(axqos, seq, qclass):
    """Rank of a request: lower class first, then higher AxQOS, then arrival order.

    The class comes first because AxQOS alone does not order the classes:
    a bulk priority's guaranteed reads (burst class, AxQOS up to 11) can
    outrank a latency-bound tenant's burst reads (guaranteed class, AxQOS
    5, spec §6.6).  Ranked by AxQOS alone, such a burst-class read at a
    bank's head, whose activation :class:`QosScheduler`'s guard holds back
    while guaranteed-class reads are queued, would hold back the very
    guaranteed-class reads queued behind it in that bank (measured: a
    240 us stall, issue #41).
    """
    return (qclass << _CLASS_SHIFT) | ((15 - axqos) << _AXQOS_SHIFT) | seq


# -- schedulers ------------------------------------------------------------------------
class FcfsScheduler:
    """Per bank strictly in arrival order; no read/write separation."""

    name = "fcfs"
    batches_writes = False

    def candidate(self, ch, b):
        queue = ch.bank_queue[b]
        head = queue[0]
        return head, head.row == ch.open_row[b]

    def bypasses(self, ch, req):
        return False


class FrFcfsScheduler:
    """First-ready FCFS with a cap on row hits bypassing an older request.

    Only requests of the pseudo-channel's current bus direction are looked at
    (write batching is the drain policy's job).  The best-ranked hit is
    served unless ``row_hit_cap`` hits have already bypassed an older
    request of the bank since its row opened.
    """

    name = "frfcfs"
    batches_writes = True

    def __init__(self, row_hit_cap=16):
        if not isinstance(row_hit_cap, int) or row_hit_cap < 0:
            raise ValueError(f"Row-hit cap must be a non-negative integer, not {row_hit_cap!r}")
        self.row_hit_cap = row_hit_cap

    def candidate(self, ch, b):
        write_mode = ch.write_mode[ch.pc_of[b]]
        row = ch.open_row[b]
        head = hit = None
        head_rank = hit_rank = 0  # the ranks of head and hit, once set
        for r in ch.bank_queue[b]:
            if r.is_write == write_mode:
                rank = r.rank
                if head is None or rank < head_rank:
                    head, head_rank = r, rank
                if r.row == row and (hit is None or rank < hit_rank):
                    hit, hit_rank = r, rank
        if head is None:
            return None
        if hit is not None and (hit is head or self._may_bypass(ch, b, hit, head)):
            return hit, True
        return head, False

    def _may_bypass(self, ch, b, hit, head):
        return ch.bypassed[b] < self.row_hit_cap

    def bypasses(self, ch, req):
        """Whether serving ``req`` passes an older request of its bank and
        direction (the channel then counts one bypass for the cap)."""
        is_write, rank = req.is_write, req.rank
        for r in ch.bank_queue[req.bank]:
            if r.rank < rank and r.is_write == is_write:
                return True
        return False


class QosScheduler(FrFcfsScheduler):
    """Class first, then AxQOS, then FR-FCFS inside a QoS level.

    A row hit may only bypass an older request of its own class and AxQOS
    level (a burst or lower-priority request's open row never delays a
    guaranteed one: the guaranteed request's precharge wins), and best-effort hits are
    capped harder (FR-FCFS-Cap) than guaranteed ones.

    Commands already issued are not preemptible, so class-first ordering
    alone still lets a burst read open a row whenever no guaranteed command
    is ready at that cycle, and that activation takes one of the four tFAW
    slots of its pseudo-channel (and its bank for tRC) just before the
    guaranteed reads waiting there need them.  With ``guard_activations``,
    while reads of the urgent or guaranteed class are queued in a
    pseudo-channel, a burst-class read may open a row there only into an
    empty tFAW window (no activation in the last tFAW cycles): it never
    takes a slot the protected reads could use, and it still progresses
    while they wait on bank timing.  Writes are never held back (a write
    drain must be able to finish).  A guard rather than an outright ban on
    burst activations: a ban would also idle the burst class while the
    protected reads wait on bank timing, which costs the prefill bandwidth.

    Parameters
    ----------
    row_hit_caps : tuple of 3 ints
        Bypassing hits allowed per class (urgent, guaranteed, burst).
    guard_activations : bool
        Hold burst-class row activations back as described above.
    """

    name = "qos"

    def __init__(self, row_hit_caps=(16, 16, 4), guard_activations=True):
        if len(row_hit_caps) != N_CLASSES or any(not isinstance(c, int) or c < 0 for c in row_hit_caps):
            raise ValueError(f"Row-hit caps must be three non-negative integers, not {row_hit_caps!r}")
        if not isinstance(guard_activations, bool):
            raise ValueError(f"guard_activations must be True or False, not {guard_activations!r}")
        super().__init__(max(row_hit_caps))
        self.row_hit_caps = tuple(row_hit_caps)
        self.guard_activations = guard_activations

    def may_activate(self, ch, req, pc, now):
        """Whether ``req`` may open its row in pseudo-channel ``pc`` at ``now``
        (asked by the channel only once every timing rule allows the ACT)."""
        if not self.guard_activations or req.qclass != BURST_CLASS or req.is_write:
            return True
        waiting = ch.pc_class_reads[pc]
        if not (waiting[URGENT_CLASS] or waiting[GUARANTEED_CLASS]):
            return True
        window_start = now - ch.timing.tFAW
        return max(ch.pc_faw[pc]) <= window_start  # every activation of the window before it

    def _may_bypass(self, ch, b, hit, head):
        # Same QoS level, the rank's class and AxQOS (qos_rank): a lower
        # level's open row never delays a higher one's request, and every
        # request the hit passes is of its level.
        return (hit.qclass == head.qclass and hit.axqos == head.axqos
                and ch.bypassed[b] < self.row_hit_caps[hit.qclass])


def make_scheduler(spec):
    """A scheduler object from a name (``"fcfs"``, ``"frfcfs"``, ``"qos"``) or itself."""
    if not isinstance(spec, str):
        return spec
    try:
        return {"fcfs": FcfsScheduler, "frfcfs": FrFcfsScheduler, "qos": QosScheduler}[spec]()
    except KeyError:
        raise ValueError(f"Scheduler must be 'fcfs', 'frfcfs' or 'qos', not {spec!r}") from None


# -- admission -------------------------------------------------------------------------
class SharedQueues:
    """One read queue and one write queue, shared by every class and tenant."""

    def __init__(self, read_capacity=128, write_capacity=64):
        for what, cap in (("Queue", read_capacity), ("Write queue", write_capacity)):
            if not isinstance(cap, int) or cap <= 0:
                raise ValueError(f"{what} capacity must be a positive integer, not {cap!r}")
        self.read_capacity = read_capacity
        self.write_capacity = write_capacity

    @property
    def entries(self):
        return self.read_capacity + self.write_capacity

    def has_room(self, ch, entries, is_write, qclass):
        if is_write:
            return ch.writes_queued + entries <= self.write_capacity
        return ch.occupancy - ch.writes_queued + entries <= self.read_capacity


class ReservedEntries:
    """Entries reserved per class; each entry holds a read or a write.

    A class never takes another class's entries, so a full burst class
    cannot keep a guaranteed request out (reserved admission, as in CCI-400's
    QoS-reserved trackers or uMCTL2's separate high-priority store).  Reads and
    writes of a class share its entries, so one credit per class suffices.

    Parameters
    ----------
    entries : tuple of 3 ints
        32-byte entries of the urgent, guaranteed and burst classes.
    """

    def __init__(self, entries=(16, 48, 128)):
        if len(entries) != N_CLASSES or any(not isinstance(e, int) or e <= 0 for e in entries):
            raise ValueError(f"Reserved entries must be three positive integers, not {entries!r}")
        self.reserved = tuple(entries)

    @property
    def entries(self):
        return sum(self.reserved)

    def has_room(self, ch, entries, is_write, qclass):
        return ch.class_queued[qclass] + entries <= self.reserved[qclass]


# -- write drain ---------------------------------------------------------------------
class NoDrain:
    """Reads and writes in one queue order (FCFS): the bus never batches."""

    def update(self, ch, now):
        return ()

    def pending(self, ch):
        """Whether a write drain runs or is due: never, writes go in queue order."""
        return False


class WatermarkDrain:
    """Write batches between watermarks, per pseudo-channel.

    Enter write mode at ``high`` queued writes (or when no read is queued,
    or no read can proceed); leave at ``low``, after ``high - low`` writes,
    when no write is left or none can proceed.

    A drain that left with reads waiting owes them a read turn: the next
    drain starts on the watermark or the timer only once ``read_run`` reads
    (default ``high - low``, a turn as long as a write batch) have issued
    in the pseudo-channel, or when no read is queued or none can proceed.
    Without the turn, a writer that keeps ``high`` writes queued (the burst
    class's entries are shared by its reads and writes, so it refills them
    as fast as a batch drains) puts the pseudo-channel straight back into
    write mode after every batch, before a read can pass the write-to-read
    turnaround, and its reads wait without bound (measured: a decode read
    held 58,804 cycles by one prefill writing every other KiB).  The turn
    is the read side of uMCTL2's ``lpr_xact_run_length`` and
    ``w_xact_run_length``: each direction, once it has the bus, keeps it
    for a run of transactions.

    ``interval`` (cycles, None: off) also makes a drain due when more than
    ``low`` writes are queued and ``interval`` cycles have passed since the
    pseudo-channel last left write mode: a write-starvation timer, like
    uMCTL2's ``w_max_starve``.  A writer that fills the queue quickly still
    drains in batches of ``high - low`` (one bus turnaround each); a slow
    writer drains what ``interval`` cycles brought, so its writes wait less
    and come out in smaller batches.  How many of a tenant's writes sit in
    the queue at a given moment is what moves its bytes from one
    measurement window into the next (the isolation study of
    ``make experiments``).  The timer is looked at whenever the channel
    updates its drain state; the channel does not wake up for it, so a
    drain that falls due while the channel skips ahead to its next command
    starts at that command's cycle.
    """

    def __init__(self, high=28, low=4, *, interval=None, read_run=None):
        if not 0 <= low < high:
            raise ValueError(f"Write watermarks must satisfy 0 <= low < high, not {low}, {high}")
        if interval is not None and (not isinstance(interval, int) or interval < 1):
            raise ValueError(f"Drain interval must be a positive number of cycles or None, not {interval!r}")
        if read_run is not None and (not isinstance(read_run, int) or read_run < 0):
            raise ValueError(f"Read run must be a non-negative number of reads or None, not {read_run!r}")
        self.high = high
        self.low = low
        self.interval = interval
        self.read_run = high - low if read_run is None else read_run
        self._left_at = {}        # pc -> cycle it last left write mode
        self._turn_owed = set()   # pcs whose last drain left with reads waiting

    def update(self, ch, now):
        """The ``(pc, write_mode)`` changes of this cycle (the channel applies
        them, starting a new write batch on entry, and then clears ``stuck``)."""
        # Called every cycle the channel is visited: the interval's test is
        # written inline (a drain is overdue when more than ``low`` writes
        # are queued ``interval`` cycles after the pseudo-channel's last drain).
        changes = ()
        write_mode, pc_writes, pc_queued, pc_stuck = ch.write_mode, ch.pc_writes, ch.pc_queued, ch.stuck
        interval = self.interval
        for pc in range(len(write_mode)):
            writes = pc_writes[pc]
            was = write_mode[pc]
            if not writes and not was:
                continue  # nothing to drain, nor a drain to end
            reads = pc_queued[pc] - writes
            mode = was
            stuck = pc_stuck[pc]
            if mode:
                if writes == 0 or (reads > 0 and (stuck or self._leave(ch, pc, writes))):
                    mode = False
                    self._left_at[pc] = now
                    if reads > 0:
                        self._turn_owed.add(pc)
            elif writes > 0 and (reads == 0 or stuck):
                mode = self._may_enter(ch, pc, writes, now)
            elif writes >= self.high or (
                    interval is not None and writes > self.low and now - self._left_at.get(pc, 0) >= interval):
                if pc not in self._turn_owed or ch.read_turn[pc] >= self.read_run:
                    mode = self._may_enter(ch, pc, writes, now)
            if mode != was:
                if mode:
                    self._turn_owed.discard(pc)
                changes += ((pc, mode),)
        return changes

    def pending(self, ch):
        """Whether a pseudo-channel is in write mode or has a drain due (the
        high watermark reached): writes are, or are about to be, on the bus."""
        return any(ch.write_mode) or any(w >= self.high for w in ch.pc_writes)

    def _leave(self, ch, pc, writes):
        return writes <= self.low or ch.write_batch[pc] >= self.high - self.low

    def _may_enter(self, ch, pc, writes, now):
        return True


class PreemptingDrain(WatermarkDrain):
    """Watermark drain that protected reads hold off and cut short (uMCTL2's ARURGENT).

    While reads of a class below ``preempt_below`` wait on a pseudo-channel
    and no write of such a class is queued there (protected writes are not
    put off for reads of the same standing: with a prefill in the guaranteed
    class its own reads would hold its writes back),
    a drain in progress ends once it has written ``min_batch`` writes, and a
    drain that is due waits, but never longer than ``max_hold`` cycles in a
    row and never with ``force`` writes queued: a drain released that way
    runs down to the low watermark without interruption, so writes cannot
    starve however many protected reads keep coming (the queued writes grow
    while held and all go in one batch, one bus turnaround).  A decode
    step's reads are a burst of a few hundred cycles, so a hold of about
    that long moves the prefill's writes out of their way without cost to
    the prefill.

    ``max_recuts`` (default 0) lets protected reads cut a released drain
    too, once it has written ``min_batch`` writes and fewer than ``force``
    are queued, at most ``max_recuts`` times in a row: the writes left are
    then held again as a new due drain (up to ``max_hold`` cycles), and the
    release after the last re-cut runs to the low watermark.  A chain of
    re-cuts ends with a drain that is not re-cut, and the count starts
    over.  Without it a drain released in the middle of a decode step
    writes the whole backlog its hold built up while the step's reads wait
    (issue #41's draw 1: the write-drain part of the decode tail 9 -> 91 ns
    once the burst class's credits came back during holds); re-cut but not
    held again, the drain came straight back inside the same step.  Writes
    still cannot starve: each release writes at least ``min_batch``, a chain
    ends after ``max_recuts`` cuts, and ``force`` queued writes are never
    held or cut.
    """

    def __init__(self, high=28, low=4, *, preempt_below=URGENT_CLASS + 1, min_batch=8, max_hold=1000,
                 force=None, interval=None, max_recuts=0):
        super().__init__(high, low, interval=interval)
        if not 0 <= preempt_below <= N_CLASSES:
            raise ValueError(f"preempt_below must be 0..{N_CLASSES}, not {preempt_below!r}")
        for name, value in (("min_batch", min_batch), ("max_hold", max_hold), ("max_recuts", max_recuts)):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
        self.preempt_below = preempt_below
        self.min_batch = min_batch
        self.max_hold = max_hold
        self.max_recuts = max_recuts
        self.force = force if force is not None else 2 * high
        self._held_since = {}     # pc -> first cycle a due drain was held off
        self._released = set()    # pcs whose drain was released after its hold
        self._recuts = {}         # pc -> released drains re-cut in a row
        self._recut = set()       # pcs whose last drain ended in a re-cut

    def _urgent_reads(self, ch, pc):
        # Protected reads wait and no protected write does: a drain of
        # protected writes is never put off for reads of the same standing.
        reads, writes = ch.pc_class_reads[pc], ch.pc_class_writes[pc]
        return (any(reads[:self.preempt_below])
                and not any(writes[:self.preempt_below]))

    def wake(self):
        """The cycle at which a held drain is released (the channel's wake-up), or None."""
        return min(self._held_since.values()) + self.max_hold if self._held_since else None

    def pending(self, ch):
        # A due drain held off is pending too.
        return bool(self._held_since) or super().pending(ch)

    def _leave(self, ch, pc, writes):
        if pc in self._released:
            # Released after its hold: every write queued goes in this batch,
            # down to the low watermark (not just high - low of them, which
            # would leave the rest to be held again for max_hold), unless it
            # may still be re-cut.
            if writes <= self.low:
                return True
            if (self._recuts.get(pc, 0) < self.max_recuts and writes < self.force
                    and ch.write_batch[pc] >= self.min_batch and self._urgent_reads(ch, pc)):
                self._recuts[pc] = self._recuts.get(pc, 0) + 1
                self._recut.add(pc)
                return True
            return False
        if writes < self.force and ch.write_batch[pc] >= self.min_batch and self._urgent_reads(ch, pc):
            return True
        return super()._leave(ch, pc, writes)

    def _may_enter(self, ch, pc, writes, now):
        self._released.discard(pc)
        if pc not in self._recut:
            self._recuts.pop(pc, None)    # the last drain was not re-cut: a new chain
        if writes < self.force and self._urgent_reads(ch, pc):
            since = self._held_since.setdefault(pc, now)
            if now - since < self.max_hold:
                return False
            self._released.add(pc)
        self._held_since.pop(pc, None)
        self._recut.discard(pc)
        return True


# -- refresh ------------------------------------------------------------------------------
class RoundRobinRefresh:
    """Per-bank refresh, each bank once per round; an idle, closed bank first."""

    def pick(self, ch, pc, todo):
        return min(todo, key=lambda b: (len(ch.bank_queue[b]), ch.open_row[b] >= 0, b))

    def postpone(self, ch, pc, todo, now):
        """Cycle to look again instead of refreshing now, or None."""
        return None


@dataclass
class QosRefresh:
    """Refresh steered away from banks with guaranteed (or urgent) reads waiting.

    The bank is chosen among the round's remaining banks: one with no read
    of class < ``protect_below`` queued first, then the least busy.  When
    every remaining bank has such reads, the refresh is postponed (retried
    every ``retry`` cycles) as long as it is less than ``max_postponed``
    refresh slots late (JEDEC lets a controller postpone up to 8 refreshes
    and catch up later; we apply that count to the per-bank slots).
    """

    protect_below: int = BURST_CLASS
    max_postponed: int = 8
    retry: int = 16

    def _protected(self, ch, b):
        return any(r.qclass < self.protect_below and not r.is_write for r in ch.bank_queue[b])

    def pick(self, ch, pc, todo):
        return min(todo, key=lambda b: (self._protected(ch, b), len(ch.bank_queue[b]),
                                        ch.open_row[b] >= 0, b))

    def postpone(self, ch, pc, todo, now):
        late = now - ch.ref_due[pc]
        if late + self.retry >= self.max_postponed * ch.timing.tREFIpb:
            return None
        if all(self._protected(ch, b) for b in todo):
            return now + self.retry
        return None


# -- credit return ------------------------------------------------------------------------
class CreditReturn:
    """The memory side of spec §6.6's ``credit_return`` port.

    Every grant took one credit of its class and, in the controller, as many
    entries of that class as it has 32 B accesses (:meth:`granted`).  The
    class's credits go back to the arbiter, at most one per class per fabric
    clock, in the order the grants were transferred: the oldest unreturned
    grant's credit once the class's entries freed, counted from the start,
    cover it and every grant returned before it.  Entries freed never run
    ahead of entries granted, so a class never has more credits out than
    entries reserved for them; with grants of one size this is one credit
    per that many entries freed, in any order.
    """

    def __init__(self):
        self.returned = [0] * N_CLASSES   # credits returned so far, per class
        self._pending = [deque() for _ in range(N_CLASSES)]  # each unreturned grant's entries, oldest first
        self._covered = [0] * N_CLASSES   # entries of the grants returned so far

    def granted(self, k, entries):
        """A grant of class ``k`` took ``entries`` entries (and one credit)."""
        self._pending[k].append(entries)

    def owed(self, ch, k):
        """Credits of class ``k`` whose entries are free but not yet returned."""
        freed, n = ch.class_freed[k] - self._covered[k], 0
        for entries in self._pending[k]:
            if entries > freed:
                break
            freed -= entries
            n += 1
        return n

    def step(self, ch, now):
        """The ``credit_return`` bits of one fabric clock at memory cycle ``now``."""
        held = self._held_classes(ch, now)
        bits = [0] * N_CLASSES
        freed, returned, pending, covered = ch.class_freed, self.returned, self._pending, self._covered
        for k in range(N_CLASSES):
            q = pending[k]
            if k not in held and q and freed[k] - covered[k] >= q[0]:  # self.owed(ch, k) > 0
                bits[k] = 1
                returned[k] += 1
                covered[k] += q.popleft()
        return tuple(bits)

    def _held_classes(self, ch, now):
        """Classes whose owed credits wait this clock (evaluated every clock)."""
        return ()


class YieldingCreditReturn(CreditReturn):
    """Burst credits wait while protected reads are queued.

    Reserved entries keep a full burst class from refusing a guaranteed
    read, but every burst read admitted ahead of a decode step still
    competes with it for banks, activations and the data bus.  While reads
    of a class below ``protect_below`` are queued anywhere in the channel,
    freed burst entries are not handed back as credits: the burst class
    drains by what it already holds, and it refills once the protected
    reads are gone.  So the burst class can be sized for the prefill's
    bandwidth (Little's law at its loaded latency) without that many of its
    reads queued in front of every decode step.  A hold lasts at most
    ``max_hold`` cycles in a row; then the credits owed go back one per
    clock as usual until no protected read is queued, so best-effort
    traffic cannot starve.

    ``budget`` (queued reads; 0: none) keeps the hold work-conserving: while
    fewer than ``budget`` reads of all classes together are queued, the
    decodes' own included, and no pseudo-channel is in write mode or has a
    drain due (the drain policy's ``pending``), a held burst credit goes
    back anyway.  Held to nothing, the burst class drained whenever a decode
    read was queued, however few: on the workload family's draw 6 (issue
    #41) the banks the decodes left idle cost the prefill 6 points of
    channel utilisation, and the decodes' p99 was no better than without
    the hold.  A decode step that fills the budget by itself still holds
    the burst class off completely, as one-channel draws with short steps
    need.  Reads only are counted: a writing prefill keeps its writes queued
    between drains, and counted, they filled the budget without competing
    with a decode read (draws 3 and 4 held by the budget on 70-86 % of the
    clocks a credit was owed, their prefills 87-89 % of the restated
    figure).  The write side is judged by the drains instead: a credit
    given back can bring a burst write, and writes let in while a drain
    runs or is due lengthen the drain the decode reads wait behind (with
    the budget alone, draw 7's decode p99 went from 1.14x to 1.23x
    decode-only, the extra in write drains and the controller queue).
    """

    def __init__(self, *, protect_below=BURST_CLASS, max_hold=1000, budget=0):
        super().__init__()
        if not 0 <= protect_below <= BURST_CLASS:
            raise ValueError(f"protect_below must be 0..{BURST_CLASS}, not {protect_below!r}")
        if not isinstance(max_hold, int) or max_hold < 0:
            raise ValueError(f"max_hold must be a non-negative integer, not {max_hold!r}")
        if not isinstance(budget, int) or budget < 0:
            raise ValueError(f"budget must be a non-negative number of reads, not {budget!r}")
        self.protect_below = protect_below
        self.max_hold = max_hold
        self.budget = budget
        self._held_since = None   # first cycle of the current protected period, or None

    def _protected_reads(self, ch):
        below = self.protect_below
        for reads in ch.pc_class_reads:
            for k in range(below):
                if reads[k]:
                    return True
        return False

    def _held_classes(self, ch, now):
        if not self._protected_reads(ch):
            self._held_since = None
            return ()
        if self._held_since is None:
            self._held_since = now
        if now - self._held_since >= self.max_hold or (
                self.budget and ch.occupancy - ch.writes_queued < self.budget and not ch.drain.pending(ch)):
            return ()
        return (BURST_CLASS,)
