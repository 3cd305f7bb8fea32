"""Golden model of the coordinator across channels (spec §13), cycle by cycle.

Each channel arbitrates alone (spec §4-§6); the coordinator only decides, once
an epoch, which rate and peak rate each channel refills a tenant's buckets
with. It counts the demand every channel accepts, ends epochs, computes a
result from them (:func:`split_rates`, the rule) and holds it for
``COORD_LATENCY`` cycles before it applies, the time the RTL takes to compute
it serially, so the model and the RTL load the same values at the same edge.

The owner (:class:`kvfabric.model.fabric.FabricModel`, or the fast replay
engine) calls, per cycle t: :meth:`Coordinator.due` / :meth:`apply` before the
channels step (a result holds from its apply cycle on), :meth:`count` for each
acceptance and :meth:`end_cycle` after them; between cycles
:meth:`configure` with the configuration active from the next one.
:meth:`channel_configs` gives every channel the configuration it uses.
"""

from __future__ import annotations

from dataclasses import replace

from kvfabric.spec import COORD_DEMAND_BITS, COORD_LATENCY, COORD_Q_BITS

from .registers import FabricConfig, TenantConfig

__all__ = ["Coordinator", "split_rates"]

_DEMAND_MAX = (1 << COORD_DEMAND_BITS) - 1
_Q = 1 << COORD_Q_BITS


def split_rates(tenant: TenantConfig, demand: list[int], floor: int,
                rate_max: int) -> tuple[tuple[int, int], ...] | None:
    """``(rate[i][c], peak[i][c])`` for every channel c of one tenant from its
    demand per channel ``demand`` and ``coord_floor`` (UQ0.8), spec §13.5, or
    None for the even split (a disabled tenant, or no demand at all).
    ``rate_max`` is the largest value the rate registers hold."""
    total = sum(demand)
    if not tenant.enable or total == 0:
        return None
    channels = len(demand)
    rate, peak_rate = tenant.rate, tenant.peak_rate
    rate_floor = floor * rate >> 8
    pool = channels * (rate - rate_floor)
    peak_floor = floor * peak_rate >> 8
    peak_pool = channels * (peak_rate - peak_floor)
    least = min(rate, 1)  # a guaranteed tenant keeps a non-zero rate everywhere
    out = []
    for d in demand:
        q = _Q * d // total
        r = min(max(rate_floor + -(-pool * q // _Q), least), rate_max)
        p = min(max(peak_floor + peak_pool * q // _Q, r), rate_max)
        out.append((r, p))
    return tuple(out)


class Coordinator:
    """Demand counters, epoch counter, pending result and the per-channel
    rates in force (spec §13.3-§13.5).

    ``splits[i]`` is tenant i's ``(rate, peak)`` per channel, or None when it
    uses its registers on every channel (the even split); ``pending`` is the
    result of the last epoch not yet applied: its apply cycle and the split
    of every tenant it still holds (discarded tenants removed).
    """

    def __init__(self, params):
        self.params = params
        self.demand = [[0] * params.channels for _ in range(params.tenants)]
        #: ``ec`` during the next cycle stepped (0 while the coordinator is off).
        self.epoch_counter = 0
        self.pending: tuple[int, dict[int, tuple | None]] | None = None
        self.splits: list[tuple | None] = [None] * params.tenants
        self._rate_max = (1 << params.rate_bits) - 1

    @property
    def idle(self) -> bool:
        """Nothing to do while the coordinator stays off: the even split in
        force and no result pending (then every channel uses the fabric's
        configuration as it is)."""
        return self.pending is None and not any(s is not None for s in self.splits)

    # ---- per cycle ------------------------------------------------------------------
    def due(self, cycle: int) -> bool:
        """A result applies in ``cycle``: call :meth:`apply` before the channels step."""
        return self.pending is not None and self.pending[0] == cycle

    def apply(self) -> None:
        """The pending result holds from now on, for every tenant it still holds."""
        for i, split in self.pending[1].items():
            self.splits[i] = split
        self.pending = None

    def count(self, channel: int, tenant: int, nbytes: int) -> None:
        """A valid request of ``tenant`` with ``nbytes`` bytes accepted on
        ``channel`` in this cycle (spec §13.4): its 32-byte units, saturating."""
        p = self.params
        row = self.demand[tenant]
        x = row[channel] + ((nbytes + (1 << p.tag_shift) - 1) >> p.tag_shift)
        row[channel] = x if x < _DEMAND_MAX else _DEMAND_MAX

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
        ``config``, applies from ``cycle + 1 + COORD_LATENCY`` (spec §13.5)."""
        self.epoch_counter = 0
        result = {i: split_rates(t, self.demand[i], config.coord_floor, self._rate_max)
                  for i, t in enumerate(config.tenants)}
        self.pending = (cycle + 1 + COORD_LATENCY, result)
        for row in self.demand:
            row[:] = [0] * len(row)

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
            self.splits = [None] * len(self.splits)
            for row in self.demand:
                row[:] = [0] * len(row)
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
            tenants = [t if s is None else replace(t, rate=s[c][0], peak_rate=s[c][1])
                       for t, s in zip(config.tenants, self.splits)]
            out.append(replace(config, tenants=tenants))
        return out
