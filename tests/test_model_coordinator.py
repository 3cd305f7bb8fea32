"""The coordinator across channels (spec §13, issue #27) in the golden model.

Each check is written from the spec's text, not from the model: off is the
arbiter of §4-§6 bit for bit; §13.5's arithmetic is written again here on
exact rationals and its sums checked against §13.7; the timing of §13.5 is
read from the buckets' refills (§6.3), the only place the rates act; the
oracles of issue #27 (a tenant on 2 of 8 channels, a demand shift, the burst
cap over windows) measure delivered bytes against the contract's totals.
"""

import random
from fractions import Fraction

import pytest

from kvfabric.model.channel import Request
from kvfabric.model.contract import ContractError, compile_contract
from kvfabric.model.coordinator import Coordinator, allocate
from kvfabric.model.fabric import FabricModel
from kvfabric.model.regfile import FABRIC, RegisterFile, config_writes
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.model.replay import replay_lockstep, replay_model
from kvfabric.model.trace import TraceRow
from kvfabric.spec import COORD_LATENCY, COORD_MIN_EPOCH, FabricParams

from support.backlog import backlogged

E = COORD_MIN_EPOCH  # every test runs the shortest epoch: fewest cycles per epoch
RATE_MAX = (1 << 16) - 1


def _tenant(params, rate, peak_rate, capacity=None):
    return TenantConfig(rate=rate, capacity=capacity or params.pcap, peak_rate=peak_rate,
                        inv_weight=256 * params.tenants, priority=0, enable=1)


# ---- (a) off is today's arbiter, bit for bit ------------------------------------------------

def _random_run(params, config, seed, cycles, commits):
    """Grant log and per-cycle bucket levels of a fabric under random traffic
    (invalid requests and a refusing memory side included) with the tenant
    ``COMMIT`` s of ``commits`` (cycle -> (tenant, TenantConfig))."""
    rng = random.Random(seed)
    fab = FabricModel(params, config)
    log, levels = [], []
    for t in range(cycles):
        reqs = [Request(rng.randrange(params.tenants + 1), rng.choice([32, 64, 256, 4096, 0]), t & 0xFFFF)
                if rng.random() < 0.6 else None for _ in range(params.channels)]
        results = fab.step(reqs, [rng.random() < 0.7 for _ in range(params.channels)])
        log += [(t, c, r.transferred) for c, r in enumerate(results) if r.transferred is not None]
        levels.append([(ch.level[:], ch.peak[:]) for ch in fab.channels])
        if t in commits:
            fab.commit_tenant(*commits[t])
    return log, levels


def test_off_is_bit_for_bit(seed):
    """COORD_EPOCH and the floor set but coord_enable 0 (spec §13.3): the same
    grants and bucket levels in every cycle as the registers at reset."""
    params = FabricParams(tenants=3, channels=4, queue_depth=2)
    rng = random.Random(seed)
    tenants = [TenantConfig(rate=rng.randrange(1, 200), capacity=rng.randrange(params.pcap, 4 * params.pcap),
                            peak_rate=rng.randrange(200, 800), inv_weight=rng.randrange(300, 2000),
                            priority=rng.randrange(4), enable=1) for _ in range(params.tenants)]
    commits = {rng.randrange(3000): (rng.randrange(params.tenants),
                                     TenantConfig(rate=rng.randrange(1, 300), capacity=params.pcap,
                                                  peak_rate=900, inv_weight=768, enable=1))
               for _ in range(6)}
    reset = FabricConfig(tenants)
    armed = FabricConfig(tenants, coord_enable=0, coord_floor=rng.randrange(1, 256),
                         coord_epoch_cycles=rng.randrange(1, 1 << 24))
    assert _random_run(params, reset, seed, 3000, commits) == _random_run(params, armed, seed, 3000, commits)


# ---- (b) the arithmetic of §13.5 and the sums of §13.7 -----------------------------------

