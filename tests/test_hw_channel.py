"""ChannelArbiter against the golden model, compared every cycle (Amaranth simulator).

Random traffic with random idle gaps, invalid requests, random ``grant.ready``
backpressure, random ``credit_return`` bits and ``CREDITS`` limits (spec §6.6)
and occasional configuration commits. Each test prints its seed;
``KVFABRIC_SEED`` overrides it.
"""

import os
import random
from dataclasses import dataclass, replace

import pytest
from amaranth.sim import Simulator

from kvfabric.hw.channel import ChannelArbiter
from kvfabric.spec import BURST, FabricParams
from kvfabric.model.channel import ChannelModel, Request
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.tb import stimulus

from support.sim_inputs import set_all


def _seed(default):
    env = os.environ.get("KVFABRIC_SEED")
    seed = int(env) if env else default
    print(f"seed = {seed} (set KVFABRIC_SEED to override)")
    return seed


@dataclass
class Traffic:
    """Knobs of one randomized run."""

    cycles: int = 2000
    p_req: float = 0.6           # probability a new request is offered when idle
    p_invalid: float = 0.05      # probability an offered request is invalid
    p_ready: float = 0.7         # probability grant.ready is 1
    p_commit: float = 0.004      # probability of a configuration change per cycle
    p_fcfs_toggle: float = 0.0   # probability fcfs_bypass flips per cycle
    p_starve_change: float = 0.0  # probability starve_limit is redrawn per cycle
    avoid_full: bool = True      # like the replay driver: prefer tenants with room
    now_offset: int = 0          # start of the timestamp counter (to test its wrap)
    small_bytes: int = 0         # if nonzero, most requests are at most this size
    # Weighted costs far above the unweighted `served` let a served tenant's
    # tag run ahead of V without bound while another backlogged tenant holds
    # vmin down (spec §6.5's wrap argument does not cover it: reported to the
    # lead). Keep the runaway below the half range within a test at T = 20.
    max_inv_weight: int = 384
    starve: tuple = (0, 0, 50, 200)
    full_buckets: bool = False   # rates and capacities at their maximum
    credits: tuple = (0,)        # choices of each CREDITS limit (spec §6.6)
    p_return: float = 0.2        # probability of each credit_return bit per cycle
    p_credit_change: float = 0.0  # probability the CREDITS limits are redrawn per cycle
    arrival: bool = False        # a random CREDITS.arrival_prio, redrawn with the limits (spec §6.2)
    bulk_run: bool = False       # a random CTRL.bulk_run and bulk_prio, redrawn with the limits (spec §6.2)


def random_tenant(rng, params, traffic):
    return stimulus.random_tenant(params, rng, drainable=False, enable=0.9,
                                  max_inv_weight=traffic.max_inv_weight, full_buckets=traffic.full_buckets)


def random_credits(rng, traffic):
    return stimulus.random_credits(rng, traffic.credits)


def random_bulk_prio(rng, traffic):
    """A ``CREDITS.bulk_prio`` mask, only where limits are drawn at all."""
    return stimulus.random_bulk_prio(rng) if any(traffic.credits) else 0


def random_config(rng, params, traffic, fcfs=0):
    return stimulus.random_config(params, rng, fcfs=fcfs, credits=traffic.credits, drainable=False,
                                  starve=traffic.starve, epoch=(0,), enable=0.9, arrival=traffic.arrival,
                                  bulk_run=traffic.bulk_run,
                                  max_inv_weight=traffic.max_inv_weight, full_buckets=traffic.full_buckets)


def random_request(rng, params, traffic, full):
    lmax = params.max_request_bytes
    if rng.random() < traffic.p_invalid:
        kind = rng.randrange(3)
        if kind == 0:
            return Request(rng.randrange(params.tenants, 16) if params.tenants < 16 else 0,
                           rng.randrange(1, lmax + 1), rng.randrange(1 << params.id_width))
        nbytes = 0 if kind == 1 else rng.randrange(lmax + 1, 1 << params.bytes_bits)
        return Request(rng.randrange(params.tenants), nbytes, rng.randrange(1 << params.id_width))
    room = [i for i in range(params.tenants) if not full[i]]
    if traffic.avoid_full and room:
        tenant = rng.choice(room)
    else:
        tenant = rng.randrange(params.tenants)
    if traffic.small_bytes and rng.random() < 0.9:
        nbytes = rng.randrange(1, traffic.small_bytes + 1)
    else:
        nbytes = rng.choice([lmax, rng.randrange(1, lmax + 1), rng.randrange(1, 65)])
    return Request(tenant, nbytes, rng.randrange(1 << params.id_width))


