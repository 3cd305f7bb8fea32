"""The KV tier model's rules (issue #44), each against a figure worked out by hand.

Page accounting, promotion timing from the slow tier's bandwidth and latency,
each eviction policy's choice on a hand-built state where its definition names
the victim, the workloads' copy of the Azure trace and the drawn mixes.
"""

import math

import pytest

from kvfabric.sim.tiering import Request, TierConfig, make_policy, simulate
from kvfabric.sim.tiering import metrics as M
from kvfabric.sim.tiering import workloads as W
from kvfabric.sim.tiering.engine import _Engine
from kvfabric.sim.tiering.policies import (LRU, Footprint, GrowingQuota, ReadBudget, RequestQuota, SloBudget,
                                           StalledFirst, TenantQuota, View)

# Small numbers that divide evenly: 16-token pages of 1 KiB per token = 16 KiB pages;
# the fast tier reads 16 B/ns (1024 ns a page), the slow tier moves 8 B/ns (2048 ns a
# page) after 500 ns of set-up; a step's fixed cost is 1000 ns.
SMALL = dict(page_tokens=16, kv_bytes_per_token=1024, hbm_bytes_per_ns=16, slow_bytes_per_ns=8,
             slow_latency_ns=500, step_fixed_ns=1000)


def cfg(**kw):
    return TierConfig(**{**SMALL, **kw})


# -- configuration ---------------------------------------------------------------

@pytest.mark.parametrize("field,value,message", [
    ("page_tokens", 0, "TierConfig.page_tokens must be a positive integer, not 0"),
    ("hbm_pages", 2.5, "TierConfig.hbm_pages must be a positive integer, not 2.5"),
    ("step_fixed_ns", -1, "TierConfig.step_fixed_ns must be a non-negative integer, not -1"),
    ("page_budget", 5, "TierConfig.page_budget must be an integer >= hbm_pages (8) or None, not 5"),
    ("read_cap_pages", 0, "TierConfig.read_cap_pages must be a positive integer or None, not 0"),
])
def test_init_wrong_field(field, value, message):
    with pytest.raises(ValueError) as e:
        TierConfig(**{"hbm_pages": 8, field: value})
    assert str(e.value) == message


def test_page_arithmetic():
    c = cfg()
    assert c.page_bytes == 16 * 1024
    assert [c.pages_for(t) for t in (1, 16, 17, 32, 33)] == [1, 1, 2, 2, 3]
    assert c.read_ns(3) == 3 * 1024
    assert c.promote_ns(0) == 0
    assert c.promote_ns(3) == 500 + 3 * 2048
    # The essay's ratio: 128 K tokens over 2 K tokens in 32-token pages is 4096 / 64.
    c32 = TierConfig(page_tokens=32)
    assert c32.pages_for(131_072) == 4096 and c32.pages_for(2048) == 64


# -- page accounting and step timing -------------------------------------------------

def test_pages_grow_with_tokens_and_are_freed():
    # Prompt 30: admission holds 31 tokens (2 pages); before the step that makes
    # token t the context is 30 + t - 1 ... the KV of 30 + t tokens: 31, 32 -> 2 pages,
    # 33, 34 -> 3 pages. Five tokens: the last step runs with 34 tokens' KV.
    r = Request(0, 0, prompt=30, generated=5)
    e = _Engine(cfg(hbm_pages=100), make_policy("lru"), [r], 0)
    e.run()
    assert r.pages == 3 and r.resident == 3
    assert e.used == 0 and r.finished_ns == e.now
    # Steps read 2, 2, 3, 3 pages: 1000 + 1024 x pages each.
    assert [g[0] for g in r.gaps] == [3048, 3048, 4072, 4072]
    assert r.tokens == 5 and len(r.gaps) == 4


def test_step_reads_every_page_of_the_batch():
    a = Request(0, 0, prompt=16, generated=2)   # 17 tokens: 2 pages
    b = Request(1, 0, prompt=48, generated=2)   # 49 tokens: 4 pages
    res = simulate([a, b], cfg(hbm_pages=100), make_policy("lru"))
    # One step with both: 1000 + 6 x 1024.
    assert res.steps == [(0, 0, 7144, 2, 0)]
    assert a.gaps == b.gaps == [(7144, 0, 0, 7144, 1)]


