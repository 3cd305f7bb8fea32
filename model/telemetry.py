"""Golden model of the telemetry counters and epoch snapshots (spec §10)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .channel import BURST, Grant

BYTES_BITS = 48
COUNTER_BITS = 32
#: Width of the AXI4 front end's per-tenant error counters (spec §14.6).
AXI_ERROR_BITS = 16


@dataclass
class TenantCounters:
    bytes: int = 0
    grants: int = 0
    burst_grants: int = 0
    slo_violations: int = 0
    queue_hwm: int = 0
    # The AXI4 front end's live counters (spec §14.6), inputs of the
    # telemetry: 0 unless :meth:`Telemetry.set_front_end` gives them.
    axi_unsupported: int = 0
    axi_wlast_errors: int = 0


@dataclass
class Counters:
    """One full set of counters: live, or a snapshot of them."""

    tenants: list[TenantCounters]
    dropped: list[int]

    @classmethod
    def zero(cls, tenants: int, channels: int) -> "Counters":
        return cls([TenantCounters() for _ in range(tenants)], [0] * channels)

    def copy(self) -> "Counters":
        return Counters([TenantCounters(**vars(t)) for t in self.tenants], list(self.dropped))


@dataclass
class Telemetry:
    """Free-running counters with the spec's pipeline timing and snapshots.

    A grant transferred at t is counted from t+3 (``_stages`` holds the
    per-tenant sums of cycles t-1 and t: spec §10's two pipeline stages); a
    drop at t from t+2 (``_drops`` holds
    cycle t's drop strobes during t+1); ``queue_hwm`` at t+1
    covers the occupancies of cycle t. The epoch rule of cycle t uses
    :attr:`epoch_cycles`, the configuration's ``epoch_cycles`` of the
    previous step (spec §10: a write of ``EPOCH_CYCLES`` taking effect in
    cycle t governs the epochs from t+2); 0 after reset.
    """

    params: object
    live: Counters = field(init=False)
    snapshot: Counters = field(init=False)
    epoch_count: int = 0
    epoch_counter: int = 0
    snapshot_pending: bool = False
    epoch_cycles: int = 0
    _stages: list = field(default_factory=lambda: [{}, {}])
    _drops: list = field(default_factory=list)

    def __post_init__(self):
        self.live = Counters.zero(self.params.tenants, self.params.channels)
        self.snapshot = Counters.zero(self.params.tenants, self.params.channels)

    def set_front_end(self, tenant: int, unsupported: int, wlast_errors: int) -> None:
        """The AXI4 front end's live counters of ``tenant`` in the cycle about to
        be stepped (spec §14.6): a snapshot in that cycle copies these values."""
        for name, value in (("unsupported", unsupported), ("wlast_errors", wlast_errors)):
            if not (isinstance(value, int) and 0 <= value < 1 << AXI_ERROR_BITS):
                raise ValueError(f"AXI4 front end counter {name} of tenant {tenant} must be "
                                 f"0..{(1 << AXI_ERROR_BITS) - 1}, not {value!r}")
        t = self.live.tenants[tenant]
        t.axi_unsupported, t.axi_wlast_errors = unsupported, wlast_errors

    def idle(self) -> bool:
        return not any(self._stages) and not any(self._drops) and not self.snapshot_pending

    def step(self, now: int, config, transfers: list[Grant | None], drops: list[bool],
             occupancy_peaks: dict[int, int], snapshot_request: bool = False) -> None:
        """Advance one cycle. ``occupancy_peaks`` maps tenant → max occupancy at t
        over channels, for the tenants whose occupancy may have risen."""
        ts_mask = (1 << self.params.ts_bits) - 1
        live = self.live
        # A snapshot in cycle t copies the values of cycle t (before this update).
        take = self.snapshot_pending
        epoch_cycles, self.epoch_cycles = self.epoch_cycles, config.epoch_cycles
        if epoch_cycles:
            if self.epoch_counter >= epoch_cycles - 1:
                take = True
                self.epoch_counter = 0
            else:
                self.epoch_counter += 1
        else:
            self.epoch_counter = 0
        if take:
            self.snapshot = live.copy()
            self.epoch_count = (self.epoch_count + 1) & ((1 << COUNTER_BITS) - 1)
        self.snapshot_pending = snapshot_request

        # Apply the sums of cycle t-2.
        cmask = (1 << COUNTER_BITS) - 1
        for tenant, (nbytes, grants, bursts, slo) in self._stages[0].items():
            c = live.tenants[tenant]
            c.bytes = (c.bytes + nbytes) & ((1 << BYTES_BITS) - 1)
            c.grants = (c.grants + grants) & cmask
            c.burst_grants = (c.burst_grants + bursts) & cmask
            c.slo_violations = (c.slo_violations + slo) & cmask
        # Sum this cycle's transfers over channels (the lateness is judged
        # with cycle t's configuration, as the RTL's first stage does).
        stage: dict[int, list[int]] = {}
        for g in transfers:
            if g is None:
                continue
            s = stage.setdefault(g.tenant, [0, 0, 0, 0])
            s[0] += g.bytes
            s[1] += 1
            s[2] += g.kind == BURST
            s[3] += ((now - g.ts) & ts_mask) > config.tenants[g.tenant].slo_cycles
        self._stages = [self._stages[1], stage]
        for c, dropped in enumerate(self._drops):
            if dropped:
                live.dropped[c] = (live.dropped[c] + 1) & cmask
        self._drops = list(drops)
        for tenant, occ in occupancy_peaks.items():
            t = live.tenants[tenant]
            if occ > t.queue_hwm:
                t.queue_hwm = occ
