"""The bulk run (spec §6.2, ``CTRL.bulk_run``), checked from its definition on the
golden model: two backlogged bulk tenants are served in runs of exactly
``bulk_run`` grants where WF2Q+ alone alternates them; a tenant whose priority
is not bulk is never held out; an urgent head is never held out; FCFS mode
ignores the run; the run's count saturates."""

import random
from fractions import Fraction

import pytest

from kvfabric.spec import FabricParams
from kvfabric.model.channel import ChannelModel, Request
from kvfabric.model.harness import Backlogged, ClosedLoop
from kvfabric.model.registers import FabricConfig, TenantConfig

MAX16 = 0xFFFF
#: No guarantee (rate 0): every head is a burst head, ordered by WF2Q+ alone.
BURST_ONLY = dict(rate=0, capacity=0, peak_rate=MAX16, inv_weight=256, enable=1)
#: Buckets that always cover a head: every head conforms (guaranteed class).
ALWAYS = dict(rate=MAX16, capacity=(1 << 28) - 1, peak_rate=MAX16, inv_weight=256, enable=1)
P = FabricParams(tenants=4)
SIZE = 256


def _grant_order(config, cycles=2000, tenants=(0, 1), seed=1):
    """Tenants of the transferred grants, in order, with every tenant of
    ``tenants`` backlogged with SIZE-byte requests and the memory side taking
    64 B a cycle (a grant every 4 cycles, so the one-request-a-cycle ingress
    keeps every queue full)."""
    rng = random.Random(seed)
    sources = {t: Backlogged([SIZE], random.Random(rng.random())) for t in tenants}
    loop = ClosedLoop(P, config, sources, Fraction(64)).run(cycles)
    return [r.tenant for r in loop.served()]


def _runs(order):
    """Lengths of the maximal runs of equal tenants in ``order``, first and last dropped."""
    runs, n = [], 1
    for a, b in zip(order, order[1:]):
        if a == b:
            n += 1
        else:
            runs.append(n)
            n = 1
    return runs[1:]


def _config(tenants, bulk_run, bulk_prio=0b0100, **extra):
    while len(tenants) < P.tenants:
        tenants.append(TenantConfig())
    return FabricConfig(tenants, bulk_prio=bulk_prio, bulk_run=bulk_run, **extra)


@pytest.mark.parametrize("bulk_run", [2, 7, 64, 255])
def test_two_backlogged_bulk_tenants_take_turns_in_runs_of_bulk_run(bulk_run):
    """Equal weights, both bulk (priority 2 marked in bulk_prio): WF2Q+ alone
    alternates them grant by grant; with the run each keeps the grant for
    exactly ``bulk_run`` grants, and then the other's smaller finish tag
    wins and starts its own run."""
    tenants = [TenantConfig(**BURST_ONLY, priority=2) for _ in range(2)]
    plain = _runs(_grant_order(_config(list(tenants), 0)))
    assert plain and set(plain) == {1}, f"WF2Q+ alone did not alternate: {plain[:20]}"
    order = _grant_order(_config(list(tenants), bulk_run), cycles=4 * 2 * 6 * bulk_run + 400)
    runs = _runs(order)
    assert len(runs) >= 4 and set(runs[:-1]) == {bulk_run}, runs


def test_a_run_of_one_and_unmarked_priorities_change_nothing():
    """``bulk_run = 1`` (a run ends at its first grant) and a run among tenants
    whose priority is not bulk give WF2Q+'s order, grant for grant."""
    tenants = [TenantConfig(**BURST_ONLY, priority=2) for _ in range(2)]
    plain = _grant_order(_config(list(tenants), 0))
    assert _grant_order(_config(list(tenants), 1)) == plain
    assert _grant_order(_config(list(tenants), 255, bulk_prio=0b1011)) == plain


def test_a_tenant_that_is_not_bulk_is_never_held_out():
    """Tenants 0 and 1 bulk, tenant 2 at an unmarked priority, all burst heads
    of equal weight: while tenant 0 runs, tenant 1 is held out and tenant 2 is
    not: WF2Q+ alternates it with tenant 0 (never two bulk grants between two
    of its own). Held, tenant 1's start tag stays behind V (spec §6.4), so
    when the run ends WF2Q+ repays it the service it missed, and over the
    whole run the unmarked tenant has its third (spec §7's catch-up note)."""
    tenants = [TenantConfig(**BURST_ONLY, priority=2), TenantConfig(**BURST_ONLY, priority=2),
               TenantConfig(**BURST_ONLY, priority=3)]
    order = _grant_order(_config(tenants, 255), cycles=8000, tenants=(0, 1, 2))
    first_of_1 = order.index(1)
    assert first_of_1 > 300, "tenant 1 was not held out"
    mine = [k for k, t in enumerate(order[:first_of_1]) if t == 2]
    assert max(b - a - 1 for a, b in zip(mine, mine[1:])) <= 2
    assert 0.45 < len(mine) / first_of_1 < 0.55
    # The unmarked tenant keeps its third of the grants; the bulk tenants
    # share the rest in runs (whichever run is under way when the test ends).
    counts = [order.count(x) for x in range(3)]
    assert abs(counts[2] / len(order) - 1 / 3) < 0.05, counts
    assert min(counts[:2]) > 255, counts


def test_an_urgent_head_is_not_held_out():
    """Both bulk tenants conform (full buckets) and the starvation guard is
    at 40 cycles: a head of the tenant the run holds out turns urgent (class
    0) and wins, so no head waits from becoming a head to its selection
    much beyond 40 cycles (a grant every 4 cycles: one in service, one
    registered), where a run of 255 grants would hold it for about 1,000."""
    tenants = [TenantConfig(**ALWAYS, priority=2) for _ in range(2)]
    rng = random.Random(3)
    sources = {t: Backlogged([SIZE], random.Random(rng.random())) for t in (0, 1)}
    cfg = _config(tenants, 255, starve_limit=40)
    loop = ClosedLoop(P, cfg, sources, Fraction(64)).run(4000)
    waits = [r.selected - r.head for r in loop.records if r.selected is not None and r.head is not None]
    assert len(waits) > 500 and max(waits) <= 40 + 3 * 4, max(waits)
    # The same without the guard: the run holds heads for its length.
    loop = ClosedLoop(P, _config(list(tenants), 255), {t: Backlogged([SIZE], random.Random(t)) for t in (0, 1)},
                      Fraction(64)).run(4000)
    assert max(r.selected - r.head for r in loop.records if r.selected is not None and r.head is not None) > 500


def test_fcfs_mode_ignores_the_run():
    """FCFS bypass: the oldest head wins whatever the run (spec §6.2)."""
    tenants = [TenantConfig(**BURST_ONLY, priority=2) for _ in range(2)]
    assert (_grant_order(_config(list(tenants), 255, fcfs_bypass=1))
            == _grant_order(_config(list(tenants), 0, fcfs_bypass=1)))


def test_the_run_count_saturates_and_other_grants_leave_the_run_alone():
    """One bulk tenant granted 300 times in a row: its count stops at 255
    (8 bits) and it stays the run tenant; grants to a tenant that is not
    bulk neither end nor count the run."""
    cfg = _config([TenantConfig(**BURST_ONLY, priority=2), TenantConfig(**BURST_ONLY, priority=1)], 255)
    ch = ChannelModel(P, cfg)
    for t in range(2000):
        req = Request(0 if t < 1500 or t % 2 else 1, 64, t & 0xFFFF)
        ch.step(t, req, True)
    assert (ch.run_tenant, ch.run_count) == (0, 255)
