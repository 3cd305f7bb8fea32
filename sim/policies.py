"""Memory-controller policies compared in the experiments.

A policy has two halves:

* the *front end*: every memory cycle in which the transaction queue has
  room, :meth:`Policy.pick` is offered the oldest waiting transaction of
  each tenant (tenant, bytes, arrival cycle, target bank) and returns the
  one to admit, or None (a front end with its own pipeline, such as the
  fabric's, overrides :meth:`Policy.front_end` instead);
* the *command scheduler* inside :class:`~sim.dram.Channel` (``fcfs`` or
  ``frfcfs``), named by :attr:`Policy.scheduler`, which then serves the
  admitted requests.

Software throttling and page coloring are not controller features; the
policies that use them say so through :meth:`Policy.prepare` (which may
install throttles on tenants) and :attr:`Policy.coloring` (which the system
passes to the address map).  The fabric policy lives in
:mod:`sim.fabric`, as an adapter around the golden model.
"""

from .dram import NEVER
from .system import TRANSACTION_ACCESSES
from .tenants import SoftwareThrottle

__all__ = ["Policy", "FcfsPolicy", "FrFcfsPolicy", "ThrottlePolicy", "StaticPartitionPolicy"]


class Policy:
    """Front end that admits requests in global arrival order.

    Attributes
    ----------
    name : str
        Label in reports.
    scheduler : {"fcfs", "frfcfs"}
    coloring : bool
        Whether the address map gives each tenant its own banks.
    """

    name = "base"
    scheduler = "frfcfs"
    coloring = False

    def controller_args(self):
        """Keyword arguments of the :class:`~sim.dram.Channel` this front end drives
        (the command scheduler and any controller policies it needs)."""
        return {"scheduler": self.scheduler}

    def prepare(self, tenants, system):
        """Configure tenants and bind to the system before the run."""
        self.system = system

    def on_arrival(self, txn, now):
        """A tenant submitted ``txn`` (it waits in the tenant's source queue)."""

    def on_complete(self, txn, now):
        """``txn``'s last data burst ended."""

    def front_end(self, now):
        """Admit at most one transaction at ``now``.

        Returns the next cycle the front end needs to be called even if
        nothing else happens (NEVER when it only waits for arrivals or room).
        """
        system = self.system
        if not system.waiting:
            return NEVER
        room_for = system.room_for
        heads = [q[0] for q in system.sources if q and room_for(q[0])]
        if not heads:
            return NEVER
        txn = self.pick(now, heads)
        if txn is None:
            return NEVER  # only a freed entry or an arrival changes the answer
        system.admit(txn, now)
        return now + 1

    def pick(self, now, heads):
        """Choose among the head transactions of tenants with waiting work.

        ``heads`` is never empty and each of them fits the transaction queue.
        """
        return min(heads, key=_arrival_order)


def _arrival_order(txn):
    return txn.seq


class FcfsPolicy(Policy):
    """Arrival order at the front end and in every bank (the essay's FCFS)."""

    name = "FCFS"
    scheduler = "fcfs"


class FrFcfsPolicy(Policy):
    """Arrival order at the front end, first-ready FCFS in the banks."""

    name = "FR-FCFS"
    scheduler = "frfcfs"


#: An access's rank is its tenant's priority shifted above every arrival rank.
_PRIORITY_SHIFT = 48


class PriorityFrFcfsPolicy(FrFcfsPolicy):
    """Strict priority by the contract's tenant priorities, FR-FCFS within a
    priority: a conventional QoS controller without kvfabric (a high-priority
    read queue, as in uMCTL2), the reference that shows what serving the
    latency-bound tenants first costs the others while row hits are kept.

    The front end admits the head of the best (lowest) priority first,
    arrival order within it.  In the banks an access ranks by its tenant's
    priority, then by arrival: every rank of one priority lies below every
    rank of the next.  The first-ready rule and its row-hit cap are FR-FCFS's,
    so a row hit of a worse priority passes an older access of a better one
    only while the bank's hits have bypassed fewer than ``row_hit_cap`` older
    requests since its row opened, as between two accesses of one priority.

    Parameters
    ----------
    priorities : dict
        Tenant id -> priority (0-15, lower first): the contract's.
    """

    name = "priority FR-FCFS"

    def __init__(self, priorities):
        for tid, prio in priorities.items():
            if not isinstance(prio, int) or not 0 <= prio <= 15:
                raise ValueError(f"tenant {tid}: priority must be an integer 0-15, not {prio!r}")
        self.priorities = dict(priorities)

    def prepare(self, tenants, system):
        missing = [t.tenant_id for t in tenants if t.tenant_id not in self.priorities]
        if missing:
            raise ValueError(f"priority FR-FCFS: tenants {missing} have no priority in the contract "
                             f"(it gives tenants {sorted(self.priorities)})")
        super().prepare(tenants, system)

    def on_arrival(self, txn, now):
        offset = self.priorities[txn.tenant] << _PRIORITY_SHIFT
        for a in txn.accesses:
            a.rank += offset

    def pick(self, now, heads):
        priorities = self.priorities
        return min(heads, key=lambda txn: (priorities[txn.tenant], txn.seq))


class ThrottlePolicy(Policy):
    """Software sleeps capping the prefill tenants, in front of a plain controller.

    Parameters
    ----------
    share : Fraction
        Average share of channel peak each prefill tenant may use.
    period : int
        Sleep granularity in cycles: the quota for a period is issued at full
        speed, then the tenant sleeps (the essay's "inserting sleeps").
    scheduler : {"fcfs", "frfcfs"}
        The controller behind the throttle (the essay's baseline is FCFS).
    """

    name = "SW throttle"

    def __init__(self, *, share, period, scheduler="fcfs"):
        self.share = share
        self.period = period
        self.scheduler = scheduler

    def prepare(self, tenants, system):
        super().prepare(tenants, system)
        # Channel peak is one 32 B access per cycle.
        quota = max(1, int(self.share * self.period / TRANSACTION_ACCESSES))
        for t in tenants:
            if t.kind == "prefill":
                t.throttle = SoftwareThrottle(quota, self.period)


class StaticPartitionPolicy(FrFcfsPolicy):
    """Each tenant owns its banks (coloring) and an equal slice of the queue.

    Banks alone do not isolate: a tenant that fills the shared transaction
    queue still blocks the others, so the queue entries are split too.
    """

    name = "Static partition"
    coloring = True

    def prepare(self, tenants, system):
        super().prepare(tenants, system)
        channel = system.channel
        self.slots = max(1, channel.entries // len(tenants))

    def pick(self, now, heads):
        occupancy = self.system.channel.tenant_occupancy
        best = None
        for txn in heads:
            fits = occupancy[txn.tenant] + len(txn.accesses) <= self.slots
            if fits and (best is None or txn.seq < best.seq):
                best = txn
        return best
