"""Scenarios shared by the model's tests and the co-simulation.

:func:`essay_trace`, the essay's scenario as a trace: one prefill burst against
steady decodes, scaled to simulate in seconds: the prefill moves 32 MiB (the
essay's 42 GB at full scale) in 4 KiB reads, issued far faster than the
channels drain them, and each decode tenant issues one step of 256-byte KV
reads every ``step_cycles``. Every read is spread round-robin over the channels.

:func:`heavy_light_contract`, issue #43's burst-only contract: one tenant of
weight 7 against seven of weight 1, none with a guarantee.
"""

from __future__ import annotations

import random

from .trace import TraceRow


def essay_trace(channels: int = 8, *, prefill_bytes: int = 32 << 20, prefill_start: int = 4000,
                prefill_issue_per_cycle: int = 8, decode_tenants: tuple[int, ...] = (1, 2, 3),
                decode_step_bytes: int = 64 << 10, step_cycles: int = 2000, cycles: int = 40000,
                seed: int = 1) -> list[TraceRow]:
    """Rows sorted by cycle (ties: prefill first, then decodes by tenant)."""
    rng = random.Random(seed)
    events: list[tuple[int, int, int, int]] = []  # cycle, order, tenant, bytes
    n_prefill = prefill_bytes // 4096
    for k in range(n_prefill):
        events.append((prefill_start + k // prefill_issue_per_cycle, 0, 0, 4096))
    for t in decode_tenants:
        phase = rng.randrange(step_cycles)
        for step_start in range(phase, cycles, step_cycles):
            for k in range(decode_step_bytes // 256):
                events.append((step_start + k // 4, t, t, 256))
    events.sort()
    rows = []
    counters = {}
    for cycle, _, tenant, nbytes in events:
        ch = counters.get(tenant, tenant) % channels
        counters[tenant] = counters.get(tenant, tenant) + 1
        rows.append(TraceRow(len(rows), cycle, ch, tenant, nbytes))
    return rows


#: Issue #43's heavy/light case: each channel drains 64 bytes per cycle and
#: every tenant sends requests of this size (multiples of TAG_UNIT, spec §7).
HEAVY_LIGHT_BYTES_PER_CYCLE = 64
HEAVY_LIGHT_REQUEST_BYTES = 2048


def heavy_light_contract(channels: int = 1, tenants: int = 8, heavy: int = 0,
                         bytes_per_cycle: int = HEAVY_LIGHT_BYTES_PER_CYCLE, **fabric) -> dict:
    """A contract document (spec §12) of ``tenants`` burst-only tenants, no
    guarantee (``guaranteed_gbps = 0``), equal priority, burst caps of a whole
    channel: tenant ``heavy`` has weight ``tenants - 1`` (half the channel) and
    every other weight 1, at ``bytes_per_cycle`` per channel (1 GHz).
    ``fabric``: more ``[fabric]`` keys (``queue_depth``, ...)."""
    gbps = bytes_per_cycle  # bytes per cycle at 1000 MHz = GB/s
    return {
        "fabric": {"clock_mhz": 1000, "channels": channels, "channel_gbps": gbps, "admission_limit": 0.9,
                   "tenants": tenants, **fabric},
        "tenant": [{"id": i, "name": f"{'heavy' if i == heavy else 'light'}{i}", "guaranteed_gbps": 0,
                    "burst_gbps": gbps * channels, "burst_duration_ms": 1, "priority": 0,
                    "latency_slo_us": 100, "weight": tenants - 1 if i == heavy else 1}
                   for i in range(tenants)],
    }