def test_eviction_sits_out_then_promotes():
    # Three fast pages. A (2 pages) is admitted, then B (2 pages) takes one of A's:
    # A sits out while B runs its two steps, then its page is promoted (500 + 2048 ns)
    # at the start of the step after B leaves.
    a = Request(0, 0, prompt=16, generated=3, tenant="x")
    b = Request(1, 0, prompt=16, generated=3, tenant="y")
    c = cfg(hbm_pages=3, page_budget=6)
    res = simulate([a, b], c, make_policy("lru"))
    step = 1000 + 2 * 1024
    promo = 500 + 2048
    assert (a.evictions, a.evicted_pages, a.promoted_pages) == (1, 1, 1)
    assert b.evictions == 0
    assert b.gaps == [(step, 0, 0, step, 1)] * 2
    assert a.gaps == [(2 * step + promo + step, 2 * step, promo, step, 1), (step, 0, 0, step, 1)]
    assert res.end_ns == 3 * step + promo + step
    assert res.demotions == [(0, "x", 16 * 1024)]
    assert res.promotions == [(2 * step, "x", 16 * 1024)]
    stream = M.byte_stream(res, 4096)
    assert stream["x"]["demote"][0] == 16 * 1024 and sum(stream["x"]["demote"]) == 16 * 1024
    assert stream["x"]["promote"][2 * step // 4096] == 16 * 1024
    causes = M.tail_causes(res, whale=False, q=75)
    # The slowest quarter of the four gaps is A's first: it sat out two steps (6096 ns,
    # more than its step's 2548 ns promotion wait or 2048 ns of KV reads).
    assert causes["gaps"] == 1 and causes["count"] == {"eviction": 1, "promotion": 0, "batch": 0}
    assert causes["mean_ns"] == {"eviction": 6096, "promotion": 2548, "batch": 2048, "weights": 1000}
    assert causes["threshold_ns"] == step


def test_read_meter_splits_a_long_request_over_steps():
    # A 5-page request with a 2-page meter needs 3 steps a token (2 + 2 + 1 pages).
    r = Request(0, 0, prompt=70, generated=2)  # 71 tokens: 5 pages
    simulate([r], cfg(hbm_pages=100, read_cap_pages=2), make_policy("lru"))
    assert r.gaps == [((1000 + 2048) * 2 + 1000 + 1024, 0, 0, (1000 + 2048) * 2 + 1000 + 1024, 3)]


def test_request_larger_than_the_fast_tier_is_rejected():
    big = Request(0, 0, prompt=100, generated=10)   # 110 tokens: 7 pages
    small = Request(1, 0, prompt=10, generated=2)
    simulate([big, small], cfg(hbm_pages=6), make_policy("lru"))
    assert big.rejected and not small.rejected and small.tokens == 2


# -- each policy's choice ------------------------------------------------------------

def req(rid, pages, resident, last_run, tenant="t", seq=None):
    r = Request(rid, 0, prompt=pages * 16, generated=10, tenant=tenant)
    r.pages, r.resident, r.last_run, r.seq = pages, resident, last_run, rid if seq is None else seq
    return r


def view(running, hbm=100, step=10):
    return View(step, hbm, tuple(running))


def test_lru_takes_the_least_recently_run_shorter_first():
    old_small, old_big, recent = req(0, 50, 50, 3), req(1, 100, 100, 3), req(2, 10, 10, 5)
    rs = [recent, old_big, old_small]
    assert LRU().victim(rs, view(rs)) == (old_small, 50)
    # Never the whale while a request read before it has pages in the fast tier.
    assert LRU().victim([recent, old_big], view(rs)) == (old_big, 100)


def test_footprint_takes_the_largest_owner_even_if_recent():
    stale_small, whale = req(0, 10, 10, 1), req(1, 400, 100, 9)
    rs = [stale_small, whale]
    assert Footprint().victim(rs, view(rs)) == (whale, 100)


def test_request_quota_takes_the_most_over_quota_down_to_it():
    a, b, c = req(0, 40, 30, 9), req(1, 40, 25, 1), req(2, 10, 10, 0)
    rs = [a, b, c]
    assert RequestQuota(pages=20).victim(rs, view(rs)) == (a, 10)
    # Nobody over 40: LRU (c ran least recently).
    assert RequestQuota(pages=40).victim(rs, view(rs)) == (c, 10)
    # The default quota is one batch slot's share: 100 pages over 4 slots = 25.
    assert RequestQuota(max_batch=4).victim(rs, view(rs)) == (a, 5)


def test_growing_quota_is_a_share_proportional_to_length():
    a, b = req(0, 60, 40, 9), req(1, 40, 10, 1)
    rs = [a, b]
    # 50 fast pages: quotas 50 x 60/100 = 30 and 20; a is 10 over.
    assert GrowingQuota().victim(rs, view(rs, hbm=50)) == (a, 10)
    # 100 fast pages: quotas 60 and 40, nobody over: LRU takes b.
    assert GrowingQuota().victim(rs, view(rs, hbm=100)) == (b, 10)


def test_tenant_quota_takes_from_the_tenant_most_over():
    a1, a2, b1 = req(0, 25, 25, 5, "a"), req(1, 15, 15, 2, "a"), req(2, 50, 50, 0, "b")
    rs = [a1, a2, b1]
    # Tenant a holds 40 against 30: 10 over; b holds 50 against 70. a's least recent is a2.
    assert TenantQuota({"a": 30, "b": 70}).victim(rs, view(rs)) == (a2, 10)
    # Equal split of 100 over two tenants: 50 each; nobody over: LRU takes b1.
    assert TenantQuota().victim(rs, view(rs)) == (b1, 50)


def test_stalled_first_then_unprotected_largest_then_protected():
    stalled = req(0, 30, 5, 2)          # missing pages: sitting out
    whale = req(1, 200, 200, 9)
    minnow = req(2, 8, 8, 1)
    p = StalledFirst(protect_pages=10)
    assert p.victim([stalled, whale, minnow], view([stalled, whale, minnow])) == (stalled, 5)
    assert p.victim([whale, minnow], view([stalled, whale, minnow])) == (whale, 200)
    mid = req(3, 20, 20, 9)
    # Unprotected (20 > 10) before protected even when the protected one is older.
    assert p.victim([minnow, mid], view([minnow, mid])) == (mid, 20)
    assert p.victim([minnow], view([minnow])) == (minnow, 8)


def test_make_policy_rejects_unknown_names():
    with pytest.raises(ValueError, match="Unknown eviction policy 'mru'"):
        make_policy("mru")


def test_lru_evicts_minnow_footprint_evicts_whale():
    # A whale (4 pages, 49 to 53 tokens) and a minnow (2 pages, 21 to 25 tokens) fill
    # 6 fast pages and never grow; a newcomer of 2 pages arrives after one step. LRU
    # takes the minnow's pages (its reads ended first), footprint the whale's.
    def run(policy):
        whale = Request(0, 0, prompt=48, generated=6, whale=True)   # 49 tokens: 4 pages
        minnow = Request(1, 0, prompt=20, generated=6)               # 21 tokens: 2 pages
        late = Request(2, 1, prompt=20, generated=2)
        simulate([whale, minnow, late], cfg(hbm_pages=6, page_budget=12), make_policy(policy))
        return whale.evicted_pages, minnow.evicted_pages
    assert run("lru") == (0, 2)
    assert run("footprint") == (2, 0)


# -- workloads -----------------------------------------------------------------------

def test_azure_copy_is_the_whole_hour():
    reqs = W.azure_2023()
    conv = W.azure_2023(services=("conv",))
    # 19,366 + 8,819 rows upstream (README); rows with no output token are left out.
    assert len(conv) <= 19_366 and len(reqs) <= 19_366 + 8_819 and len(reqs) > 28_000
    assert {r.tenant for r in reqs} == {"conv", "code"}
    assert reqs[0].arrival_ns == 0 and all(a.arrival_ns <= b.arrival_ns for a, b in zip(reqs, reqs[1:]))
    assert reqs[-1].arrival_ns < 3600e9
    assert sum(r.whale for r in reqs) == math.ceil(len(reqs) * 0.05)
    shortest_whale = min(r.prompt + r.generated for r in reqs if r.whale)
    assert all(r.prompt + r.generated <= shortest_whale for r in reqs if not r.whale)


def test_whale_minnow_draws_within_ranges_and_repeat():
    a, da = W.whale_minnow(7, duration_s=60)
    b, db = W.whale_minnow(7, duration_s=60)
    assert [(r.arrival_ns, r.prompt, r.generated) for r in a] == [(r.arrival_ns, r.prompt, r.generated) for r in b]
    assert da == db and da["requests"] == len(a)
    for r in a:
        kind = "whale" if r.whale else "minnow"
        lo, hi = W.RANGES[f"{kind}_prompt"]
        assert lo <= r.prompt <= hi and r.tenant == kind + "s"
        lo, hi = W.RANGES[f"{kind}_output"]
        assert lo <= r.generated <= hi
        assert 0 <= r.arrival_ns < 60e9
    assert [r.rid for r in W.without_whales(a)] == [r.rid for r in a if not r.whale]


def test_percentile_is_nearest_rank():
    assert M.pct([5, 1, 4, 2, 3], 50) == 3
    assert M.pct(list(range(1, 101)), 99) == 99
    assert math.isnan(M.pct([], 99))


# -- the per-step KV-read budget (ReadBudget) ------------------------------------------

def running(rid, pages, read=0, last_token_ns=0, steps=0, seq=None):
    """A running request with ``pages`` pages, ``read`` of them read for its token so far."""
    r = req(rid, pages, pages, 0, seq=seq)
    r.acc = [0, 0, 0, steps, read]
    r.last_token_ns = last_token_ns
    return r


def test_read_budget_short_in_full_long_take_turns_at_the_room():
    s1, s2 = running(0, 3), running(1, 4)
    newer, older = running(2, 10, last_token_ns=100), running(3, 8, last_token_ns=50)
    p = ReadBudget(budget_pages=20, chunk_pages=5)
    # Short (<= 5 left): 3 + 4 in full; room 20 - 7 = 13: the older token's long one
    # first takes its 8, the other the 5 left.
    assert p.reads([s1, s2, newer, older], cfg()) == {s1: 3, s2: 4, older: 8, newer: 5}
    # What is left of a token, not its pages, decides: 12 pages with 9 read is short
    # (reads all 3), so the long one is the first long: the 2 left of a budget of 5, at least its chunk of 5.
    part, long_one = running(4, 12, read=9, last_token_ns=2), running(5, 30, last_token_ns=1)
    assert ReadBudget(budget_pages=5, chunk_pages=5).reads([part, long_one], cfg()) == {part: 3, long_one: 5}


def test_read_budget_over_budget_first_long_gets_a_chunk_others_wait():
    shorts = [running(k, 5) for k in range(5)]          # 25 pages read, budget 20
    a, b = running(5, 30, last_token_ns=1), running(6, 30, last_token_ns=2)
    got = ReadBudget(budget_pages=20, chunk_pages=5).reads([*shorts, a, b], cfg())
    assert [got[s] for s in shorts] == [5] * 5
    assert (got[a], got[b]) == (5, 0)
    # Equal last tokens: admission order.
    c, d = running(7, 30, seq=9), running(8, 30, seq=3)
    got = ReadBudget(budget_pages=5, chunk_pages=5).reads([c, d], cfg())
    assert (got[d], got[c]) == (5, 0)


def test_read_budget_spread_floor_finishes_a_token_within_n_steps():
    p = ReadBudget(budget_pages=2, chunk_pages=2, spread_steps=3)
    fresh_token = running(0, 10)                         # ceil(10 / 3) = 4
    one_in = running(1, 10, read=4, steps=1)             # 6 left over 2 steps: 3
    last = running(2, 10, read=7, steps=2)               # 3 left, the last step: all 3
    late = running(3, 10, read=7, steps=5)               # past n steps: all that is left
    got = p.reads([fresh_token, one_in, last, late], cfg())
    assert got == {fresh_token: 4, one_in: 3, last: 3, late: 3}


def test_read_budget_gate_admits_short_within_budget_long_by_pages():
    p = ReadBudget(budget_pages=10, chunk_pages=5)
    run = [running(0, 4), running(1, 3), running(2, 50)]
    newcomer = Request(9, 0, prompt=16, generated=2)
    assert p.admits(newcomer, 3, run, cfg())            # 4 + 3 + 3 = 10
    assert not p.admits(newcomer, 4, run, cfg())        # 11 > 10
    assert p.admits(newcomer, 6, run, cfg())            # long (6 > 5): pages only
    assert ReadBudget(budget_pages=10, chunk_pages=5, gate=False).admits(newcomer, 4, run, cfg())


def test_read_budget_keeps_its_eviction_policy():
    stale_small, whale = req(0, 10, 10, 1), req(1, 400, 100, 9)
    rs = [stale_small, whale]
    assert ReadBudget(100, chunk_pages=8, evict=Footprint()).victim(rs, view(rs)) == (whale, 100)
    assert ReadBudget(100, chunk_pages=8).victim(rs, view(rs)) == (stale_small, 10)
    p = make_policy("lru", read_budget_pages=64, chunk_pages=16, spread_steps=2)
    assert isinstance(p, ReadBudget) and p.name == "lru+budget" and p.spread_steps == 2
    with pytest.raises(ValueError, match="ReadBudget.budget_pages must be a positive integer"):
        ReadBudget(0)
    with pytest.raises(ValueError, match="ReadBudget.spread_steps must be a positive integer or None, not 0"):
        ReadBudget(8, chunk_pages=4, spread_steps=0)
    with pytest.raises(ValueError, match=r"ReadBudget.chunk_pages \(9\) must be at most budget_pages \(8\)"):
        ReadBudget(8, chunk_pages=9)


def test_read_budget_step_timing_in_the_engine():
    # Budget 3 pages, chunk 2. s: 1 page, 3 tokens. L: 71 tokens, 5 pages, 2 tokens.
    # Step 0: s 1, L min(5, room 2) = 2 (4072 ns); step 1 the same (L has 3 left, long);
    # s is done. Step 2: L has 1 left (short): 1 page, 2024 ns; its token after 3 steps.
    s = Request(0, 0, prompt=10, generated=3)
    L = Request(1, 0, prompt=70, generated=2)
    res = simulate([s, L], cfg(hbm_pages=100), ReadBudget(budget_pages=3, chunk_pages=2))
    step2 = 1000 + 3 * 1024
    assert s.gaps == [(step2, 0, 0, step2, 1)] * 2
    assert L.gaps == [(2 * step2 + 2024, 0, 0, 2 * step2 + 2024, 3)]
    assert [st[2] for st in res.steps] == [step2, step2, 2024]
    # Spread over 2 steps, no room (budget 1, chunk 1): ceil(5 / 2) = 3, then 2.
    L = Request(1, 0, prompt=70, generated=2)
    simulate([L], cfg(hbm_pages=100), ReadBudget(budget_pages=1, chunk_pages=1, spread_steps=2))
    assert L.gaps == [(4072 + 3048, 0, 0, 4072 + 3048, 2)]


def test_read_budget_gate_delays_admission_in_the_engine():
    # Budget 2 pages: of three 1-page requests arriving together two join; the third
    # joins when they leave, after their one step of 1000 + 2 x 1024 ns.
    def run(policy):
        rs = [Request(k, 0, prompt=10, generated=2) for k in range(3)]
        simulate(rs, cfg(hbm_pages=100), policy)
        return [r.admitted_ns for r in rs]
    assert run(ReadBudget(budget_pages=2, chunk_pages=2)) == [0, 0, 3048]
    assert run(make_policy("lru")) == [0, 0, 0]
    assert run(ReadBudget(budget_pages=2, chunk_pages=2, gate=False)) == [0, 0, 0]


def test_read_budget_above_the_fast_tier_changes_nothing():
    # Resident pages never exceed the fast tier, so a budget above it always has room for
    # every long request's reads, and the page budget admits first: the run is LRU's, step
    # for step (a 20-page request is long against a 4-page chunk).
    def run(policy):
        rs = [Request(0, 0, prompt=300, generated=20, whale=True)] + [
            Request(k, 1000 * k, prompt=40 + 7 * k, generated=12) for k in range(1, 9)]
        res = simulate(rs, cfg(hbm_pages=40), policy)
        return res.steps, [(r.gaps, r.admitted_ns, r.evicted_pages) for r in rs]
    assert run(ReadBudget(budget_pages=41, chunk_pages=4, spread_steps=2)) == run(make_policy("lru"))
    # At a budget under the fast tier the long request's tokens take several steps.
    steps, per = run(ReadBudget(budget_pages=8, chunk_pages=4))
    assert max(g[4] for g in per[0][0]) > 1


# -- make tiering's bookkeeping ----------------------------------------------------------

def _row(policy, minnow, whale, tokens, workload="mix-0", pages=10):
    meets = {"minnow": minnow <= 1.2, "tokens": tokens >= 0.95, "whale": whale <= 1.5}
    return {"workload": workload, "pages": pages, "policy": policy, "minnow_p99_ratio": minnow,
            "whale_p99_ratio": whale, "tps_ratio": tokens, "meets": meets, "meets_all": all(meets.values())}


def test_wall_is_the_closest_each_side_gets_where_none_meets_all():
    from kvfabric.sim.studies.tiering import wall
    rows = [_row("a", 1.4, 1.1, 1.0), _row("b", 1.3, 1.4, 1.0), _row("c", 1.1, 2.0, 1.0),
            _row("d", 1.0, 1.0, 0.9), _row("e", 1.15, 3.0, 1.0),
            _row("ok", 1.0, 1.0, 1.0, workload="mix-1")]
    # b is the lowest minnow ratio with whale and tokens met (d misses tokens); c the lowest
    # whale ratio with minnow and tokens met; mix-1 has a policy meeting all, so no wall.
    assert wall(rows) == {"mix-0@10": {"minnow": {"policy": "b", "minnow": 1.3, "whale": 1.4},
                                      "whale": {"policy": "c", "minnow": 1.1, "whale": 2.0}}}


def test_reuse_takes_only_runs_of_policies_defined_as_here(tmp_path):
    import argparse
    import json

    from kvfabric.sim.studies.tiering import POLICIES, _reusable
    lru, admit = (list(p) for p in POLICIES[:1] + POLICIES[6:7])
    assert lru[0] == "lru" and admit[0] == "lru+admit"
    changed = ["footprint", "footprint", None, 9.0, None]
    old_rows = [{"workload": "mix-0", "pages": 10, "policy": p, "whales": w} for p in ("lru", "footprint", "lru+admit")
                for w in (True, False)]
    path = tmp_path / "old.json"
    # An old report: 4-field policy entries (no ReadBudget field), runs without a revision.
    path.write_text(json.dumps({"seed": 44, "quick": False, "draws": [{}, {}, {}], "revision": "abc1234",
                                "command": "x", "policies": [lru[:4], changed[:4], admit[:4]], "raw": old_rows}))
    specs = [("mix-0", 10, p, w) for p in ("lru", "footprint", "lru+admit") for w in (True, False)]
    args = argparse.Namespace(seed=44, quick=False, draws=3)
    kept, info = _reusable(path, specs, args, rerun={"lru+admit"})
    assert sorted(kept) == [("mix-0", 10, "lru", False), ("mix-0", 10, "lru", True)]
    assert info["runs"] == 2 and info["runs_by_revision"] == {"abc1234": 2} and info["policies"] == ["lru"]
    with pytest.raises(SystemExit, match="seed 44"):
        _reusable(path, specs, argparse.Namespace(seed=45, quick=False, draws=3))


# -- the SLO budget (SloBudget) and the feasibility bound -------------------------------------

def test_tail_estimate_is_a_weighted_nearest_rank_percentile():
    from kvfabric.sim.tiering.policies import TailEstimate
    t = TailEstimate(q=99, shift=0, every=1)
    t.add(10, 99)
    t.add(20, 1)
    # 100 samples: the 99th smallest is a 10.
    assert t.value == 10 and t.total == 100
    t.add(20, 1)
    # 101 samples: rank ceil(99.99) = 100, a 20.
    assert t.value == 20
    # Bins of 2 ** 3 ns: a sample of 17 ns is reported as its bin's largest, 23.
    b = TailEstimate(q=50, shift=3, every=1)
    b.add(17)
    assert b.value == 23
    # Recomputed every 4th add only (and on the first).
    c = TailEstimate(q=50, shift=0, every=4)
    for x in (5, 100, 100):
        c.add(x)
    assert c.value == 5
    c.add(100)
    assert c.value == 100


def slo(**kw):
    # P = 8000 ns, margin 0: the minnows' bound on a step and the cap are 1.2 x 8000 = 9600 ns;
    # L = 20000 ns: a long token's deadline is 1.5 x 20000 = 30000 ns. Chunk 4 pages.
    from kvfabric.sim.tiering.policies import SloBudget
    return SloBudget(margin=0, chunk_pages=4, short_ref_ns=8000, long_ref_ns=20_000, **kw)


def test_slo_budget_room_then_deadline_floor():
    # Short: 2 pages, t_short = 1000 + 2 x 1024 = 3048 ns; room = floor((9600 - 3048) / 1024) = 6 pages.
    # A (10 pages, the older token, nothing waited): k = floor(30000 / 9600) = 3 steps, floor
    # ceil(10 / 3) = 4 < room: it reads the room, 6. B (8 pages, 12000 ns waited since its last
    # token): k = floor(18000 / 9600) = 1, so its floor is all 8, past the room; the minnows'
    # slack is not spent (spent 0 of 10000 gaps), so B reads its 8 and the step runs long.
    s = running(0, 2)
    a = running(1, 10, last_token_ns=0)
    b = running(2, 8, last_token_ns=5)
    b.acc = [0, 0, 12_000, 1, 0]
    p = slo()
    p.spent = [10_000, 0, 0, 0]
    assert p.reads([s, a, b], cfg()) == {s: 2, a: 6, b: 8}
    # The step: 1000 + 16 x 1024 = 17384 ns > 9600: its 1 short gap is over; B's token is
    # done (12000 + 17384 = 29384 <= 30000: on time).
    assert p.spent == [10_001, 1, 1, 0]
    assert p.cap_ns == 9600


def test_slo_budget_late_token_when_the_minnows_slack_is_spent():
    from kvfabric.sim.tiering.policies import SloBudget

    def state(waited, pages, spent, margin=0):
        s, a, b = running(0, 2), running(1, 10, last_token_ns=0), running(2, pages, last_token_ns=5)
        b.acc = [0, 0, waited, 1, 0]
        p = SloBudget(margin=margin, chunk_pages=4, short_ref_ns=8000, long_ref_ns=20_000)
        p.spent = list(spent)
        return p.reads([s, a, b], cfg())[b]
    # No slack spent-able for the minnows (1 gap of 1 over the 0.5 % allowed). A takes the
    # room (6 pages: the step is 1000 + 8 x 1024 = 9192 ns, 408 ns below the 9600 bound, less
    # than a page). B (8 pages, 12000 ns waited) would make it 17384 ns, 1.81x the bound;
    # late it could read nothing within the bound, so it would not finish at that rate: with
    # the whales' slack spent too (1 late of 1), the smaller miss is the step's, and B keeps
    # its floor, all 8.
    assert state(12_000, 8, [0, 0, 0, 0]) == 8
    # The whales' slack not spent (0 late of 1000 tokens): late whatever the misses, reading
    # nothing this step.
    assert state(40_000, 6, [0, 0, 1000, 0]) == 0
    # Both spent, B (6 pages) 40000 ns in: reading its 6 the step is 1000 + 14 x 1024 =
    # 15336 ns, 1.60x the bound, against a token that would not finish: B reads all 6.
    assert state(40_000, 6, [0, 0, 0, 0]) == 6
    # Margin 0.2: the cap is 0.8 x 9600 = 7680 ns, the room floor((7680 - 3048) / 1024) = 4
    # pages, which A (floor ceil(10 / 3) = 4) takes. B (8 pages, 12000 ns in) has a floor of
    # ceil(8 / floor(18000 / 7680)) = 4, a step of 1000 + 10 x 1024 = 11240 ns past the 9600
    # bound. Late, it reads up to a chunk within the bound: floor((9600 - 1000 - 6 x 1024) /
    # 1024) = 2 pages (9192 ns), not the whole chunk of 4 (11240 ns, as far past the bound as
    # its floor).
    assert state(12_000, 8, [0, 0, 1000, 0], margin=0.2) == 2


def test_slo_budget_references_and_gate():
    from kvfabric.sim.tiering.policies import SloBudget
    p = SloBudget(margin=0.25, chunk_pages=4, warmup=3)
    # Before 3 samples: this step's own t_short and t_full: bound 1.2 x 5000, cap 0.75 of it,
    # deadline 1.5 x 7000.
    assert p.limits(5000, 7000) == (6000, 4500, 10_500)
    assert p.gate_pages(cfg()) == math.inf  # no step yet: no gate
    for x in (4000, 8000, 8000):
        p.short_tail.add(x, 1)
    p.short_tail.value = p.short_tail.percentile()
    # 3 samples: p99 is the third, 8000 ns as its 8192 ns bin's largest, 8191.
    target, cap, deadline = p.limits(5000, 7000)
    assert target == 1.2 * 8191 and cap == 0.75 * 1.2 * 8191 and deadline == 10_500
    # The gate: the running short requests' pages plus the newcomer's within what the cap
    # reads after the weights: floor((7371.9 - 1000) / 1024) = 6 pages.
    p.cap_ns, p.deadline_ns = cap, deadline
    assert p.gate_pages(cfg()) == 6
    run = [running(0, 3), running(1, 2)]
    newcomer = Request(9, 0, prompt=16, generated=2)
    assert p.admits(newcomer, 1, run, cfg()) and not p.admits(newcomer, 2, run, cfg())
    # A long one running (50 pages; k = max(1, floor(10500 / 7371.9)) = 1) keeps all 50: none joins.
    assert not p.admits(newcomer, 1, [*run, running(2, 50)], cfg())
    p.cap_ns = 2000  # never below one short request: a chunk, 4 pages
    assert p.gate_pages(cfg()) == 4
    with pytest.raises(ValueError, match="SloBudget.minnow_target must be a number above 1"):
        SloBudget(minnow_target=1)
    q = make_policy("lru", slo={"margin": 0.1})
    assert q.name == "lru+slo" and q.margin == 0.1 and isinstance(q, SloBudget)


def test_slo_budget_gate_keeps_the_long_requests_share():
    # slo(): cap 9600 ns, deadline 30000 ns, so a long token may take k = floor(30000 / 9600) = 3
    # steps; the gate reads floor((9600 - 1000) / 1024) = 8 pages after the weights.
    p = slo()
    short = running(0, 2)
    p.reads([short], cfg())                              # sets the cap and the deadline
    assert (p.cap_ns, p.deadline_ns) == (9600, 30_000) and p.gate_pages(cfg()) == 8
    newcomer = Request(9, 0, prompt=16, generated=2)
    # Short ones alone: 2 running + 3 = 5 <= 8.
    assert p.admits(newcomer, 3, [short], cfg())
    # A long one of 10 pages keeps ceil(10 / 3) = 4 of them: 2 + 4 + 2 = 8 joins, 2 + 4 + 3 = 9 waits.
    whale = running(1, 10)
    assert p.admits(newcomer, 2, [short, whale], cfg())
    assert not p.admits(newcomer, 3, [short, whale], cfg())
    # A long one of 30 pages keeps 10, more than the 8: no short one joins while it runs.
    assert not p.admits(newcomer, 1, [running(2, 30)], cfg())
    # Without the gate every one joins.
    assert slo(gate=False).admits(newcomer, 3, [short, whale], cfg())
    assert slo(gate=False).admits(newcomer, 30, [short, running(2, 30)], cfg())
    # A deadline shorter than two caps: k = 1, the long one keeps all its pages (2 + 10 > 8).
    q = SloBudget(margin=0, chunk_pages=4, short_ref_ns=8000, long_ref_ns=10_000)   # deadline 15000
    q.reads([short], cfg())
    assert not q.admits(newcomer, 1, [short, running(1, 7)], cfg())  # 2 + 7 + 1 = 10 > 8
    assert q.admits(newcomer, 1, [short, running(1, 5)], cfg())      # 2 + 5 + 1 = 8
    # A long newcomer (more than 4 pages) counts its own share: 10 pages keep ceil(10 / 3) = 4,
    # 2 + 4 = 6 <= 8 joins; 20 keep 7, 2 + 7 = 9 waits; beside the 10-page one (4) a 5-page one
    # keeps 2: 2 + 4 + 2 = 8 joins, a 7-page one 3: 9 waits.  With nothing running any joins.
    assert p.admits(newcomer, 10, [short], cfg())
    assert not p.admits(newcomer, 20, [short], cfg())
    assert p.admits(newcomer, 5, [short, whale], cfg())
    assert not p.admits(newcomer, 7, [short, whale], cfg())
    assert p.admits(newcomer, 30, [], cfg())
    # The share's deadline has the cap's margin: margin 0.1, P = 8000 and L = 12000 ns give a
    # cap of 0.9 x 9600 = 8640 ns and a deadline of 18000 ns.  Two steps of the cap fit the
    # deadline (17280 <= 18000), but not the deadline less its margin (16200): k = 1, a 6-page
    # long one keeps all 6 of the floor((8640 - 1000) / 1024) = 7 pages, and only a 1-page
    # newcomer joins beside it (6 + 1 = 7; with k = 2 it would keep 3 and a 4-page one join).
    m = SloBudget(margin=0.1, chunk_pages=4, short_ref_ns=8000, long_ref_ns=12_000)
    m.reads([running(0, 1)], cfg())
    assert (m.cap_ns, m.deadline_ns) == (pytest.approx(8640), 18_000) and m.gate_pages(cfg()) == 7
    assert m.share(6) == 6 and m.share(1) == 1
    assert m.admits(newcomer, 1, [running(1, 6)], cfg())
    assert not m.admits(newcomer, 2, [running(1, 6)], cfg())
    # The fixed budget keeps no share for long requests (ReadBudget's gate counts short ones only,
    # long newcomers need only the engine's page budget).
    assert ReadBudget(budget_pages=8, chunk_pages=4).admits(newcomer, 30, [short, running(2, 30)], cfg())
    assert ReadBudget(budget_pages=8, chunk_pages=4).admits(newcomer, 3, [short, running(2, 30)], cfg())


def test_bound_max_reads_in_a_deadline():
    from kvfabric.sim.tiering.bound import max_reads_ns
    # Steps of at most 10, each costing 6 of minnows: 3 full steps fit in 30 (4 of whale each).
    assert max_reads_ns(30, 10, 6) == 12
    # 35: the 5 left after 3 steps is less than a step's 6 of minnows: nothing more.
    assert max_reads_ns(35, 10, 6) == 12
    # 38: a fourth step of 8 reads 2 more.
    assert max_reads_ns(38, 10, 6) == 14
    assert max_reads_ns(30, 10, 10) == math.inf


def test_bound_verdict_on_a_hand_worked_example():
    from kvfabric.sim.tiering.bound import WhaleStep, bound
    c = cfg()
    # P 5000 -> Tmax 6000; L 10000 -> D 15000: n = 2 steps. With 2 minnow pages (T_s 3048):
    # R = 2 x 2952 + max(0, 15000 - 12000 - 3048) = 5904 ns of whale reads, 5 pages (5120) but
    # not 6 (6144). 5 minnow pages: T_s = 6120 >= Tmax, free.
    steps = [WhaleStep(2, 3, (6,)),        # infeasible: 3 minnows, 1 token
             WhaleStep(2, 4, (3, 3)),      # infeasible: 6 pages together; 4 minnows, 2 tokens
             WhaleStep(5, 5, (9,)),        # free
             WhaleStep(2, 2, (5,))]        # feasible
    # Slack: 500 minnow gaps -> 5; 100 whale gaps -> 1. The knapsack spends 4 minnow gaps
    # on the 2-token step (2 per token), the last 1 on a third of the other: 2 1/3 rescued,
    # 2/3 of a token left late, within 1.
    b = bound(steps, c, 5000, 10_000, minnow_gaps=500, whale_gaps=100)
    assert (b["Tmax_ns"], b["D_ns"]) == (6000, 15_000)
    assert (b["infeasible_steps"], b["infeasible_tokens"], b["whale_tokens"]) == (2, 3, 5)
    assert b["rescued_tokens"] == pytest.approx(2 + 1 / 3) and b["late_tokens"] == pytest.approx(2 / 3)
    assert (b["minnow_slack"], b["whale_slack"]) == (5, 1)
    assert b["feasible"]
    # Alone, the 9-page whale step takes 1000 + 9 x 1024 = 10216 <= 15000: every whale step fits D.
    assert b["feasible_any"] and b["alone_late_tokens"] == 0
    # D = 1.5 x 6000 = 9000: the 9-page step alone (10216) does not fit; 1 token, more than 0 of slack
    # at 50 whale gaps, within 1 at 100.
    assert not bound(steps, c, 5000, 6000, minnow_gaps=500, whale_gaps=50)["feasible_any"]
    assert bound(steps, c, 5000, 6000, minnow_gaps=500, whale_gaps=100)["alone_late_tokens"] == 1
    # The median whale step's minnow load is 3048 ns: 5 pages fit there.
    assert b["largest_feasible_pages"] == 5
    # 50 whale gaps: no slack (50 - ceil(49.5)), 2/3 of a token late is too many.
    assert not bound(steps, c, 5000, 10_000, minnow_gaps=500, whale_gaps=50)["feasible"]


def test_bound_minnow_floor_is_the_smallest_feasible_target():
    from kvfabric.sim.tiering.bound import WhaleStep, minnow_floor
    c = cfg()
    steps = [WhaleStep(2, 3, (6,)), WhaleStep(2, 4, (3, 3)), WhaleStep(5, 5, (9,)), WhaleStep(2, 2, (5,))]
    # P 5000, D 15000, no whale slack (50 gaps), 5 minnow gaps of slack. The two 6-page steps
    # (T_s 3048, 6144 ns of whale reads) need R >= 6144: for Tmax <= 5976 R is 5856 (n = 2 or 3
    # steps and a last one), above it R = 2 Tmax - 6096 >= 6144 from Tmax = 6120, a = 1.224; the
    # first point of the 0.005 grid at or above it is 1.225 (Tmax 6125: R = 6154). There the
    # 9-page step (T_s 6120 < 6125) is no longer free: R = 2 x 5 = 10 ns < 9216, 1 token, rescued
    # by its 5 minnows' gaps, the whole minnow slack: feasible. At 1.22 (Tmax 6100): R = 6104.
    assert minnow_floor(steps, c, 5000, 10_000, minnow_gaps=500, whale_gaps=50) == 1.225
    # One whale gap of slack (100 gaps): feasible already at 1 (2/3 of a token late, as at 1.2).
    assert minnow_floor(steps, c, 5000, 10_000, minnow_gaps=500, whale_gaps=100) == 1.0
    # Nothing up to 1.2: None.
    assert minnow_floor(steps, c, 5000, 10_000, minnow_gaps=500, whale_gaps=50, hi=1.2) is None


def test_bound_recorder_sees_lru_steps():
    from kvfabric.sim.tiering.bound import Recorder, WhaleStep
    whale = Request(0, 0, prompt=48, generated=2, whale=True)   # 49 tokens: 4 pages
    minnow = Request(1, 0, prompt=20, generated=2)               # 21 tokens: 2 pages
    rec = Recorder()
    simulate([whale, minnow], cfg(hbm_pages=100), rec)
    assert rec.steps == [WhaleStep(2, 1, (4,))]
