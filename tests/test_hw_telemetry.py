"""Telemetry counters and snapshots against the golden model (Amaranth simulator, spec §10).

Read addresses and the expected read data of every snapshot register come from the
shared register mirror (tests/support/registers.py), the counts from
:mod:`kvfabric.model.telemetry`. Every test prints its seed.
"""

from dataclasses import replace

import pytest

from kvfabric.hw.layouts import Kind
from kvfabric.hw.telemetry import Telemetry
from kvfabric.model.channel import BURST, FCFS, GUARANTEED, Grant
from kvfabric.model.registers import FabricConfig
from kvfabric.model.telemetry import Telemetry as TelemetryModel
from kvfabric.spec import FabricParams

from support.axil_manager import run_sim, seeded
from support.registers import EPOCH_COUNT, dropped_reg, tel_reg, telemetry_addresses, telemetry_read


#: A read's data follow its address by one cycle (hw.readpipe): ``r_data`` in cycle
#: s+1 is the word at the ``r_addr`` of cycle s, with the values of cycle s.
READ_DELAY = 1


def _read_order(params, rng):
    """Every telemetry address and a few that are not (they read 0), shuffled."""
    extra = [EPOCH_COUNT - 4, EPOCH_COUNT + 4, tel_reg(params.tenants, "GRANTS"),
             dropped_reg(params.channels), tel_reg(0, "QUEUE_HWM") + 4, 0x1FFC]
    order = telemetry_addresses(params) + extra
    rng.shuffle(order)
    return order


def _set_grant(ctx, port, grant):
    ctx.set(port.valid, grant is not None)
    if grant is not None:
        ctx.set(port.tenant, grant.tenant)
        ctx.set(port.bytes, grant.bytes)
        ctx.set(port.kind, Kind(grant.kind))
        ctx.set(port.ts, grant.ts)


@pytest.mark.parametrize("params", [
    FabricParams(tenants=3, channels=2, queue_depth=4),
    FabricParams(tenants=2, channels=5, queue_depth=64, max_request_bytes=4096),
    FabricParams(tenants=1, channels=1, queue_depth=1, max_request_bytes=32),
], ids=["3x2", "2x5", "1x1"])
def test_telemetry_vs_model(params, seed):
    """Telemetry against the golden model (spec §10): one read every cycle, every
    register (and a few addresses that read 0) in turn, each word one cycle after
    its address with the values of the address's cycle (hw.readpipe).

    Random grants (sizes, kinds, waits around each tenant's ``slo_cycles``,
    timestamps across the wrap), drops, occupancies, snapshot requests and
    EPOCH_CYCLES changes (including to values below the running count).
    """
    rng = seeded(seed, 2)
    dut = Telemetry(params)
    model = TelemetryModel(params)
    config = FabricConfig.reset(params.tenants)
    ts_mask = (1 << params.ts_bits) - 1
    start = (1 << params.ts_bits) - 400  # the timestamp wraps during the run
    stats = {"snapshots": 0, "late": 0, "reads": 0}

    order = _read_order(params, rng)

    async def testbench(ctx):
        nonlocal config
        snapshot_request = False
        pending = None  # (address, expected word) of last cycle's read
        for cycle in range(1200):
            now = (start + cycle) & ts_mask
            # One read per cycle, every address in turn: the data of the address
            # presented last cycle, with the values of last cycle.
            if pending is not None:
                assert ctx.get(dut.r_data) == pending[1], f"cycle {cycle}: read {pending[0]:#06x}"
                stats["reads"] += 1
            addr = order[cycle % len(order)]
            ctx.set(dut.r_addr, addr)
            pending = (addr, telemetry_read(params, addr, model))

            if rng.random() < 0.02:
                config = replace(config, epoch_cycles=rng.choice([0, 1, 2, 3, 7, 20, 1 << 31]))
            if rng.random() < 0.05:
                config = config.with_tenant(rng.randrange(params.tenants),
                                            slo_cycles=rng.choice([0, 1, 5, 30, (1 << 24) - 1]))
            transfers = []
            for c in range(params.channels):
                grant = None
                if rng.random() < 0.6:
                    tenant = rng.randrange(params.tenants)
                    slo = config.tenants[tenant].slo_cycles
                    wait = rng.choice([0, slo, slo + 1, rng.randrange(1 << params.ts_bits)])
                    grant = Grant(tenant, rng.randrange(1, params.max_request_bytes + 1), 0,
                                  rng.choice([GUARANTEED, BURST, FCFS]), (now - wait) & ts_mask)
                    stats["late"] += (wait & ts_mask) > slo
                transfers.append(grant)
                _set_grant(ctx, dut.grants[c], grant)
            drops = [rng.random() < 0.2 for _ in range(params.channels)]
            occupancy = [[rng.choice([0, 0, 1, rng.randrange(params.queue_depth + 1)])
                          for _ in range(params.tenants)] for _ in range(params.channels)]
            for c in range(params.channels):
                ctx.set(dut.dropped[c], drops[c])
                for i in range(params.tenants):
                    ctx.set(dut.occupancy[c][i], occupancy[c][i])
            for i, t in enumerate(config.tenants):
                ctx.set(dut.tenant_cfg[i].slo_cycles, t.slo_cycles)
            ctx.set(dut.now, now)
            ctx.set(dut.epoch_cycles, config.epoch_cycles)
            # The register file raises `snapshot` in the cycle after the request.
            ctx.set(dut.snapshot, snapshot_request)
            stats["snapshots"] += snapshot_request
            snapshot_request = rng.random() < 0.1
            peaks = {i: max(occupancy[c][i] for c in range(params.channels))
                     for i in range(params.tenants)}
            model.step(now, config, transfers, drops, peaks, snapshot_request)
            await ctx.tick()

    run_sim(dut, testbench)
    print(stats, "epoch_count", model.epoch_count)
    assert stats["late"] > 100 and model.epoch_count > stats["snapshots"] > 50
    assert stats["reads"] == 1199


