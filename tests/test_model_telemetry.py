"""Telemetry of the golden model against an independent count (spec §10)."""

import random

from kvfabric.spec import FabricParams
from kvfabric.model.channel import BURST, Request
from kvfabric.model.fabric import FabricModel
from kvfabric.model.registers import FabricConfig, TenantConfig


def test_counters_pipeline_and_snapshots(seed):
    rng = random.Random(seed)
    p = FabricParams(tenants=4, channels=3)
    tenants = [TenantConfig(rate=rng.randint(0, 80), capacity=2 * p.pcap, peak_rate=rng.randint(80, 2000),
                            inv_weight=1024, priority=rng.randrange(4), enable=int(i != 3),
                            slo_cycles=rng.randint(2, 40)) for i in range(p.tenants)]
    epoch = rng.randint(50, 300)
    fab = FabricModel(p, FabricConfig(tenants, epoch_cycles=epoch))
    accepted_at = {}
    transfers = []  # (cycle, channel, grant)
    history = []  # live counters at the start of each cycle
    snapshot_requests = set()
    next_id = 0
    cycles = 3000
    for t in range(cycles):
        history.append(fab.telemetry.live.copy())
        reqs = []
        for c in range(p.channels):
            if rng.random() < 0.5:
                reqs.append(Request(rng.randrange(6), rng.choice([0, 64, 512, 4096, 5000]), next_id))
                next_id += 1
            else:
                reqs.append(None)
        snap = rng.random() < 0.01
        if snap:
            snapshot_requests.add(t + 1)
        results = fab.step(reqs, [rng.random() < 0.6 for _ in range(p.channels)], snapshot_request=snap)
        for c, res in enumerate(results):
            if res.accepted and not res.dropped:
                accepted_at[reqs[c].id] = t
            if res.transferred is not None:
                transfers.append((t, c, res.transferred))
    # Counters at the start of cycle T include exactly the transfers of cycles <= T-3 (spec §10).
    for T in rng.sample(range(3, cycles), 40):
        live = history[T]
        for i in range(p.tenants):
            mine = [(t, g) for t, c, g in transfers if g.tenant == i and t <= T - 3]
            assert live.tenants[i].bytes == sum(g.bytes for _, g in mine), f"cycle {T} tenant {i}"
            assert live.tenants[i].grants == len(mine)
            assert live.tenants[i].burst_grants == sum(g.kind == BURST for _, g in mine)
            assert live.tenants[i].slo_violations == sum(
                t - accepted_at[g.id] > tenants[i].slo_cycles for t, g in mine)
    # Snapshots: periodic at multiples of the epoch (cycle k*epoch - 1) and on request.
    periodic = {k * epoch - 1 for k in range(1, cycles // epoch + 1)}
    expected_snaps = sorted(periodic | {t for t in snapshot_requests if t < cycles})
    assert fab.telemetry.epoch_count == len(expected_snaps)
    last = expected_snaps[-1]
    assert fab.telemetry.snapshot.tenants == history[last].tenants
    assert fab.telemetry.snapshot.dropped == history[last].dropped
    # Drops: invalid tenant (4, 5), disabled tenant 3, bytes 0 or > LMAX; never charged to a tenant.
    assert sum(fab.telemetry.live.dropped) > 0
    assert all(g.tenant < 3 for _, _, g in transfers)
