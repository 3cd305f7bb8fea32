"""Memory-controller policies compared in the experiments.

A policy has two halves:

* the *front end*: every memory cycle in which the transaction queue has a
  free entry, :meth:`Policy.pick` is offered the oldest waiting request of
  each tenant (tenant, bytes, arrival cycle, target bank) and returns the
  one to admit, or None;
* the *command scheduler* inside :class:`~sim.dram.Channel` (``fcfs`` or
  ``frfcfs``), named by :attr:`Policy.scheduler`, which then serves the
  admitted requests.

Software throttling and page coloring are not controller features; the
policies that use them say so through :meth:`Policy.prepare` (which may
install throttles on tenants) and :attr:`Policy.coloring` (which the system
passes to the address map).  The fabric policy lives in
:mod:`sim.fabric`, as an adapter around the golden model.
"""

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

    def prepare(self, tenants, system):
        """Configure tenants and bind to the system before the run."""
        self.system = system

    def on_arrival(self, req, now):
        """A tenant submitted ``req`` (it waits in the tenant's source queue)."""

    def on_complete(self, req, now):
        """``req``'s data burst ended."""

    def pick(self, now, heads):
        """Choose among the head requests of tenants with waiting requests.

        ``heads`` is never empty and the transaction queue has room.
        """
        return min(heads, key=_arrival_order)

    def next_decision(self, now):
        """Earliest cycle :meth:`pick` could admit something new, given no
        new arrivals; front ends that may refuse override this."""
        return now + 1


def _arrival_order(req):
    return req.seq


class FcfsPolicy(Policy):
    """Arrival order at the front end and in every bank (the essay's FCFS)."""

    name = "FCFS"
    scheduler = "fcfs"


class FrFcfsPolicy(Policy):
    """Arrival order at the front end, first-ready FCFS in the banks."""

    name = "FR-FCFS"
    scheduler = "frfcfs"


class ThrottlePolicy(FrFcfsPolicy):
    """FR-FCFS controller, with software sleeps capping the prefill tenants.

    Parameters
    ----------
    share : Fraction
        Average share of channel peak each prefill tenant may use.
    period : int
        Sleep granularity in cycles: the quota for a period is issued at full
        speed, then the tenant sleeps (the essay's "inserting sleeps").
    peak_accesses_per_cycle : Fraction
    """

    name = "SW throttle"

    def __init__(self, *, share, period, peak_accesses_per_cycle=1):
        self.share = share
        self.period = period
        self.peak = peak_accesses_per_cycle

    def prepare(self, tenants, system):
        super().prepare(tenants, system)
        quota = int(self.share * self.peak * self.period)
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
        self.slots = max(1, system.channel.capacity // len(tenants))

    def pick(self, now, heads):
        occupancy = self.system.channel.tenant_occupancy
        best = None
        for req in heads:
            if occupancy[req.tenant] < self.slots and (best is None or req.seq < best.seq):
                best = req
        return best