def next_config_inputs(dut, config):
    """The configuration of the next cycle, which the channel precomputes
    selection keys under (the register file's ``cfg_*_next`` outputs)."""
    pairs = []
    for i, t in enumerate(config.tenants):
        pairs += [(dut.priority_next[i], t.priority), (dut.guaranteed_next[i], t.rate != 0)]
    pairs += [(dut.fcfs_bypass_next, config.fcfs_bypass), (dut.starve_limit_next, config.starve_limit)]
    pairs += [(dut.credit_limit_next[k], limit) for k, limit in enumerate(config.credits)]
    pairs += [(dut.bulk_prio_next, config.bulk_prio), (dut.arrival_prio_next, config.arrival_prio)]
    return pairs


def config_inputs(dut, config):
    """The configuration of the current cycle (and, until told otherwise, the next)."""
    pairs = next_config_inputs(dut, config)
    for i, t in enumerate(config.tenants):
        cfg = dut.tenant_cfg[i]
        pairs += [(cfg.rate, t.rate), (cfg.capacity, t.capacity), (cfg.peak_rate, t.peak_rate),
                  (cfg.inv_weight, t.inv_weight),
                  (cfg.priority, t.priority),  # unused by the channel: see priority_next
                  (cfg.enable, t.enable), (cfg.slo_cycles, t.slo_cycles),
                  # Spec §6.3: the committed level after a burst grant.
                  (dut.burst_level[i], min(t.rate, t.capacity))]
    pairs.append((dut.fcfs_bypass, config.fcfs_bypass))
    pairs += [(dut.credit_limit[k], limit) for k, limit in enumerate(config.credits)]
    pairs.append((dut.bulk_run, config.bulk_run))
    return pairs


def check_state(ctx, dut, model, cycle):
    """Registers of cycle t: grant register, per-tenant state, V."""
    p = model.params
    where = f"cycle {cycle}"
    g = model.grant
    assert ctx.get(dut.grant.valid) == (g is not None), where
    if g is not None:
        got = (ctx.get(dut.grant.payload.tenant), ctx.get(dut.grant.payload.bytes),
               ctx.get(dut.grant.payload.id), ctx.get(dut.grant.payload.kind).value,
               ctx.get(dut.grant_ts))
        assert got == (g.tenant, g.bytes, g.id, g.kind, g.ts), where
    for i in range(p.tenants):
        got = (ctx.get(dut.dyn_level[i]), ctx.get(dut.dyn_peak[i]), ctx.get(dut.dyn_tag[i]))
        assert got == (model.level[i], model.peak[i], model.tag[i]), f"{where} tenant {i}"
    got = (ctx.get(dut.vt), ctx.get(dut.served), ctx.get(dut.vmin), ctx.get(dut.vmin_valid))
    assert got == (model.vt, model.served, model.vmin, model.vmin_valid), where
    assert [ctx.get(x) for x in dut.inflight] == model.inflight, f"{where} inflight"
    full = model.queue_full()
    assert [ctx.get(dut.queue_full[i]) for i in range(p.tenants)] == [int(f) for f in full], where
    assert [ctx.get(dut.occupancy[i]) for i in range(p.tenants)] == model.occupancy(), where


def _decides(model, now, **off):
    """Whether the model's winner at ``now`` changes with the configuration
    fields ``off`` replaced (a rule switched off); the model is left as it was."""
    config = model.config
    chosen = model.select(now)
    model.config = replace(config, **off)
    try:
        return model.select(now) != chosen
    finally:
        model.config = config


