"""Golden model of the coordinator across channels (spec §13), cycle by cycle.

Each channel arbitrates alone (spec §4-§6); the coordinator only decides, once
an epoch, which rate and peak rate each channel refills a tenant's buckets
with. It counts the demand every channel accepts and which of those pairs
are backlogged, ends epochs, computes a result from them (:func:`allocate`,
the rule: an allocation of every tenant's total over the channels it uses,
by water-filling above the even split a light pair keeps and half the
previous rate a backlogged one keeps) and holds it for
``COORD_LATENCY`` cycles before it applies, tenant i's rates on channel c
``i·C + c`` cycles later still (the RTL's write-out loads one pair's
registers per cycle), so the model and the RTL load the same values at the
same edges.

The owner (:class:`kvfabric.model.fabric.FabricModel`, or the fast replay
engine) calls, per cycle t: :meth:`Coordinator.due` / :meth:`apply` before the
channels step (a result holds from its apply cycle on), :meth:`count` for each
acceptance and :meth:`end_cycle` after them; between cycles
:meth:`configure` with the configuration active from the next one.
:meth:`channel_configs` gives every channel the configuration it uses.
"""

from __future__ import annotations

from dataclasses import replace

from kvfabric.spec import COORD_DEMAND_BITS, COORD_LATENCY, coord_level_bits, coord_passes

from .registers import FabricConfig, TenantConfig

__all__ = ["Coordinator", "allocate", "latency_bound", "previous_rates", "water_level"]

_DEMAND_MAX = (1 << COORD_DEMAND_BITS) - 1


def water_level(others: list[int], mask: list[bool], total: int, top: int,
                floors: list[int] | None = None, level: list[bool] | None = None) -> int:
    """The smallest integer level h in 0..top with
    ``sum(max(floors[c], h - others[c]) if level[c] else floors[c] for c in mask) >= total``,
    or ``top`` if none (spec §13.5; ``floors`` None: all 0, ``level`` None:
    ``mask``; ``level`` is within ``mask`` and not empty). The fill grows
    with h, so a binary search finds it."""
    floors = floors or [0] * len(others)
    level = mask if level is None else level

    def fill(h):
        return sum(max(f, h - o) if v else f for o, f, m, v in zip(others, floors, mask, level) if m)

    lo, hi = 0, min(min(o for o, v in zip(others, level) if v) + total, top)
    while lo < hi:
        h = (lo + hi) // 2
        if fill(h) >= total:
            hi = h
        else:
            lo = h + 1
    return lo


def allocate(tenants: list[TenantConfig], demand: list[list[int]], floor: int, params,
             passes: int | None = None,
             backlog: list[list[bool]] | None = None,
             previous: list[list[int]] | None = None) -> list[tuple[tuple[int, int], ...] | None]:
    """Every tenant's ``(rate[i][c], peak[i][c])`` per channel c from the
    epoch's demand matrix ``demand[i][c]``, its backlog bits
    ``backlog[i][c]`` (None: every pair with demand is backlogged) and
    ``coord_floor`` (UQ0.8), spec §13.5, or None for the even split (a
    disabled tenant, or no demand at all). ``passes``: the water-filling's
    passes (default :func:`kvfabric.spec.coord_passes`). A pair with demand
    that is not backlogged (light) keeps the tenant's even split there,
    ``RATE - fr`` (its lower bound ``lo[i][c]``), and the rest of the total
    is levelled over the tenant's backlogged pairs (over all its pairs,
    above the lower bounds, when none is backlogged). ``previous``: the
    previous epoch's rates ``p[i][c]`` (:func:`previous_rates` of its
    result; None: none, as after the coordinator is turned on): a
    backlogged pair keeps ``min(p[i][c] >> 1, RATE - fr)`` as its lower
    bound (damped descent, spec §13.5)."""
    C = params.channels
    rmax = (1 << params.rate_bits) - 1
    pmax = (1 << params.peak_rate_bits) - 1
    passes = coord_passes(params) if passes is None else passes
    top = (1 << coord_level_bits(params)) - 1   # the highest level
    active = [t.enable and any(d > 0 for d in row) for t, row in zip(tenants, demand)]
    fr = [floor * t.rate >> 8 for t in tenants]
    need = [C * (t.rate - f) for t, f in zip(tenants, fr)]
    # A light pair's lower bound is the even split above the floor; a
    # backlogged pair's, half its previous rate, at most that (damped descent).
    lows = [[(t.rate - f if backlog is not None and not backlog[i][c] else
              min(previous[i][c] >> 1, t.rate - f) if previous is not None else 0) if d > 0 else 0
             for c, d in enumerate(row)]
            for i, (t, f, row) in enumerate(zip(tenants, fr, demand))]
    # The pairs levelled: the backlogged ones, or every pair when none is.
    levelled = []
    for i, row in enumerate(demand):
        mask = [d > 0 for d in row]
        heavy = [m and (backlog is None or backlog[i][c]) for c, m in enumerate(mask)]
        levelled.append(heavy if any(heavy) else mask)
    x = [[0] * C for _ in tenants]
    load = [0] * C
    for _ in range(passes):
        for i, row in enumerate(demand):
            if not active[i]:
                continue
            mask = [d > 0 for d in row]
            lo, lev = lows[i], levelled[i]
            others = [load[c] - x[i][c] for c in range(C)]
            h = water_level(others, mask, need[i], top, lo, lev) if need[i] else 0
            for c in range(C):
                if not (mask[c] and need[i]):
                    x[i][c] = 0
                else:
                    x[i][c] = max(lo[c], h - others[c]) if lev[c] else lo[c]
                load[c] = others[c] + x[i][c]
    out = []
    for i, t in enumerate(tenants):
        if not active[i]:
            out.append(None)
            continue
        least = min(t.rate, 1)  # a guaranteed tenant keeps a non-zero rate everywhere
        row = []
        for c in range(C):
            r = min(max(fr[i] + x[i][c], least), rmax)
            p = min(max(r + t.peak_rate - t.rate, 0), pmax)
            row.append((r, p))
        out.append(tuple(row))
    return out