def _check_allocation(params, tenants, demand, floor, got, backlog=None):
    """Spec §13.5's guarantees of one result, from their definitions: a
    tenant without demand or disabled keeps its registers (None); otherwise
    the floor (at least 1 when RATE > 0) on every channel without demand,
    its whole total placed (sum of rates >= C·RATE_i, at most C - 1 units
    above), rate 0 exactly when RATE is, the burst headroom
    PEAK_RATE - RATE on every channel, and on a light pair (demand, not
    backlogged; ``backlog`` None: none is light) RATE exactly when the
    tenant is backlogged on some channel, at least RATE when it is not."""
    C = params.channels
    backlog = backlog or [[d > 0 for d in row] for row in demand]
    for i, t in enumerate(tenants):
        if got[i] is None or t.rate > (1 << params.rate_bits) - 1:
            continue
        light = [c for c in range(C) if demand[i][c] > 0 and not backlog[i][c]]
        heavy = any(demand[i][c] > 0 and backlog[i][c] for c in range(C))
        for c in light:
            r = got[i][c][0]
            assert r == t.rate if heavy else r >= t.rate, (i, c, r, t.rate, heavy)
    rmax, pmax = (1 << params.rate_bits) - 1, (1 << params.peak_rate_bits) - 1
    for i, t in enumerate(tenants):
        mask = [d > 0 for d in demand[i]]
        if not t.enable or not any(mask):
            assert got[i] is None
            continue
        rates = [r for r, _ in got[i]]
        fr = floor * t.rate // 256
        least = max(fr, min(t.rate, 1))
        assert all(rates[c] == min(least, rmax) for c in range(C) if not mask[c]), (i, rates, mask)
        assert all((r == 0) == (t.rate == 0) for r in rates)
        # Unless the loads could reach the highest level 2^W - 1 (spec §13.5's
        # cap, W = 16) or a rate its register's maximum:
        if sum(C * u.rate for u in tenants) < 1 << 16 and max(rates) < rmax:
            placed = sum(rates[c] - fr for c in range(C) if mask[c])
            need = C * (t.rate - fr)
            # The level's overshoot is below the channels it fills; a channel of
            # the set left at 0 gets the minimum 1 instead (§13.7).
            assert need <= placed <= need + max(sum(mask) - 1, 0), (i, rates, need)
            assert C * t.rate <= sum(rates) <= C * t.rate + C - 1
        for r, p in got[i]:
            assert p == min(max(r + t.peak_rate - t.rate, 0), pmax)


def test_allocation_keeps_each_total_and_the_rate_zero_rule(seed):
    rng = random.Random(seed)
    for _ in range(400):
        params = FabricParams(tenants=rng.randrange(1, 9), channels=rng.choice([1, 2, 3, 4, 8, 16]))
        tenants = []
        for _ in range(params.tenants):
            rate = rng.choice([0, 1, 2, rng.randrange(1, 64), rng.randrange(1, 4096)])
            peak = min(rng.choice([rate, rate + rng.randrange(0, 4096)]), RATE_MAX)
            tenants.append(TenantConfig(rate=rate, capacity=0, peak_rate=peak, enable=int(rng.random() < 0.9)))
        floor = rng.choice([0, 0, 255, rng.randrange(256)])
        demand = [[rng.choice([0, 0, 1, rng.randrange(1 << 20)]) for _ in range(params.channels)]
                  for _ in range(params.tenants)]
        backlog = rng.choice([None, [[rng.random() < 0.5 for _ in row] for row in demand]])
        _check_allocation(params, tenants, demand, floor, allocate(tenants, demand, floor, params, backlog=backlog),
                          backlog)
    # Even demand gives the registers back exactly (tenants with demand everywhere).
    for C in (1, 2, 4, 8, 16):
        params = FabricParams(tenants=3, channels=C)
        ts = [TenantConfig(rate=77, capacity=0, peak_rate=301, enable=1),
              TenantConfig(rate=5, capacity=0, peak_rate=5, enable=1), TenantConfig()]
        got = allocate(ts, [[5] * C, [1] * C, [0] * C], 100, params)
        assert got == [((77, 301),) * C, ((5, 5),) * C, None]
        # Light everywhere, or light on some channels and backlogged on the others: the same.
        mixed = [[c % 2 == 0 for c in range(C)], [False] * C, [False] * C]
        assert allocate(ts, [[5] * C, [1] * C, [0] * C], 100, params, backlog=mixed) == got