def run_random(params, traffic, seed, fpga=False):
    rng = random.Random(seed)
    config = random_config(rng, params, traffic)
    model = ChannelModel(params, config)
    dut = ChannelArbiter(params, checks=True, fpga=fpga)
    stats = {"grants": 0, "accepted": 0, "dropped": 0, "kinds": [0, 0, 0, 0], "stalls": 0,
             "max_occupancy": 0,
             "no_credit": 0, "arrival_decided": 0, "latency_burst": 0, "run_decided": 0}

    async def testbench(ctx):
        nonlocal config
        pending = None
        set_all(ctx, config_inputs(dut, config))
        for cycle in range(traffic.cycles):
            now = (traffic.now_offset + cycle) % (1 << params.ts_bits)
            check_state(ctx, dut, model, cycle)

            # Inputs of cycle t.
            if pending is None and rng.random() < traffic.p_req:
                pending = random_request(rng, params, traffic, model.queue_full())
            grant_ready = int(rng.random() < traffic.p_ready)
            credit_return = tuple(int(rng.random() < traffic.p_return) for _ in range(3))
            stats["no_credit"] += not all(model.has_credit())
            stats["max_occupancy"] = max(stats["max_occupancy"], *model.occupancy())
            inputs = [(dut.credit_return, sum(b << k for k, b in enumerate(credit_return))), (dut.now, now),
                      (dut.now_next, (now + 1) % (1 << params.ts_bits)), (dut.grant.ready, grant_ready),
                      (dut.req.valid, pending is not None)]
            if pending is not None:
                inputs += [(dut.req.payload.tenant, pending.tenant), (dut.req.payload.bytes, pending.bytes),
                           (dut.req.payload.id, pending.id)]
            set_all(ctx, inputs)
            if pending is not None:
                want_ready = model.req_ready(pending.tenant, pending.bytes)
                assert ctx.get(dut.req.ready) == want_ready, f"cycle {cycle} req.ready"

            if traffic.arrival:
                # Cycles in which arrival order picks another winner than WF2Q+ order would.
                stats["arrival_decided"] += _decides(model, now, arrival_prio=0)
            if traffic.bulk_run:
                # Cycles in which the bulk run picks another winner than it would without.
                stats["run_decided"] += _decides(model, now, bulk_run=0)
            held = model.grant
            result = model.step(now, pending, bool(grant_ready), credit_return)
            assert ctx.get(dut.dropped) == result.dropped, f"cycle {cycle} dropped"
            if result.transferred is not None:
                stats["grants"] += 1
                stats["kinds"][result.transferred.kind] += 1
            chosen = model.grant
            if chosen is not None and chosen is not held and chosen.kind == BURST:
                # A burst winner in the guaranteed credit class (spec §6.6):
                # a tenant of an arrival-ordered priority past its buckets.
                prio = config.tenants[chosen.tenant].priority
                stats["latency_burst"] += (config.arrival_prio >> prio & 1) and not (config.bulk_prio >> prio & 1)
            if result.accepted:
                stats["accepted"] += 1
                stats["dropped"] += result.dropped
                pending = None
            elif pending is not None:
                stats["stalls"] += 1

            # A configuration commit in this cycle takes effect in both from
            # the next cycle; the channel sees it coming (priority_next, ...).
            if rng.random() < traffic.p_commit:
                i = rng.randrange(params.tenants)
                tenants = list(config.tenants)
                tenants[i] = random_tenant(rng, params, traffic)
                config = replace(config, tenants=tenants)
            if rng.random() < traffic.p_starve_change:
                config = replace(config, starve_limit=rng.choice(traffic.starve))
            if rng.random() < traffic.p_fcfs_toggle:
                config = replace(config, fcfs_bypass=1 - config.fcfs_bypass)
            if rng.random() < traffic.p_credit_change:
                config = replace(config, credits=random_credits(rng, traffic),
                                 bulk_prio=random_bulk_prio(rng, traffic))
                if traffic.arrival:
                    config = replace(config, arrival_prio=rng.choice([15, rng.randrange(16)]))
                if traffic.bulk_run:
                    config = replace(config, bulk_run=rng.choice([0, 1, 2, 7, 255]),
                                     bulk_prio=rng.choice([15, rng.randrange(1, 16)]))
            set_all(ctx, next_config_inputs(dut, config))
            await ctx.tick()
            model.config = config
            set_all(ctx, config_inputs(dut, config))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    print(stats)
    return stats


# Grant kinds each case must produce with its default seed (a coverage check:
# a case that stops exercising a path should be noticed, not pass silently).
EXPECT_KINDS = {"default": (0, 1), "fcfs_toggle": (0, 1, 2), "starvation": (0, 1, 3),
                "starvation_edge": (0, 3), "small_wrap": (0, 1),
                "credits": (0, 1, 3), "credits_fcfs": (0, 1, 2), "arrival": (0,)}
# Cases whose default seed must meet cycles in which arrival order decides the winner.
EXPECT_ARRIVAL = ("arrival",)
# Cases whose default seed must meet cycles in which the bulk run decides the winner.
EXPECT_RUN = ("bulk_run",)
# Cases whose default seed must select burst winners that take guaranteed credits.
EXPECT_LATENCY_BURST = ("arrival_burst",)
# Cases whose default seed must meet cycles in which some class lacks credit.
EXPECT_NO_CREDIT = ("credits", "credits_fcfs")
# Cases whose default seed must fill some queue to its depth D.
EXPECT_FULL = ("deep_queues", "full_queues")

