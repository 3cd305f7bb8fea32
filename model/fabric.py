"""Golden model of the whole fabric: C channels, shared configuration, telemetry
and the coordinator of per-channel rates (spec §13)."""

from __future__ import annotations

from dataclasses import replace

from .channel import NO_CREDIT_RETURN, ChannelModel, Request, StepResult
from .coordinator import Coordinator
from .registers import FabricConfig, TenantConfig
from .telemetry import Telemetry


class FabricModel:
    """All channels of the arbiter plus telemetry, stepped one cycle at a time.

    ``cycle`` counts cycles since reset; the timestamp the channels see is
    ``cycle mod 2^TS_BITS`` (spec §4).
    """

    def __init__(self, params, config: FabricConfig | None = None):
        self.params = params
        self.config = config if config is not None else FabricConfig.reset(params.tenants)
        if len(self.config.tenants) != params.tenants:
            raise ValueError(f"config has {len(self.config.tenants)} tenants, "
                             f"params.tenants is {params.tenants}")
        self.channels = [ChannelModel(params, self.config) for _ in range(params.channels)]
        self.telemetry = Telemetry(params)
        # A configuration given here has been in force since before cycle 0,
        # so the epoch rule (which reads EPOCH_CYCLES one cycle late, spec
        # §10) uses it from cycle 0.
        self.telemetry.epoch_cycles = self.config.epoch_cycles
        self.coordinator = Coordinator(params)
        self.cycle = 0
        self._rose: list[int | None] = [None] * params.channels  # tenant accepted last cycle

    # ---- configuration (what an AXI write does; effective from the next step) ----
    def set_config(self, config: FabricConfig, committed=()) -> None:
        """``config`` is active from the next step. ``committed``: the tenants
        whose ``COMMIT`` took effect in the cycle just stepped, which the
        coordinator must know even when it rewrote identical values (spec
        §13.3; a tenant whose registers changed counts as committed anyway)."""
        old, self.config = self.config, config
        coord = self.coordinator
        if config.coord_enable or old.coord_enable:  # off before and after: nothing held
            coord.configure(old, config, committed)
        self._load_channel_configs()

    def commit_tenant(self, index: int, tenant: TenantConfig) -> None:
        tenants = list(self.config.tenants)
        tenants[index] = tenant
        self.set_config(replace(self.config, tenants=tenants), committed=(index,))

    def _load_channel_configs(self) -> None:
        """Every channel's configuration: the fabric's, with the coordinator's
        rates in force (spec §13.3)."""
        for ch, cfg in zip(self.channels, self.coordinator.channel_configs(self.config)):
            ch.config = cfg

    # ---- one cycle --------------------------------------------------------------
    @property
    def now(self) -> int:
        return self.cycle & ((1 << self.params.ts_bits) - 1)

    def step(self, reqs: list[Request | None], grant_ready: list[bool],
             credit_return: list[tuple[int, int, int]] | None = None,
             snapshot_request: bool = False) -> list[StepResult]:
        """Advance one cycle with each channel's request (or None), grant ready
        and ``credit_return`` bits (urgent, guaranteed, burst; spec §6.6).
        ``credit_return`` None means no channel returns a credit."""
        now = self.now
        if credit_return is None:
            credit_return = [NO_CREDIT_RETURN] * len(self.channels)
        elif len(credit_return) != len(self.channels):
            raise ValueError(f"credit_return has {len(credit_return)} entries, "
                             f"one per channel ({len(self.channels)}) expected")
        coord = self.coordinator
        if coord.pending is not None and coord.due(self.cycle):  # holds from its apply cycle on
            coord.apply()
            self._load_channel_configs()
        peaks: dict[int, int] = {}
        for c, tenant in enumerate(self._rose):
            if tenant is not None:  # occupancy only rises through an acceptance
                occ = self.channels[c].occupancy()[tenant]
                peaks[tenant] = max(peaks.get(tenant, 0), occ)
        results = [ch.step(now, reqs[c], grant_ready[c], credit_return[c])
                   for c, ch in enumerate(self.channels)]
        if self.config.coord_enable:
            for c, r in enumerate(results):
                if r.accepted and not r.dropped:
                    tenant = reqs[c].tenant
                    coord.count(c, tenant, reqs[c].bytes, self.channels[c].queue_full()[tenant])
            coord.end_cycle(self.cycle, self.config)
        self.telemetry.step(now, self.config, [r.transferred for r in results],
                            [r.dropped for r in results], peaks, snapshot_request)
        self._rose = [reqs[c].tenant if r.accepted and not r.dropped else None
                      for c, r in enumerate(results)]
        self.cycle += 1
        return results

    def quiescent(self) -> bool:
        return (self.telemetry.idle() and all(t is None for t in self._rose)
                and all(ch.quiescent() for ch in self.channels))

    def skip(self, cycles: int) -> None:
        """Advance ``cycles`` cycles with no inputs on a quiescent fabric, exactly."""
        assert self.quiescent()
        tel, coord, cfg = self.telemetry, self.coordinator, self.config
        while cycles > 0:
            # Step normally through the cycles that take a snapshot, end a
            # coordinator epoch or apply its result.
            k = cycles
            if tel.epoch_cycles != cfg.epoch_cycles:
                k = 0  # the epoch rule takes the new EPOCH_CYCLES in the next step
            elif cfg.epoch_cycles:
                k = min(k, cfg.epoch_cycles - 1 - tel.epoch_counter)
            if cfg.coord_enable or not coord.idle:
                to_event = coord.cycles_to_event(self.cycle, cfg)
                if to_event is not None:
                    k = min(k, to_event)
            if k <= 0:
                self.step([None] * self.params.channels, [True] * self.params.channels)
                cycles -= 1
                continue
            if cfg.epoch_cycles:
                tel.epoch_counter += k
            coord.skip(k, cfg)
            for ch in self.channels:
                ch.skip(k)
            self.cycle += k
            cycles -= k