def test_light_pairs_hold_and_the_rest_goes_where_requests_wait():
    """Spec §13.5 on one case: tenant 0 is backlogged on channels 0-1 only;
    tenant 1 is light on channel 0 and backlogged on 1-3, tenant 2 light on
    all four. Tenant 1 keeps exactly RATE on channel 0 although tenant 0
    loads it; the rest of its total goes to its backlogged channels, the
    least loaded first (2-3, not channel 1, which tenant 0 loads); tenant 2
    keeps its registers; and tenant 0's total is all on 0-1."""
    params = FabricParams(tenants=3, channels=4)
    ts = [TenantConfig(rate=100, capacity=0, peak_rate=150, enable=1),
          TenantConfig(rate=60, capacity=0, peak_rate=60, enable=1),
          TenantConfig(rate=10, capacity=0, peak_rate=20, enable=1)]
    demand = [[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]
    backlog = [[True, True, False, False], [False, True, True, True], [False] * 4]
    got = allocate(ts, demand, 0, params, backlog=backlog)
    r0, r1 = [r for r, _ in got[0]], [r for r, _ in got[1]]
    assert r0[2:] == [1, 1] and 400 <= sum(r0[:2]) <= 401, r0
    assert r1[0] == 60 and 180 <= sum(r1[1:]) <= 182 and r1[1] < r1[2] == r1[3], r1
    assert got[2] == ((10, 20),) * 4
    # Without the backlog bits (every pair levelled) tenant 1 would leave channel 0.
    assert [r for r, _ in allocate(ts, demand, 0, params)[1]][0] < 60


def test_applied_rates_follow_the_accepted_demand(seed):
    """The fabric's rates after an epoch are a result of §13.5 for the demand
    this test counts itself (the channels with a valid request of the tenant
    accepted in the epoch; drops and refusals not counted): the floor off
    them, the whole total on them."""
    params = FabricParams(tenants=3, channels=4, queue_depth=2)
    rng = random.Random(seed)
    tenants = [_tenant(params, rng.randrange(1, 200), rng.randrange(200, 900)) for _ in range(2)]
    tenants.append(TenantConfig())  # disabled: its requests are dropped
    floor = rng.randrange(256)
    config = FabricConfig(tenants, coord_enable=1, coord_floor=floor)
    fab = FabricModel(params, config)
    demand = [[0] * params.channels for _ in range(params.tenants)]
    busy = [rng.sample(range(params.channels), rng.randrange(1, params.channels + 1)) for _ in range(3)]
    for t in range(E):
        reqs = []
        for c in range(params.channels):
            users = [i for i in range(3) if c in busy[i]]
            reqs.append(Request(rng.choice(users), rng.choice([1, 32, 33, 100, 4096]), 0)
                        if users and rng.random() < rng.choice([0.1, 0.9]) else None)
        for c, r in enumerate(fab.step(reqs, [rng.random() < 0.5] * params.channels)):
            if r.accepted and not r.dropped:
                demand[reqs[c].tenant][c] += -(-reqs[c].bytes // 32)
    assert any(demand[0]) and any(demand[1])
    for _ in range(COORD_LATENCY + params.channels):
        fab.step([None] * params.channels, [True] * params.channels)
    got = [None if not t.enable or not any(demand[i]) else
           tuple((ch.config.tenants[i].rate, ch.config.tenants[i].peak_rate) for ch in fab.channels)
           for i, t in enumerate(tenants)]
    _check_allocation(params, tenants, demand, floor, got)
    assert [ch.config.tenants[2] for ch in fab.channels] == [tenants[2]] * params.channels


# ---- (c) when a result applies, and when it is discarded ----------------------------------

T_E2 = 2 * E - 1  # the end of the second epoch
T_A2 = T_E2 + 1 + COORD_LATENCY  # its result holds from here on channel 0,
T_A2_3 = T_A2 + 3  # and tenant 0's on channel 3, the pair watched (spec §13.5: pair (i, c) from t_a + i·C + c)


def _level_steps(commit_at=None, disable_at=None, recommit_at=None):
    """Tenant 0's committed-bucket refill on channel 3 in every cycle around
    T_A2: ``level[t+1] - level[t]`` while it is below its capacity (§6.3).

    Epoch 1: demand on channel 0 only, so from T_A1 channel 3 refills by 1;
    epoch 2: demand on channel 3 only, so from T_A2 + 3 by C·RATE (§13.5). A
    4096-byte grant just before T_A2 empties the bucket to watch the refill."""
    params = FabricParams(tenants=2, channels=4, queue_depth=2)
    rate = 64
    tenant = _tenant(params, rate, 512)
    fab = FabricModel(params, FabricConfig([tenant, tenant], coord_enable=1))
    script = {10: (0, 64), E + 50: (3, 64), T_A2 - 100: (3, 4096)}
    steps = {}
    for t in range(T_A2_3 + 60):
        reqs = [None] * params.channels
        if t in script:
            c, nbytes = script[t]
            reqs[c] = Request(0, nbytes, t & 0xFFFF)
        before = fab.channels[3].level[0]
        fab.step(reqs, [True] * params.channels)
        steps[t] = fab.channels[3].level[0] - before
        if t == commit_at:  # the same values: a COMMIT all the same
            fab.commit_tenant(0, tenant)
        if t == recommit_at:
            fab.set_config(fab.config, committed=(0,))
        if t == disable_at:
            cfg = fab.config
            fab.set_config(FabricConfig(cfg.tenants, coord_enable=0, coord_floor=cfg.coord_floor))
    grant = next(t for t in range(T_A2 - 100, T_A2) if steps[t] < 0)
    return params, rate, grant, steps


def test_result_applies_at_epoch_end_plus_latency():
    params, rate, grant, steps = _level_steps()
    C = params.channels
    assert all(steps[t] == 1 for t in range(grant + 1, T_A2_3)), "epoch 1's result: rate 1 off its demand"
    assert all(steps[t] == C * rate for t in range(T_A2_3, T_A2_3 + 40)), "epoch 2's result from T_A2 + 3 exactly"


@pytest.mark.parametrize("when", [T_E2, T_E2 + COORD_LATENCY, T_A2_3 - 1])
@pytest.mark.parametrize("how", ["commit", "recommit", "disable"])
def test_result_discarded_by_commit_and_disable(how, when):
    """A COMMIT of the tenant (even of its own values) or the coordinator
    turned off, taking effect in t_e .. t_a + i·C + c - 1 (spec §13.5, tenant
    i = 0 on channel c = 3): the even split from the next cycle, and nothing
    applies at t_a + c."""
    kwargs = {"commit": "commit_at", "recommit": "recommit_at", "disable": "disable_at"}[how]
    params, rate, grant, steps = _level_steps(**{kwargs: when})
    after = max(grant + 1, when + 1)
    assert all(steps[t] == rate for t in range(after, T_A2_3 + 40)), [steps[t] for t in range(after, T_A2_3 + 40)]


def test_result_kept_by_commit_outside_the_window():
    """A COMMIT just before t_e leaves the result (computed after it); one at
    t_a + 3 comes after it has applied on channel 3: the tenant returns to the
    even split a cycle later."""
    params, rate, grant, steps = _level_steps(commit_at=T_E2 - 1)
    assert all(steps[t] == params.channels * rate for t in range(T_A2_3, T_A2_3 + 40))
    params, rate, grant, steps = _level_steps(commit_at=T_A2_3)
    assert steps[T_A2_3] == params.channels * rate
    assert all(steps[t] == rate for t in range(T_A2_3 + 1, T_A2_3 + 40))


def test_skip_is_exact_with_the_coordinator_on(seed):
    """FabricModel.skip across epoch ends and apply cycles equals stepping the
    idle cycles one by one (spec §13.4: the epoch counter runs while idle)."""
    params = FabricParams(tenants=2, channels=3, queue_depth=2)
    rng = random.Random(seed)
    config = FabricConfig([_tenant(params, 40, 300), _tenant(params, 90, 600)], coord_enable=1,
                          coord_floor=40, epoch_cycles=3000)
    fabs = [FabricModel(params, config), FabricModel(params, config)]
    for phase in range(4):
        for _ in range(rng.randrange(50, 400)):
            reqs = [Request(rng.randrange(2), rng.choice([64, 512]), 0) if rng.random() < 0.5 else None
                    for _ in range(params.channels)]
            results = [f.step(reqs, [True] * params.channels) for f in fabs]
            assert results[0] == results[1]
        while not fabs[0].quiescent():
            for f in fabs:
                f.step([None] * params.channels, [True] * params.channels)
        idle = rng.randrange(1, 3 * E)
        fabs[0].skip(idle)
        for _ in range(idle):
            fabs[1].step([None] * params.channels, [True] * params.channels)
        a, b = fabs
        assert a.cycle == b.cycle
        assert (a.coordinator.epoch_counter, a.coordinator.pending, a.coordinator.splits, a.coordinator.demand) == \
               (b.coordinator.epoch_counter, b.coordinator.pending, b.coordinator.splits, b.coordinator.demand)
        assert [(c.level, c.peak, c.tag, c.config) for c in a.channels] == \
               [(c.level, c.peak, c.tag, c.config) for c in b.channels]
        assert a.telemetry.epoch_counter == b.telemetry.epoch_counter


# ---- (d), (e), (f) the oracles of issue #27 -----------------------------------------------

SIZE = 256  # bytes per request: four cycles of a 64-byte-per-cycle channel, so queues stay full
B = 64  # the memory side's bytes per cycle (spec §8)


def _backlogged(params, config, channels_of, cycles):
    return backlogged(params, config, channels_of, cycles, size=SIZE, bytes_per_cycle=B)


def _per_cycle(served, tenant, start, end):
    return Fraction(sum(row[tenant] for row in served[start:end]), end - start)


SKEW_PARAMS = FabricParams(tenants=4, channels=8, queue_depth=4)
RATE = 64  # 8 bytes per cycle per channel: a total of 64 bytes per cycle over 8 channels
GUARANTEE = Fraction(SKEW_PARAMS.channels * RATE, 8)
SPREAD = {i: range(8) for i in (1, 2, 3)}


def _skew_config(on):
    tenants = [_tenant(SKEW_PARAMS, RATE, 8 * B) for _ in range(4)]
    return FabricConfig(tenants, coord_enable=int(on))


@pytest.mark.parametrize("on", [True, False])
def test_skewed_tenant_gets_its_total(on):
    """Issue #27's case: four tenants guaranteed the same total, all
    backlogged, tenant 0 on channels 0-1 only. After two epochs and the
    latency, with the coordinator on, it receives >= 95 % of its total and
    every other tenant >= 99 % of its own; off it stays near the 2/8 of its
    guarantee that two channels give it, plus their leftover."""
    start = 2 * E + COORD_LATENCY + 1
    served, _ = _backlogged(SKEW_PARAMS, _skew_config(on), lambda t: {0: (0, 1), **SPREAD}, start + 2 * E)
    got = [_per_cycle(served, i, start, len(served)) / GUARANTEE for i in range(4)]
    print(f"coordinator {'on' if on else 'off'}: delivered / total guarantee "
          + ", ".join(f"tenant {i} {float(g):.3f}" for i, g in enumerate(got)))
    if on:
        assert got[0] >= Fraction(95, 100)
    else:
        assert got[0] < Fraction(95, 100)
    assert all(g >= Fraction(99, 100) for g in got[1:])


def test_demand_shift_recovers_within_two_epochs():
    """Tenant 0 moves from channels 0-1 to 2-3 in the middle of an epoch; from
    2 epochs + COORD_LATENCY after the move (spec §13.7) it receives >= 95 %
    of its total again, and did before the move."""
    move = 3 * E + E // 3
    back = move + 2 * E + COORD_LATENCY + 1
    served, _ = _backlogged(SKEW_PARAMS, _skew_config(True),
                            lambda t: {0: (0, 1) if t < move else (2, 3), **SPREAD}, back + E)
    before = _per_cycle(served, 0, 2 * E + COORD_LATENCY + 1, move) / GUARANTEE
    after = _per_cycle(served, 0, back, len(served)) / GUARANTEE
    print(f"tenant 0 before the move {float(before):.3f}, from 2 epochs + latency after it {float(after):.3f}")
    assert before >= Fraction(95, 100) and after >= Fraction(95, 100)


def test_burst_cap_holds_over_windows():
    """A tenant alone, backlogged, moving between channel sets every 1.5
    epochs: over every window of w >= one epoch its bytes stay within
    spec §13.7's C·(PCAP/8 + LMAX) + w·(C·PEAK_RATE + C)/8, and it does reach
    its total burst cap (the bound is not vacuous)."""
    params = FabricParams(tenants=2, channels=8, queue_depth=4)
    peak_rate = 64  # 8 bytes per cycle per channel, 64 over the fabric
    config = FabricConfig([_tenant(params, 16, peak_rate), TenantConfig()], coord_enable=1)
    sets = [(0,), (0, 1, 2), (5, 6), tuple(range(8)), (7,)]
    served, fab = _backlogged(params, config, lambda t: {0: sets[t * 2 // (3 * E) % len(sets)]}, 8 * E)
    C = params.channels
    slope = Fraction(C * peak_rate + C, 8)
    allowance = C * (params.pcap // 8 + params.max_request_bytes)
    # max over windows [t0, t1) with t1 - t0 >= E of bytes - slope·w: a running minimum.
    prefix = [0]
    for row in served:
        prefix.append(prefix[-1] + row[0])
    worst, lowest, densest = None, None, Fraction(0)
    for t1 in range(E, len(prefix)):
        t0 = t1 - E
        lowest = prefix[t0] - slope * t0 if lowest is None else min(lowest, prefix[t0] - slope * t0)
        excess = prefix[t1] - slope * t1 - lowest
        worst = excess if worst is None else max(worst, excess)
        densest = max(densest, Fraction(prefix[t1] - prefix[t0], E))
    print(f"largest excess over w x slope: {float(worst):.0f} B (allowance {allowance} B); "
          f"densest epoch {float(densest):.2f} B/cycle against a cap of {C * peak_rate / 8} B/cycle")
    assert worst <= allowance
    assert densest >= Fraction(9, 10) * C * peak_rate / 8


# ---- the fast replay engine against the reference one ----------------------------------------

def test_replay_engines_agree_with_the_coordinator_on(seed):
    """replay_model (channels replayed between the coordinator's events) and
    replay_lockstep (every channel every cycle) give the same grant log, on
    traffic with idle gaps across epoch ends and apply cycles; and the
    coordinator changed the log (the test is not vacuous)."""
    params = FabricParams(tenants=3, channels=4, queue_depth=2)
    rng = random.Random(seed)
    tenants = [_tenant(params, 24, 128), _tenant(params, 24, 96), _tenant(params, 48, 256)]
    rows, t = [], 0
    for burst in range(12):
        t += rng.choice([10, 300, E, 3 * E // 2])  # idle gaps, some across epoch ends
        chans = rng.choice([(0,), (1, 2), (0, 1, 2, 3), (3,)])
        for _ in range(rng.randrange(20, 80)):
            t += rng.randrange(0, 4)
            rows.append(TraceRow(len(rows), t, rng.choice(chans), rng.randrange(4), rng.choice([64, 256, 1024])))
    config = FabricConfig(tenants, coord_enable=1, coord_floor=rng.randrange(64))
    fast = replay_model(params, config, rows, Fraction(32))
    slow, _ = replay_lockstep(params, config, rows, Fraction(32))
    assert fast.log == slow.log
    off = replay_model(params, FabricConfig(tenants), rows, Fraction(32))
    assert off.log != fast.log


# ---- (g) the contract's keys ----------------------------------------------------------------

def _doc(**fabric):
    return {"fabric": {"clock_mhz": 1000, "channels": 8, "channel_gbps": 64, "admission_limit": 0.9, **fabric},
            "tenant": [{"id": 0, "name": "a", "guaranteed_gbps": 64, "burst_gbps": 128,
                        "burst_duration_ms": 0.001, "priority": 0, "latency_slo_us": 10}]}


def test_contract_compiles_the_coordinator():
    cfg = compile_contract(_doc()).config
    assert (cfg.coord_enable, cfg.coord_floor, cfg.coord_epoch_cycles) == (0, 0, 0)
    cfg = compile_contract(_doc(coordinator=True, coordinator_epoch_us=4.0001, coordinator_floor=0.126)).config
    # ceil(4.0001 us x 1000 MHz) = 4001 cycles, floor(256 x 0.126) = 32
    assert (cfg.coord_enable, cfg.coord_floor, cfg.coord_epoch_cycles) == (1, 32, 4001)
    writes = dict(config_writes(cfg))
    assert writes[FABRIC.address("COORD")] == 1 | 32 << 8 and writes[FABRIC.address("COORD_EPOCH")] == 4001
    mirror = RegisterFile(FabricParams(tenants=8, channels=8))
    for addr, data in config_writes(cfg):
        mirror.write(addr, data)
    assert mirror.config == cfg


@pytest.mark.parametrize("key, value, message", [
    ("coordinator", 1, r"\[fabric\]\.coordinator must be true or false, not 1"),
    ("coordinator_epoch_us", 0, r"\[fabric\]\.coordinator_epoch_us must be > 0, not 0"),
    ("coordinator_epoch_us", -3, r"\[fabric\]\.coordinator_epoch_us must be > 0"),
    ("coordinator_epoch_us", 2, r"coordinator_epoch_us = 2 is 2000 cycles at 1000 MHz; allowed 2048\.\.16777215 "
                                r"cycles \(2\.048\.\.16777\.2 us\)"),
    ("coordinator_epoch_us", 20000, r"coordinator_epoch_us = 20000 is 20000000 cycles .* allowed 2048\.\.16777215"),
    ("coordinator_epoch_us", "4", r"coordinator_epoch_us must be a number"),
    ("coordinator_floor", 1, r"\[fabric\]\.coordinator_floor must be in 0 <= x < 1 .*, not 1"),
    ("coordinator_floor", -0.5, r"\[fabric\]\.coordinator_floor must be >= 0"),
    ("coordinator_floor", True, r"\[fabric\]\.coordinator_floor must be a number"),
])
def test_contract_rejects_bad_coordinator_keys(key, value, message):
    with pytest.raises(ContractError, match=message):
        compile_contract(_doc(**{key: value}))


# ---- the registers ----------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("coord_enable", 2, r"COORD register coord_enable = 2 does not fit its 1-bit register \(allowed 0\.\.1\)"),
    ("coord_floor", 256, r"COORD register coord_floor = 256 does not fit its 8-bit register \(allowed 0\.\.255\)"),
    ("coord_epoch_cycles", 1 << 24, r"COORD_EPOCH register coord_epoch_cycles = 16777216 does not fit its "
                                    r"24-bit register \(allowed 0\.\.16777215\)"),
    ("coord_floor", 0.5, r"COORD register coord_floor must be an integer"),
])
def test_fabric_config_checks_the_coordinator_fields(field, value, message):
    with pytest.raises((ValueError, TypeError), match=message):
        FabricConfig([TenantConfig()], **{field: value})


def test_register_file_names_the_committed_tenant():
    """COORD and COORD_EPOCH are plain fabric registers (spec §9); a COMMIT, even
    of unchanged values, names its tenant for the coordinator (spec §13.3)."""
    from kvfabric.tb.axil import tenant_reg
    rf = RegisterFile(FabricParams(tenants=2, channels=2))
    coord, epoch = FABRIC.address("COORD"), FABRIC.address("COORD_EPOCH")
    rf.write(coord, 0xFFFF_FF01)
    rf.write(epoch, 0xFFFF_FFFF)
    assert (rf.config.coord_enable, rf.config.coord_floor, rf.config.coord_epoch_cycles) == (1, 0xFF, (1 << 24) - 1)
    assert rf.read(coord) == 0xFF01 and rf.read(epoch) == (1 << 24) - 1 and rf.committed == ()
    assert rf.config.coord_epoch == (1 << 24) - 1
    rf.write(epoch, 5)
    assert rf.config.coord_epoch == COORD_MIN_EPOCH  # below the minimum: the minimum (spec §13.2)
    rf.write(tenant_reg(1, "COMMIT"), 0, strb=0)
    assert rf.committed == (1,) and not rf.changed
    rf.write(coord, 0)
    assert rf.committed == () and rf.config.coord_enable == 0


def test_skewed_total_with_a_floor_keeps_the_derived_bound():
    """Spec §13.7's steady state with a floor f: tenant 0's rates on its two
    channels sum to at least C·RATE − (C − |S|)·floor(f·RATE/256), and over
    the window it receives at least what §7's guaranteed-rate bound gives for
    those rates."""
    floor, S = 32, (0, 1)
    config = FabricConfig(_skew_config(True).tenants, coord_enable=1, coord_floor=floor)
    start = 2 * E + COORD_LATENCY + 1
    served, fab = _backlogged(SKEW_PARAMS, config, lambda t: {0: S, **SPREAD}, start + E)
    C, rates = SKEW_PARAMS.channels, [ch.config.tenants[0].rate for ch in fab.channels]
    fr = floor * RATE // 256
    assert sum(rates[c] for c in S) >= C * RATE - (C - len(S)) * fr
    assert all(rates[c] == fr for c in range(C) if c not in S)  # the floor kept where it has no demand
    w = len(served) - start
    got = sum(row[0] for row in served[start:])
    bound = sum(Fraction(rates[c], 8) * w - Fraction(SKEW_PARAMS.pcap, 8) - SKEW_PARAMS.max_request_bytes
                for c in S)
    print(f"floor {floor}/256: tenant 0 rates {rates}, {got} B in {w} cycles, bound {float(bound):.0f} B, "
          f"{float(Fraction(got, w) / GUARANTEE):.3f} of its total")
    assert got >= bound


# ---- issue #43: a tenant's channel set in the contract ---------------------------------------

def _skew_doc(channels, coordinator=True, floor=0):
    """Issue #43's case: 8 channels of 51.2 GB/s at 400 MHz, admission limit
    0.85 (43.52 GB/s per channel), four tenants of 60 GB/s, one on ``channels``."""
    t = {"guaranteed_gbps": 60, "burst_gbps": 120, "burst_duration_ms": 0.01, "priority": 0,
         "latency_slo_us": 10}
    tenants = [{"id": i, "name": f"t{i}", **t} for i in range(4)]
    tenants[1]["channels"] = channels
    return {"fabric": {"clock_mhz": 400, "channels": 8, "channel_gbps": 51.2, "admission_limit": 0.85,
                       "coordinator": coordinator, "coordinator_floor": floor},
            "tenant": tenants}


def test_contract_admits_channel_sets_only_where_an_allocation_fits():
    """Spec §12, §13.7: 60 GB/s on channels 0-1 fits (2 x 43.52 GB/s); on
    channel 0 alone it does not (the set {0} and its excess are named);
    neither do the four tenants confined to 5 channels, which the per-channel
    sum of the even split admits; a floor that every tenant keeps on every
    channel takes room from the set; a set needs the coordinator."""
    assert compile_contract(_skew_doc([1, 0])).tenants[1].extra["channels"] == (0, 1)
    with pytest.raises(ContractError, match=r"confined to channels \[0\] \('t1'\) need 60\.000 GB/s, above "
                                            r"admission_limit 0\.85 x the capacity of those 1 channels "
                                            r"\(less the floors\) = 43\.520 GB/s by 16\.480 GB/s"):
        compile_contract(_skew_doc([0]))
    doc = _skew_doc([0, 1, 2, 3, 4])
    for t in doc["tenant"]:
        t["channels"] = [0, 1, 2, 3, 4]
    with pytest.raises(ContractError, match=r"channels \[0, 1, 2, 3, 4\] \('t0', 't1', 't2', 't3'\) need "
                                            r"240\.000 GB/s, .* = 217\.600 GB/s by 22\.400 GB/s"):
        compile_contract(doc)
    # Floor 1/2: each tenant keeps 3.75 GB/s on every channel (15 GB/s of floors per
    # channel); tenant 1 places the other 60 - 8 x 3.75 = 30 GB/s on channels 0-1,
    # which have 2 x (43.52 - 15) = 57.04 GB/s: admitted.
    compile_contract(_skew_doc([0, 1], floor=0.5))
    with pytest.raises(ContractError, match=r"channels needs \[fabric\]\.coordinator = true"):
        compile_contract(_skew_doc([0, 1], coordinator=False))
    for bad in ([], [8], [0, 0], "0", [0.5]):
        with pytest.raises(ContractError, match=r"tenant 't1': channels must"):
            compile_contract(_skew_doc(bad))


def test_epoch_result_levels_only_the_pairs_whose_queue_filled():
    """Spec §13.4-§13.5 through the Coordinator: an acceptance that leaves the
    tenant's queue full marks its pair backlogged, one that does not leaves
    it light, and the epoch's result keeps a light pair's even split. The
    case of test_light_pairs_hold_and_the_rest_goes_where_requests_wait,
    counted as acceptances: tenant 1 is accepted on all four channels, its
    queue filling on 1-3 only, so it keeps exactly RATE on channel 0 (levelled
    as if backlogged everywhere it would leave channel 0, tenant 0's)."""
    params = FabricParams(tenants=3, channels=4)
    ts = [TenantConfig(rate=100, capacity=0, peak_rate=150, enable=1),
          TenantConfig(rate=60, capacity=0, peak_rate=60, enable=1),
          TenantConfig(rate=10, capacity=0, peak_rate=20, enable=1)]
    on = FabricConfig(ts, coord_enable=1)
    coord = Coordinator(params)
    for c, i, full in [(0, 0, True), (1, 0, True), (0, 1, False), (1, 1, True), (2, 1, True), (3, 1, True),
                       *((c, 2, False) for c in range(4))]:
        coord.count(c, i, 256, full)
    coord.end_epoch(0, on)
    rates = {i: [r for r, _ in row] if row is not None else None for i, row in coord.pending[1].items()}
    assert rates[1][0] == 60 and 180 <= sum(rates[1][1:]) <= 182, rates[1]
    assert rates[0][2:] == [1, 1] and 400 <= sum(rates[0][:2]) <= 401, rates[0]
    assert coord.pending[1][2] == ((10, 20),) * 4


def test_a_latency_bound_tenant_keeps_its_even_split_though_its_queues_filled():
    """Spec §13.4: a tenant whose priority CREDITS.arrival_prio marks at the
    epoch's end has no backlogged pair. The case above with tenant 1's
    queue filling on all four channels: unmarked, it is levelled off channel
    0, which tenant 0 loads (its rate there below its RATE of 60); with its
    priority 1 marked arrival-ordered it is light everywhere and gets back
    its registers, 60 on every channel (the even split, spec §13.7 "Light
    tenants"), while tenant 0 (priority 0, unmarked) is levelled as before."""
    params = FabricParams(tenants=3, channels=4)
    ts = [TenantConfig(rate=100, capacity=0, peak_rate=150, enable=1, priority=0),
          TenantConfig(rate=60, capacity=0, peak_rate=60, enable=1, priority=1),
          TenantConfig(rate=10, capacity=0, peak_rate=20, enable=1, priority=0)]
    rates = {}
    for marked in (0, 0b0010):
        coord = Coordinator(params)
        for c, i, full in [(0, 0, True), (1, 0, True), *((c, 1, True) for c in range(4)),
                           *((c, 2, False) for c in range(4))]:
            coord.count(c, i, 256, full)
        coord.end_epoch(0, FabricConfig(ts, coord_enable=1, arrival_prio=marked))
        rates[marked] = {i: [r for r, _ in row] for i, row in coord.pending[1].items()}
    assert rates[0][1][0] < 60, rates[0]
    assert rates[0b0010][1] == [60] * 4, rates[0b0010]
    assert rates[0b0010][0][2:] == [1, 1] and 400 <= sum(rates[0b0010][0][:2]) <= 401, rates[0b0010]


def test_damped_descent_uses_the_last_epoch_until_the_coordinator_is_off():
    """Spec §13.5's p[i][c]: an epoch's result is computed with the rates of
    the result before it (applied or discarded by a COMMIT alike; 0 for a
    tenant not active then), none for the first epoch and none after the
    coordinator was turned off. Tenant 0 backlogged on both channels, then
    only on channel 0 with tenant 1 confined there: its rate on channel 0
    halves (the level wants nothing there), not falling to the minimum."""
    params = FabricParams(tenants=3, channels=2)
    tenants = [_tenant(params, 1000, 2000), _tenant(params, 1000, 2000), _tenant(params, 500, 600)]
    on = FabricConfig(tenants, coord_enable=1)
    off = FabricConfig(tenants, coord_enable=0)
    coord = Coordinator(params)

    def epoch(accepts):
        for c, i in accepts:
            coord.count(c, i, 256, True)
        coord.end_epoch(0, on)
        return [[r for r, _ in s] if s is not None else None for s in coord.pending[1].values()]

    # Epoch 1: no previous rates: tenant 0 alone, on both channels.
    first = epoch([(0, 0), (1, 0)])
    assert first == [[r for r, _ in row] if row else None
                     for row in allocate(tenants, [[1, 1], [0, 0], [0, 0]], 0, params)]
    assert first[0] == [1000, 1000] and first[1] is None
    coord.configure(on, on, committed=[0])     # a COMMIT discards tenant 0's result, not its p
    # Epoch 2: tenant 0 still on both; tenant 1 arrives, confined to channel 0.
    second = epoch([(0, 0), (1, 0), (0, 1)])
    undamped = [[r for r, _ in row] for row in allocate(tenants, [[1, 1], [1, 0], [0, 0]], 0, params)[:2]]
    print(f"tenant 0's rates: epoch 1 {first[0]}, epoch 2 {second[0]} (undamped {undamped[0]})")
    assert undamped[0][0] == 1 and second[0][0] == 500 and sum(second[0]) >= 2000
    # Epoch 3: the same demand; the floor halves again.
    assert epoch([(0, 0), (1, 0), (0, 1)])[0][0] == 250
    # Off and on again: the first epoch has no previous rates.
    coord.configure(on, off)
    coord.configure(off, on)
    assert epoch([(0, 0), (1, 0), (0, 1)])[:2] == undamped