CASES = {
    # name: (params, traffic, default seed)
    "default": (FabricParams(), Traffic(cycles=1500), 1),
    "fcfs_toggle": (FabricParams(), Traffic(cycles=1000, p_fcfs_toggle=0.01), 2),
    "starvation": (FabricParams(tenants=4), Traffic(cycles=1200, p_req=0.9, p_ready=0.9,
                                                    starve=(10, 40, 100)), 3),
    # Every head conforms and limits are near the queueing delay: heads cross
    # the urgency threshold all the time, so an off-by-one in the age (or in
    # its precomputation, spec §11) changes winners.
    "starvation_edge": (FabricParams(tenants=4),
                        Traffic(cycles=1200, p_req=0.8, p_ready=0.6, starve=(0, 1, 3, 8, 20, 60),
                                full_buckets=True, p_starve_change=0.02, p_commit=0.01), 7),
    "small_wrap": (FabricParams(tenants=3, queue_depth=2, max_request_bytes=256, id_width=4,
                                tag_bits=12),
                   Traffic(cycles=2000, p_req=0.8, p_ready=0.9, now_offset=(1 << 24) - 1000,
                           max_inv_weight=256, small_bytes=256), 16),
    # Narrow tags and weights far from the rates: tenants served by priority
    # while ineligible run ahead of V until the clamp to V + LAG_WINDOW
    # (spec §6.4, §6.5) acts; max_cost = 128 stays below LAG_WINDOW / 3.
    "tag_ceiling": (FabricParams(tenants=3, queue_depth=2, max_request_bytes=256, id_width=4,
                                 tag_bits=12),
                    Traffic(cycles=3000, p_req=0.9, p_ready=0.9, max_inv_weight=4096,
                            small_bytes=256, p_commit=0.002), 8),
    "one_tenant": (FabricParams(tenants=1, queue_depth=1, max_request_bytes=32, id_width=1),
                   Traffic(cycles=1500), 5),
    # Small CREDITS limits, redrawn now and then, with returns rarer than
    # grants: heads of every class (urgent included) wait for credit.
    "credits": (FabricParams(tenants=4),
                Traffic(cycles=1500, p_req=0.9, p_ready=0.8, starve=(10, 40, 100),
                        credits=(0, 1, 2, 3), p_return=0.15, p_credit_change=0.01), 9),
    # The same with fcfs toggling: credits are then neither checked nor counted.
    "credits_fcfs": (FabricParams(tenants=3),
                     Traffic(cycles=1200, p_req=0.9, p_ready=0.8, starve=(0, 30),
                             credits=(0, 1, 4), p_return=0.2, p_credit_change=0.01,
                             p_fcfs_toggle=0.01), 10),
    # Arrival-ordered priorities (spec §6.2), the mask redrawn now and then,
    # with priorities, credits and urgency in play: conforming heads (full
    # buckets, so that heads of one priority meet) of a marked priority order
    # by timestamp, the others by finish tag, in the same key registers.
    "arrival": (FabricParams(tenants=5),
                Traffic(cycles=1500, p_req=0.9, p_ready=0.6, starve=(0, 60, 200), credits=(0, 4, 8),
                        p_return=0.5, p_credit_change=0.01, p_commit=0.005, full_buckets=True,
                        arrival=True), 12),
    # Arrival-ordered priorities past their buckets (spec §6.6): buckets
    # that run dry, so heads of marked priorities compete as burst heads,
    # which take the guaranteed class's credits unless the priority is also
    # bulk; small limits and rare returns, so the class decides who competes.
    "arrival_burst": (FabricParams(tenants=4),
                      Traffic(cycles=1500, p_req=0.95, p_ready=0.8, starve=(0, 60), credits=(0, 1, 2, 3),
                              p_return=0.15, p_credit_change=0.01, p_commit=0.005, arrival=True), 13),
    # The bulk run (spec §6.2), its length and the bulk mask redrawn now and
    # then, with priorities, credits, urgency and arrival order in play: a
    # bulk tenant keeps the grant while its run is short and its head
    # competes, the other bulk tenants' non-urgent heads wait.
    "bulk_run": (FabricParams(tenants=5),
                 Traffic(cycles=1500, p_req=0.9, p_ready=0.7, starve=(0, 60, 200), credits=(0, 4, 8),
                         p_return=0.5, p_credit_change=0.01, p_commit=0.005, arrival=True,
                         bulk_run=True), 14),
    # The deepest queues the parameters allow (D = 64, spec §1): grants rarely
    # taken, so queues fill past the LUT-RAM ring's 16-entry cells and wrap.
    "deep_queues": (FabricParams(tenants=3, queue_depth=64, max_request_bytes=256, id_width=8,
                                 tag_bits=16),
                    Traffic(cycles=2500, p_req=0.95, p_ready=0.05, avoid_full=False,
                            small_bytes=256, max_inv_weight=256), 11),
    # T = 32: the half range is out of reach, so the full inv_weight range is safe.
    "full_queues": (FabricParams(tenants=16, queue_depth=8, tag_bits=32, id_width=32),
                    Traffic(cycles=800, p_req=0.95, p_ready=0.3, avoid_full=False,
                            max_inv_weight=0xFFFF), 6),
}