def previous_rates(result, channels: int) -> list[list[int]]:
    """The damped descent's ``p[i][c]`` (spec §13.5) from an epoch's
    :func:`allocate` result: each active tenant's rates, 0 for a tenant
    that was not active (its result the even split). A rate of 1 that the
    write-out's ``min(RATE, 1)`` lifted from 0 gives the same ``p >> 1``."""
    return [[r for r, _ in row] if row is not None else [0] * channels for row in result]


def latency_bound(config: FabricConfig, tenant: int) -> bool:
    """Whether ``tenant``'s priority is marked in ``CREDITS.arrival_prio``
    (spec §6.2: a latency-bound tenant's, whose conforming reads are served
    oldest first); its pairs are never backlogged (§13.4)."""
    return (config.arrival_prio >> config.tenants[tenant].priority) & 1 == 1


class Coordinator:
    """Demand counters, epoch counter, pending result and the per-channel
    rates in force (spec §13.3-§13.5).

    ``splits[i]`` is tenant i's ``(rate, peak)`` per channel, an entry None
    where the channel uses the tenant's registers, or None when it uses them
    on every channel (the even split); ``pending`` is the result of the last
    epoch not yet applied on every pair: the cycle in which its next pair's
    rates apply, the allocation of every tenant it still holds (discarded
    tenants removed), and that next pair's index ``i·C + c``.
    """

    def __init__(self, params):
        self.params = params
        self.demand = [[0] * params.channels for _ in range(params.tenants)]
        #: ``backlog[i][c]``: an acceptance of i on c this epoch left its queue full (spec §13.4).
        self.backlog = [[False] * params.channels for _ in range(params.tenants)]
        #: ``ec`` during the next cycle stepped (0 while the coordinator is off).
        self.epoch_counter = 0
        self.pending: list | None = None
        self.splits: list[tuple | None] = [None] * params.tenants
        #: The last epoch's rates, whether applied or discarded (:func:`previous_rates`;
        #: None before the first epoch with the coordinator on): its lower bounds.
        self.previous: list[list[int]] | None = None

    @property
    def idle(self) -> bool:
        """Nothing to do while the coordinator stays off: the even split in
        force and no result pending (then every channel uses the fabric's
        configuration as it is)."""
        return self.pending is None and not any(s is not None for s in self.splits)

    # ---- per cycle ------------------------------------------------------------------
    def due(self, cycle: int) -> bool:
        """A channel's rates apply in ``cycle``: call :meth:`apply` before the channels step."""
        return self.pending is not None and self.pending[0] == cycle

    def apply(self) -> None:
        """The pending result holds from now on on its next pair, if it still
        holds that pair's tenant (spec §13.5: pair (i, c) from
        ``t_a + i·C + c``; the RTL's write-out loads one pair per cycle)."""
        cycle, result, k = self.pending
        channels = self.params.channels
        i, c = divmod(k, channels)
        if i in result:
            split = result[i]
            cur = list(self.splits[i] or (None,) * channels)
            cur[c] = None if split is None else split[c]
            self.splits[i] = None if all(v is None for v in cur) else tuple(cur)
        if k + 1 < self.params.tenants * channels:
            self.pending = [cycle + 1, result, k + 1]
        else:
            self.pending = None

    def count(self, channel: int, tenant: int, nbytes: int, full: bool) -> None:
        """A valid request of ``tenant`` with ``nbytes`` bytes accepted on
        ``channel`` in this cycle (spec §13.4): its 32-byte units, saturating;
        ``full``: the tenant's queue on the channel is full in the next cycle
        (``queue_full``, spec §2, with the accepted request in it), which
        marks the pair backlogged."""
        p = self.params
        row = self.demand[tenant]
        x = row[channel] + ((nbytes + (1 << p.tag_shift) - 1) >> p.tag_shift)
        row[channel] = x if x < _DEMAND_MAX else _DEMAND_MAX
        if full:
            self.backlog[tenant][channel] = True

    def end_cycle(self, cycle: int, config: FabricConfig) -> None:
        """After the acceptances of ``cycle`` (with the coordinator on in it):
        end the epoch if the counter says so (spec §13.4), computing its result
        from ``config``, the configuration of this cycle."""
        if self.epoch_counter >= config.coord_epoch - 1:
            self.end_epoch(cycle, config)
        else:
            self.epoch_counter += 1

    def end_epoch(self, cycle: int, config: FabricConfig) -> None:
        """The epoch ends in ``cycle``: its result, from this cycle's
        ``config``, applies from ``cycle + 1 + COORD_LATENCY`` (spec §13.5).
        A tenant whose priority ``config`` marks arrival-ordered (a
        latency-bound tenant, spec §6.2) has no backlogged pair (§13.4): a
        decode step's burst can fill its queue without its demand being more
        than its even split."""
        self.epoch_counter = 0
        backlog = [[b and not latency_bound(config, i) for b in row] for i, row in enumerate(self.backlog)]
        result = allocate(config.tenants, self.demand, config.coord_floor, self.params, previous=self.previous,
                          backlog=backlog)
        self.previous = previous_rates(result, self.params.channels)
        self.pending = [cycle + 1 + COORD_LATENCY, dict(enumerate(result)), 0]
        for row in self.demand:
            row[:] = [0] * len(row)
        for row in self.backlog:
            row[:] = [False] * len(row)

    def cycles_to_event(self, cycle: int, config: FabricConfig) -> int:
        """Cycles from ``cycle`` before the next one that must be stepped (an
        epoch end or an apply cycle; 0: ``cycle`` is one), for a caller that
        skips idle cycles."""
        k = None
        if config.coord_enable:
            k = config.coord_epoch - 1 - self.epoch_counter
        if self.pending is not None:
            to_apply = self.pending[0] - cycle
            k = to_apply if k is None else min(k, to_apply)
        return max(k, 0) if k is not None else None

    def skip(self, cycles: int, config: FabricConfig) -> None:
        """``cycles`` cycles without acceptances, epoch end or apply cycle."""
        if config.coord_enable:
            self.epoch_counter += cycles

    # ---- configuration changes between cycles ------------------------------------------
    def configure(self, old: FabricConfig, new: FabricConfig, committed=()) -> None:
        """``new`` is active from the next cycle, ``old`` was; ``committed`` are
        the tenants whose COMMIT took effect in this cycle (a tenant whose
        registers changed is counted as committed too). Spec §13.3, §13.5."""
        if old.coord_enable and not new.coord_enable:
            self.epoch_counter = 0
            self.pending = None
            self.previous = None
            self.splits = [None] * len(self.splits)
            for row in self.demand:
                row[:] = [0] * len(row)
            for row in self.backlog:
                row[:] = [False] * len(row)
        changed = set(committed)
        changed.update(i for i, (a, b) in enumerate(zip(old.tenants, new.tenants)) if a != b)
        for i in changed:
            self.splits[i] = None
            if self.pending is not None:
                self.pending[1].pop(i, None)

    def channel_configs(self, config: FabricConfig) -> list[FabricConfig]:
        """The configuration each channel uses: ``config`` with each tenant's
        rate and peak rate replaced by its split for that channel, where one is
        in force (``config`` itself for every channel otherwise)."""
        channels = self.params.channels
        if all(s is None for s in self.splits):
            return [config] * channels
        out = []
        for c in range(channels):
            tenants = [t if s is None or s[c] is None else replace(t, rate=s[c][0], peak_rate=s[c][1])
                       for t, s in zip(config.tenants, self.splits)]
            out.append(replace(config, tenants=tenants))
        return out
