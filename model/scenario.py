"""The essay's scenario as a trace: one prefill burst against steady decodes.

Scaled to simulate in seconds: the prefill moves 32 MiB (the essay's 42 GB at
full scale) in 4 KiB reads, issued far faster than the channels drain them,
and each decode tenant issues one step of 256-byte KV reads every
``step_cycles``. Every read is spread round-robin over the channels.
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
