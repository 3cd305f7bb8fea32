"""Golden model of the whole fabric: C channels, shared configuration, telemetry."""

from __future__ import annotations

from dataclasses import replace

from .channel import NO_CREDIT_RETURN, ChannelModel, Request, StepResult
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
        self.cycle = 0
        self._rose: list[int | None] = [None] * params.channels  # tenant accepted last cycle

    # ---- configuration (what an AXI write does; effective from the next step) ----
    def set_config(self, config: FabricConfig) -> None:
        self.config = config
        for ch in self.channels:
            ch.config = config

    def commit_tenant(self, index: int, tenant: TenantConfig) -> None:
        tenants = list(self.config.tenants)
        tenants[index] = tenant
        self.set_config(replace(self.config, tenants=tenants))

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
        peaks: dict[int, int] = {}
        for c, tenant in enumerate(self._rose):
            if tenant is not None:  # occupancy only rises through an acceptance
                occ = self.channels[c].occupancy()[tenant]
                peaks[tenant] = max(peaks.get(tenant, 0), occ)
        results = [ch.step(now, reqs[c], grant_ready[c], credit_return[c])
                   for c, ch in enumerate(self.channels)]
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
        tel = self.telemetry
        while cycles > 0:
            if self.config.epoch_cycles:
                # Step normally through the cycle that takes a snapshot.
                to_snap = self.config.epoch_cycles - 1 - tel.epoch_counter
                if to_snap <= 0:
                    self.step([None] * self.params.channels, [True] * self.params.channels)
                    cycles -= 1
                    continue
                k = min(cycles, to_snap)
                tel.epoch_counter += k
            else:
                k = cycles
            for ch in self.channels:
                ch.skip(k)
            self.cycle += k
            cycles -= k