#: ``make soak`` runs every case this many times longer (its own seeds too, with
#: KVFABRIC_SEED). The suite's lengths are what the Amaranth simulator affords in
#: a 20-minute ``make test`` (8 tenants: about 26 ms a cycle); each still meets
#: its case's coverage checks below with its default seed.
SOAK_FACTOR = 4


@pytest.mark.parametrize("case", list(CASES))
def test_channel_matches_model(case):
    _check_case(case, CASES[case][1])


@pytest.mark.soak
@pytest.mark.parametrize("case", list(CASES))
def test_channel_matches_model_soak(case):
    """``make soak``: each case SOAK_FACTOR times as long, its wrap or
    ceiling reached as early as in the suite's run."""
    traffic = CASES[case][1]
    _check_case(case, replace(traffic, cycles=traffic.cycles * SOAK_FACTOR))


#: Cases the FPGA form of the channel (``ChannelArbiter(fpga=True)``: chained
#: sums, vmin as a tree) runs against the model as well: every state register
#: and every grant the same as the ASIC form's in every cycle.
FPGA_CASES = ("default", "starvation_edge", "small_wrap", "tag_ceiling", "credits_fcfs", "bulk_run", "full_queues")


@pytest.mark.parametrize("case", FPGA_CASES)
def test_channel_fpga_form_matches_model(case):
    _check_case(case, CASES[case][1], fpga=True)


def _check_case(case, traffic, fpga=False):
    params, _, seed = CASES[case]
    chosen = _seed(seed)
    stats = run_random(params, traffic, chosen, fpga=fpga)
    assert stats["grants"] > 0
    assert stats["accepted"] > 0
    if chosen == seed:
        for kind in EXPECT_KINDS.get(case, ()):
            assert stats["kinds"][kind] > 0, f"no grant of kind {kind}"
        if case in EXPECT_NO_CREDIT:
            assert stats["no_credit"] > 0, "no cycle without credit"
        if case in EXPECT_FULL:
            assert stats["max_occupancy"] == params.queue_depth, "no queue ever filled"
        if case in EXPECT_ARRIVAL:
            assert stats["arrival_decided"] > 0, "arrival order never decided a winner"
        if case in EXPECT_RUN:
            assert stats["run_decided"] > 0, "the bulk run never decided a winner"
        if case in EXPECT_LATENCY_BURST:
            assert stats["latency_burst"] > 0, "no burst winner took a guaranteed credit"
            assert stats["no_credit"] > 0, "no cycle without credit"


def test_latency_idle_channel():
    """Spec §4: accepted at a, selected at a+2, on the grant port (transferred) at a+3."""
    params = FabricParams()
    tenant = TenantConfig(rate=64, capacity=1 << 20, peak_rate=1 << 12, inv_weight=256,
                          priority=0, enable=1, slo_cycles=100)
    config = FabricConfig([tenant] * params.tenants)
    dut = ChannelArbiter(params, checks=True)
    seen = []

    async def testbench(ctx):
        set_all(ctx, config_inputs(dut, config))
        ctx.set(dut.grant.ready, 1)
        for cycle in range(400):  # fill the buckets
            ctx.set(dut.now, cycle)
            ctx.set(dut.now_next, cycle + 1)
            await ctx.tick()
        a = 400
        for cycle in range(a, a + 6):
            ctx.set(dut.now, cycle)
            ctx.set(dut.now_next, cycle + 1)
            ctx.set(dut.req.valid, cycle == a)
            ctx.set(dut.req.payload.tenant, 5)
            ctx.set(dut.req.payload.bytes, 4096)
            ctx.set(dut.req.payload.id, 0xBEEF)
            if cycle == a:
                assert ctx.get(dut.req.ready)
            if ctx.get(dut.grant.valid):
                seen.append((cycle, ctx.get(dut.grant.payload.tenant),
                             ctx.get(dut.grant.payload.id), ctx.get(dut.grant_ts)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert seen == [(403, 5, 0xBEEF, 400)]