def test_telemetry_timing():
    """Spec §10 timing, by hand: grants count from t+3, drops from t+2, high-water marks
    from t+1, snapshots copy the values of their own cycle, epochs every
    EPOCH_CYCLES cycles under the value of the previous cycle, one EPOCH_COUNT
    step when both kinds coincide."""
    params = FabricParams(tenants=2, channels=2, queue_depth=8)
    dut = Telemetry(params)
    T = 100  # first cycle of the script
    # cycle -> list of input changes for that cycle only
    grants = {
        T: [(0, Grant(1, 100, 0, BURST, T - 5)),         # wait 5 > slo 4: violation
            (1, Grant(1, 28, 0, GUARANTEED, T - 4))],    # wait 4 = slo: none
        T + 30: [(1, Grant(0, 4096, 0, FCFS, T + 30))],
    }
    drops = {T + 10: [1]}
    occupancy = {T + 20: {(1, 0): 5, (0, 0): 2}}
    snapshots = {T + 2, T + 3, T + 10, T + 11, T + 12, T + 20, T + 21, T + 32, T + 33, T + 50}
    # The epoch_cycles input (the EPOCH_CYCLES register) is 5 from T+40; the
    # epoch rule reads it one cycle late (spec §10), so the counter counts
    # from T+41 (0 there) and epochs end at T+45, T+50, T+55.
    epoch_from = T + 40
    seen = {}

    async def testbench(ctx, addr):
        # The script, reading `addr` every cycle: seen[cycle][addr] is the word
        # with the values of `cycle`, on r_data one cycle later.
        ctx.set(dut.r_addr, addr)
        for i in range(2):
            ctx.set(dut.tenant_cfg[i].slo_cycles, 4)
        for cycle in range(T + 58 + READ_DELAY):
            ctx.set(dut.now, cycle)
            for c in range(2):
                _set_grant(ctx, dut.grants[c], None)
                ctx.set(dut.dropped[c], c in drops.get(cycle, []))
                for i in range(2):
                    ctx.set(dut.occupancy[c][i], occupancy.get(cycle, {}).get((c, i), 0))
            for c, g in grants.get(cycle, []):
                _set_grant(ctx, dut.grants[c], g)
            ctx.set(dut.snapshot, cycle in snapshots)
            ctx.set(dut.epoch_cycles, 5 if cycle >= epoch_from else 0)
            if cycle >= READ_DELAY:
                seen.setdefault(cycle - READ_DELAY, {})[addr] = ctx.get(dut.r_data)
            await ctx.tick()

    for addr in telemetry_addresses(params):
        async def read_addr(ctx, addr=addr):
            await testbench(ctx, addr)
        run_sim(dut, read_addr)
    bytes_lo = lambda cycle, i: seen[cycle][tel_reg(i, "BYTES_LO")]
    reg = lambda cycle, name, i: seen[cycle][tel_reg(i, name.upper())]
    # Snapshot at T+2 (visible T+3) predates the grants of T; the one at T+3 has them.
    assert bytes_lo(T + 3, 1) == 0 and reg(T + 3, "grants", 1) == 0
    assert bytes_lo(T + 4, 1) == 128
    assert [reg(T + 4, n, 1) for n in ("grants", "burst_grants", "slo_violations")] == [2, 1, 1]
    assert [reg(T + 4, n, 0) for n in ("bytes_lo", "grants")] == [0, 0]
    # The drop of T+10 is in the snapshot of T+12, not in those of T+10 and T+11.
    assert [seen[T + 11][dropped_reg(c)] for c in range(2)] == [0, 0]
    assert [seen[T + 12][dropped_reg(c)] for c in range(2)] == [0, 0]
    assert [seen[T + 13][dropped_reg(c)] for c in range(2)] == [0, 1]
    # Occupancy of T+20 reaches the high-water mark at T+21.
    assert reg(T + 21, "queue_hwm", 0) == 0 and reg(T + 22, "queue_hwm", 0) == 5
    assert reg(T + 22, "queue_hwm", 1) == 0
    # A 4096-byte grant at T+30: not in the snapshot of T+32, in that of T+33.
    assert bytes_lo(T + 33, 0) == 0 and bytes_lo(T + 34, 0) == 4096
    assert reg(T + 34, "slo_violations", 0) == 0
    # EPOCH_COUNT: manual snapshots, then epochs at T+45 and T+50 (with a manual
    # one) and T+55, each counted from the next cycle.
    count = [seen[c][EPOCH_COUNT] for c in range(T + 40, T + 58)]
    assert count[0] == 9
    assert [c - T for c in range(T + 41, T + 58) if seen[c][EPOCH_COUNT] != seen[c - 1][EPOCH_COUNT]] \
        == [46, 51, 56]
    assert seen[T + 57][EPOCH_COUNT] == 12
