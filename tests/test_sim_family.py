"""The workload family (issue #26, `make family`): the generator's ranges and
admissibility from their definitions, the report's statistics on fake
results, reproducibility from the printed seed, and a tiny family end to end
(the real run is `make family`; its figures are never asserted here)."""

import json
import math
import re
import tomllib

import pytest

from kvfabric.model.contract import compile_contract
from kvfabric.sim.studies import family as fam
from kvfabric.sim.studies.family_run import CHUNK_CYCLES, WAIT_PARTS, covered_chunks, wait_split
from kvfabric.sim.studies.family import (FAMILY_SEED, FIXED, MIN_STEPS, RANGES, distribution, draw, draw_family,
                                         judge, run_spec, tail_split, write_draw)
from kvfabric.sim.workload import parse_workload, simulated_contract
from kvfabric.system import run_system

#: Draws checked against the ranges: the default family's and another seed's (printed on failure).
CHECKED = [(FAMILY_SEED, k) for k in range(24)] + [(7, k) for k in range(24)]


def _decode_demand_gbps(t):
    """A decode's mean demand by the family's definition, from the workload's own fields:
    its step's HBM bytes over its think time, at 1.6 GHz (GB/s = B/cycle x 1.6)."""
    return t["step_bytes"] * (1 - t["cxl_fraction"]) / t["think_cycles"] * 1.6


def _channels_of(t, n):
    """A tenant's channel set as its workload table writes it (absent: all ``n``)."""
    return t.get("channels", list(range(n)))


@pytest.mark.parametrize("seed,k", CHECKED)
def test_a_draw_is_admissible_and_inside_the_stated_ranges(seed, k):
    d = draw(seed, k)
    contract, workload = d["contract"], d["workload"]
    tenants = workload["tenant"]
    ids = [t["id"] for t in tenants]
    assert ids == list(range(len(ids))) == [t["id"] for t in contract["tenant"]]
    assert RANGES["tenants"][0] <= len(ids) <= RANGES["tenants"][1]
    prefills = [t for t in tenants if t["kind"] == "prefill"]
    decodes = [t for t in tenants if t["kind"] == "decode"]
    assert RANGES["prefills"][0] <= len(prefills) <= RANGES["prefills"][1] and decodes
    fab = contract["fabric"]
    n = fab["channels"]
    # Issue #41: 1, 2, 4 and 8 channels in turn.
    assert n == (1, 2, 4, 8)[k % 4]
    # Admissible: the contract compiler (admission control included) and the workload checker accept it.
    compile_contract(contract, source=f"draw {k} at seed {seed}")
    parse_workload(workload, ids, source=f"draw {k} at seed {seed}", channels=n)
    if n > 1:
        assert workload["mapping"]["interleave_bytes"] in (256, 512, 1024, 2048, 4096)
        assert fab["coordinator"] is False
    else:
        assert "mapping" not in workload
    # The channel kvfabric system simulates, so it runs the contract as written;
    # a clock at which one 128-byte grant per clock covers that channel's 51.2 GB/s.
    assert fab["channel_gbps"] == pytest.approx(51.2)
    assert fab["clock_mhz"] in RANGES["clock_mhz"] and 128 * fab["clock_mhz"] / 1000 >= 51.2
    simulated, rescaled = simulated_contract(contract, 51.2)
    assert not rescaled and simulated["tenant"] == contract["tenant"]
    assert (workload["system"]["read_queue"], workload["system"]["write_queue"]) == (128, 64)
    guarantee = {t["id"]: t["guaranteed_gbps"] for t in contract["tenant"]}
    load = [0.0] * n   # the decodes' mean demand on each channel, bytes per cycle
    for t in decodes:
        chans = _channels_of(t, n)
        m = len(chans)
        assert chans == sorted(set(chans)) and 1 <= m <= n
        assert t["step_bytes"] % t["block_bytes"] == 0 and t["block_bytes"] in (128, 256, 512, 1024, 2048, 4096)
        assert 4096 * m <= t["step_bytes"] <= 32768 * m or t["step_bytes"] == t["block_bytes"]
        assert t["cxl_fraction"] == 0 or 0.1 <= t["cxl_fraction"] <= 0.5
        # Each channel enforces 1/n of the contract's GB/s; the decode's demand there is 1/m of its own.
        per_channel_demand = _decode_demand_gbps(t) / m
        # Issue #41: every third draw guarantees its first decode 0.4x its demand on purpose.
        under = k % 3 == 2 and t is decodes[0]
        assert d["meta"]["decodes"][t["id"]]["under"] == under
        lo, hi = (0.4, 0.4) if under else (1.2, 2.0)
        assert lo <= guarantee[t["id"]] / n / per_channel_demand <= hi + 0.001 / per_channel_demand
        # Long enough for MIN_STEPS periods of think time plus its step (per channel) at a channel's peak.
        assert workload["system"]["cycles"] >= MIN_STEPS * (t["think_cycles"] + t["step_bytes"] / m / 32)
        for c in chans:
            load[c] += t["step_bytes"] * (1 - t["cxl_fraction"]) / m / t["think_cycles"] / 32
    # The drawn load is the busiest channel's (think times rounded to a cycle, at least 1,000).
    assert max(load) <= RANGES["decode_load"][1] * 1.001
    assert max(load) >= RANGES["decode_load"][0] * 0.999 or min(t["think_cycles"] for t in decodes) == 1000
    for t in prefills:
        m = len(_channels_of(t, n))
        assert t["job_bytes"] % (128 * 1024) == 0 and t["job_bytes"] <= RANGES["job_bytes"][1] * m
        assert round(64 * m) <= t["window"] <= round(1024 * m) and t["write_share"] in (0, 2, 4, 8)
        backlogged = t["id"] in d["meta"]["backlogged"]
        if backlogged:   # jobs arrive at least as fast as its channels together could serve them
            assert t["period_cycles"] * 32 * m <= t["job_bytes"]
        else:            # its mean demand is what its m channels guarantee it (m/n of the contract's), two jobs a run
            demand = t["job_bytes"] / t["period_cycles"] * 1.6
            assert demand == pytest.approx(guarantee[t["id"]] * m / n, rel=0.01)
            assert t["period_cycles"] <= workload["system"]["cycles"] // 2 or t["job_bytes"] == 128 * 1024
            assert t["phase_cycles"] < t["period_cycles"]


def test_the_family_spans_its_ranges():
    draws = [draw(s, k) for s, k in CHECKED]
    kinds = [[t["kind"] for t in d["workload"]["tenant"]] for d in draws]
    assert {len(k) for k in kinds} == set(range(4, 9))
    assert {k.count("prefill") for k in kinds} == {1, 2, 3}
    assert any(d["meta"]["backlogged"] for d in draws) and not all(d["meta"]["backlogged"] for d in draws)
    decodes = [t for d in draws for t in d["workload"]["tenant"] if t["kind"] == "decode"]
    assert any(t["cxl_fraction"] for t in decodes) and not all(t["cxl_fraction"] for t in decodes)
    assert {t["block_bytes"] for t in decodes} == set(RANGES["block_bytes"])
    assert {d["contract"]["fabric"]["clock_mhz"] for d in draws} == set(RANGES["clock_mhz"])
    # Issue #41: every channel count, at least half the draws multi-channel, every interleave,
    # and tenants on all channels and on some.
    counts = [d["contract"]["fabric"]["channels"] for d in draws]
    assert set(counts) == {1, 2, 4, 8} and sum(c > 1 for c in counts) >= len(counts) / 2
    assert sum(c > 1 for c in counts[:12]) >= 6  # the default family's 12 draws too
    assert {d["workload"]["mapping"]["interleave_bytes"] for d in draws if "mapping" in d["workload"]} == \
        {256, 512, 1024, 2048, 4096}
    multi = [t for d in draws if d["contract"]["fabric"]["channels"] > 1 for t in d["workload"]["tenant"]]
    assert any("channels" in t for t in multi) and any("channels" not in t for t in multi)


def test_a_draw_depends_on_the_seed_and_its_index_only(tmp_path):
    assert draw(FAMILY_SEED, 3) == draw(FAMILY_SEED, 3) != draw(FAMILY_SEED + 1, 3)
    assert draw_family(FAMILY_SEED, 2) == draw_family(FAMILY_SEED, 5)[:2]
    d = draw(FAMILY_SEED, 1)
    c, w = write_draw(d, tmp_path)
    with open(c, "rb") as f:
        assert tomllib.load(f) == d["contract"]
    with open(w, "rb") as f:
        assert tomllib.load(f) == d["workload"]


def _fake(lat, parts=None, prefills=None, busy=1000):
    return {"cycles": 1000, "utilisation": 0.5, "cpu_s": 1.0, "wall_s": 2.0,
            "decodes": {1: {"lat": lat, "parts": parts or [[0, 0, x, 0] for x in lat], "bytes": 0}},
            "prefills": prefills or {}, "prefills_busy": busy}


def test_judge_and_distribution_on_fake_results():
    meta = {"draw": 0, "decodes": {1: {}}, "backlogged": [0],
            "prefills": {0: {"backlogged": True, "guaranteed_gbps": 10.0}}}
    # 100 steps each: nearest-rank p99 is the 99th smallest.
    base = list(range(1, 101))                       # p99 99
    slow = [2 * x for x in range(1, 101)]            # p99 198
    results = {
        (0, "decode-only", 1): _fake(base), (0, "decode-only", 2): _fake(base),
        # 10 GB/s = 6.25 B/cycle: 6,250 bytes in 1,000 active cycles.
        (0, "frfcfs", 1): _fake(slow, prefills={0: {"bytes": 12500, "active": 1000, "jobs": 1}}),
        (0, "frfcfs", 2): _fake(slow, prefills={0: {"bytes": 12500, "active": 1000, "jobs": 1}}),
        (0, "fabric-qos", 1): _fake(base, prefills={0: {"bytes": 6250, "active": 1000, "jobs": 1}}),
        (0, "fabric-qos", 2): _fake(base, prefills={0: {"bytes": 6000, "active": 1000, "jobs": 1}}),
    }
    rows = {(r["policy"], r["seed"]): r for r in judge(results, [meta])}
    assert set(rows) == {("frfcfs", 1), ("frfcfs", 2), ("fabric-qos", 1), ("fabric-qos", 2)}
    assert rows["frfcfs", 1]["p99_ratio"] == 2 and rows["fabric-qos", 1]["p99_ratio"] == 1
    assert rows["frfcfs", 1]["prefill_ratio"] == 1 and rows["fabric-qos", 1]["prefill_ratio"] == 0.5
    assert rows["fabric-qos", 1]["prefill_each_ratio"] == 0.5  # one prefill: the two figures agree
    assert rows["fabric-qos", 1]["prefill_gbps"] == pytest.approx(10.0)
    assert rows["fabric-qos", 1]["backlogged_met"] == {0: True}       # 10.0 GB/s, guaranteed 10.0
    assert rows["fabric-qos", 2]["backlogged_met"] == {0: False}      # 9.6 GB/s
    # Nearest rank over 1..10: median the 5th, the 90th percentile the 9th, the 10th the 1st.
    values = [float(v) for v in range(10, 0, -1)]
    assert distribution(values, "max") == {"n": 10, "median": 5, "p90": 9, "worst": 10}
    assert distribution(values + [float("nan")], "min") == {"n": 10, "median": 5, "p90": 1, "worst": 1}
    # The tail split: the mean parts of the steps at or above the p99 (the 99th and 100th of 100).
    parts = [[x, 0, 0, 1] for x in range(100)]
    assert tail_split([sum(p) for p in parts], parts) == [98.5, 0, 0, 1]


def test_an_under_guaranteed_decode_is_judged_against_frfcfs_apart_from_the_decode_ratio():
    """Decode 2 is under-guaranteed on purpose: the decode ratio is decode 1's
    (p99 99 / 99), and decode 2's p99 under each policy sits in the run's
    ``under`` entry and in the report's table against FR-FCFS's."""
    meta = {"draw": 2, "decodes": {1: {"under": False}, 2: {"under": True, "headroom": 0.4}}, "backlogged": [],
            "prefills": {}}
    base = list(range(1, 101))                       # p99 99
    slow = [3 * x for x in range(1, 101)]            # p99 297
    slower = [4 * x for x in range(1, 101)]          # p99 396

    def run(lat1, lat2):
        r = _fake(lat1)
        r["decodes"][2] = {"lat": lat2, "parts": [[0, 0, x, 0] for x in lat2], "bytes": 0}
        return r

    results = {(2, "decode-only", 1): run(base, base), (2, "frfcfs", 1): run(slow, slower),
               (2, "fabric-qos", 1): run(base, slow)}
    rows = {r["policy"]: r for r in judge(results, [meta], seeds=(1,))}
    assert rows["fabric-qos"]["p99_ratio"] == 1 and rows["fabric-qos"]["worst_decode"] == 1
    assert rows["frfcfs"]["p99_ratio"] == 3
    (u,) = rows["fabric-qos"]["under"]
    assert (u["decode"], u["headroom"]) == (2, 0.4)
    assert (u["p99_ns"], u["frfcfs_p99_ns"], u["base_p99_ns"]) == tuple(
        x * fam.NS_PER_CYCLE for x in (297, 396, 99))
    (entry,) = fam.under_table(list(rows.values()))
    assert entry["fabric-qos"] == 297 * fam.NS_PER_CYCLE and entry["frfcfs"] == 396 * fam.NS_PER_CYCLE
    lines = []
    fam._under_section(lines.append, {"rows": list(rows.values())})
    assert any(line.startswith("| 2 | 1 | 1 | 2 | 0.40x |") and line.endswith("| 0.75x | met |") for line in lines)
    assert "Met in 1 of 1 runs." in lines


def test_prefills_together_are_judged_over_the_cycles_some_prefill_had_a_job():
    # Two prefills in a 1,000-cycle run, prefill 0 backlogged (a job all along).
    # FR-FCFS lets prefill 1's job (4,000 bytes) crowd prefill 0 out: done in
    # 200 cycles, prefill 0 getting 10,000 bytes.  The policy shares: prefill 1's
    # job takes 400 cycles and prefill 0 gets 10,500 bytes.
    meta = {"draw": 0, "decodes": {1: {}}, "backlogged": [0],
            "prefills": {0: {"backlogged": True, "guaranteed_gbps": 1.0}, 1: {"backlogged": False}}}
    lat = list(range(1, 101))
    fr = {0: {"bytes": 10_000, "active": 1000, "jobs": 0}, 1: {"bytes": 4000, "active": 200, "jobs": 1}}
    qos = {0: {"bytes": 10_500, "active": 1000, "jobs": 0}, 1: {"bytes": 4000, "active": 400, "jobs": 1}}
    results = {(0, "decode-only", 1): _fake(lat), (0, "frfcfs", 1): _fake(lat, prefills=fr),
               (0, "fabric-qos", 1): _fake(lat, prefills=qos)}
    row = next(r for r in judge(results, [meta], seeds=(1,)) if r["policy"] == "fabric-qos")
    # Together: 14,500 bytes against 14,000 over the same 1,000 busy cycles.
    assert row["prefill_ratio"] == pytest.approx(14_500 / 14_000)
    assert row["prefill_gbps"] == pytest.approx(14.5 * 1.6)  # 14.5 bytes per 1.6 GHz cycle
    # Per prefill: 10.5 + 10 bytes per cycle against 10 + 20.
    assert row["prefill_each_ratio"] == pytest.approx(20.5 / 30)
    # Busy cycles are a union: overlapping jobs count once, a gap not at all.
    assert fam.union_length([(30, 40), (0, 10), (5, 20), (35, 38)]) == 30
    assert fam.union_length([]) == 0
    # Results kept before the figure existed give NaN, not a wrong ratio.
    del results[0, "fabric-qos", 1]["prefills_busy"]
    row = next(r for r in judge(results, [meta], seeds=(1,)) if r["policy"] == "fabric-qos")
    assert math.isnan(row["prefill_ratio"])


def test_where_the_prefills_bandwidth_goes_is_judged_in_their_job_cycles():
    # A 1,000-cycle run at 32 bytes per cycle of peak: 1,000 chunk cycles in jobs.
    # FR-FCFS: decodes 3,200 bytes (10 % of peak) and prefills 19,200 (60 %);
    # the policy: decodes 8,000 (25 %), prefills 14,400 (45 %).
    meta = {"draw": 0, "decodes": {1: {}}, "backlogged": [], "prefills": {0: {"backlogged": False}}}
    lat = list(range(1, 101))
    pre = {0: {"bytes": 1, "active": 1000, "jobs": 1}}
    base = _fake(lat)
    base["decodes"][1]["bytes"] = 8_960     # 28 % of the run's peak bytes
    fr = {**_fake(lat, prefills=pre), "in_jobs": {"cycles": 1000, "decodes": 3_200, "prefills": 19_200}}
    qos = {**_fake(lat, prefills=pre), "in_jobs": {"cycles": 1000, "decodes": 8_000, "prefills": 14_400}}
    results = {(0, "decode-only", 1): base, (0, "frfcfs", 1): fr, (0, "fabric-qos", 1): qos}
    row = next(r for r in judge(results, [meta], seeds=(1,)) if r["policy"] == "fabric-qos")
    assert row["in_jobs"] == pytest.approx({"decodes": 0.25, "prefills": 0.45, "total": 0.70})
    assert row["decode_only_decodes"] == pytest.approx(0.28)
    # 90 % of FR-FCFS's 60 % beside the policy's 25 % of decodes.
    assert row["needed_total"] == pytest.approx(0.25 + 0.9 * 0.60)
    # No chunk in a job (or a run from before the figure): no shares, a NaN need.
    del qos["in_jobs"]
    row = next(r for r in judge(results, [meta], seeds=(1,)) if r["policy"] == "fabric-qos")
    assert row["in_jobs"] is None and math.isnan(row["needed_total"])


def test_chunks_count_only_when_the_jobs_cover_them_whole():
    # Chunks of 10 up to 45: [0,10) starts before the first span, [30,40) is
    # covered by two touching spans, [40,45) is a short last chunk.
    assert covered_chunks([(5, 25), (25, 41), (50, 60)], 10, 45) == [False, True, True, True, False]
    assert covered_chunks([(0, 10), (12, 30)], 10, 30) == [True, False, True]
    assert covered_chunks([], 10, 20) == [False, False]


def test_stopping_the_run_at_every_chunk_changes_nothing_it_simulates(tmp_path):
    d = draw(FAMILY_SEED, 8)
    c, w = write_draw(d, tmp_path)
    cycles = 5 * CHUNK_CYCLES + 1234
    _, chunked = run_spec(dict(draw=8, policy="fabric-qos", seed=1, contract=c, workload=w, cycles=cycles))
    system, workload, _ = fam.build_system(c, w, "fabric-qos", 1, cycles)
    system.run(cycles)                           # in one go
    for ts, t in zip(workload.tenants, system.tenants):
        if ts.kind == "decode":
            assert chunked["decodes"][ts.id]["lat"] == [lat for _, lat in t.steps]
    assert chunked["utilisation"] == float(sum(system.channel.stats.bytes)) / (cycles * 32)
    ij = chunked["in_jobs"]
    assert ij["cycles"] % CHUNK_CYCLES == 0 and 0 < ij["cycles"] <= chunked["prefills_busy"]
    assert ij["decodes"] <= sum(x["bytes"] for x in chunked["decodes"].values())
    assert ij["prefills"] <= sum(x["bytes"] for x in chunked["prefills"].values())


def test_the_family_wall_is_predicted_by_list_scheduling_of_its_runs():
    rates = {"with prefills": {"cycles_per_cpu_s": 100}, "decode-only": {"cycles_per_cpu_s": 1000}}
    metas = [{"cycles": 1000}, {"cycles": 100}]
    # Runs of 1 s (decode-only) and 10 s (FR-FCFS) for the first draw, 0.1 s and 1 s for the second, two seeds each.
    kw = dict(seeds=(1, 2), policies=("decode-only", "frfcfs"), per="cycles_per_cpu_s")
    assert fam.predict_wall_s(rates, metas, 1, **kw) == pytest.approx(24.2)
    assert fam.predict_wall_s(rates, metas, 2, **kw) == pytest.approx(12.1)   # {10, 1, 1, 0.1} each
    assert fam.predict_wall_s(rates, metas, 8, **kw) == pytest.approx(10)     # the longest run
    # Channel-cycles: an 8-channel draw of 1,000 cycles is 8,000, at its own count's rate when measured.
    rates["with prefills, 8 channels"] = {"runs": 2, "cycles_per_cpu_s": 400}
    eight = [{"cycles": 1000, "channels": 8}, {"cycles": 1000, "channels": 2}]
    kw1 = dict(seeds=(1,), policies=("frfcfs",), per="cycles_per_cpu_s")
    assert fam.predict_wall_s(rates, eight, 1, **kw1) == pytest.approx(8000 / 400 + 2000 / 100)


def test_the_runner_builds_what_kvfabric_system_runs(tmp_path):
    d = draw(FAMILY_SEED, 4)
    d["workload"]["system"]["cycles"] = 20_000
    c, w = write_draw(d, tmp_path)
    mine = run_spec(dict(draw=4, policy="fabric-qos", seed=1, contract=c, workload=w, cycles=None))[1]
    theirs = {t["id"]: t for t in run_system(c, w, "fabric-qos")["tenants"]}
    for tid, dec in mine["decodes"].items():
        assert len(dec["lat"]) == theirs[tid]["steps"]
        if dec["lat"]:
            assert round(fam.pct(dec["lat"], 99) * fam.NS_PER_CYCLE, 1) == theirs[tid]["p99_ns"]
    actives = [p["active"] for p in mine["prefills"].values()]
    assert max(actives) <= mine["prefills_busy"] <= min(sum(actives), mine["cycles"])
    only = run_spec(dict(draw=4, policy="decode-only", seed=1, contract=c, workload=w, cycles=None))[1]
    assert only["prefills"] == {} and set(only["decodes"]) == set(mine["decodes"])


def test_a_tiny_family_end_to_end_prints_its_seed_and_reproduces(tmp_path, capsys):
    out, build = tmp_path / "reports", tmp_path / "build"
    assert fam.main(["--draws", "1", "--cycles", "15000", "--jobs", "1", "--seed", "5", "--python", "this",
                     "--out", str(out), "--build", str(build)]) == 0
    seed = int(re.search(r"seed (\d+), 1 draws", capsys.readouterr().out).group(1))
    # The printed seed redraws the written files exactly.
    again = tmp_path / "again"
    write_draw(draw(seed, 0), again)
    for name in ("contract.toml", "workload.toml"):
        assert (again / "draw_0" / name).read_text().split("\n", 3)[3] == \
            (build / "draw_0" / name).read_text().split("\n", 3)[3]
    doc = json.loads((out / "family.json").read_text())
    assert doc["family_seed"] == 5 and "revision" in doc and doc["cycles_override"] == 15000
    assert {r["policy"] for r in doc["rows"]} == {"frfcfs", "fabric", "fabric-qos"}
    assert len(doc["rows"]) == 3 * len(fam.RUN_SEEDS)
    assert doc["fixed"] == json.loads(json.dumps(FIXED)) and "clock_mhz" not in doc["fixed"]
    assert doc["predicted_default_wall_s"] > 0
    farm = doc["predicted_default_wall_s_farm"]
    assert 0 < farm["32"] <= farm["8"] <= doc["predicted_default_wall_s_own_cores"]
    md = (out / "family.md").read_text()
    assert f"The runs ran under {doc['interpreter']} (" in md and doc["interpreter"].split()[0] in ("PyPy", "CPython")
    assert "family seed **5**" in md and "Short runs" in md and "Held fixed" in md
    assert (out / "family.png").stat().st_size > 0


def test_the_restated_prefill_figure_is_against_what_frfcfs_carried_beyond_the_decode_only_decodes():
    # 1,000-cycle runs. FR-FCFS: prefills 12,500 bytes, decodes 2,000; decode-only: decodes 4,000.
    # FR-FCFS carried 12,500 + 2,000 - 4,000 = 10,500 bytes beyond the decode-only decodes; the
    # policy's prefills 9,000 of them.
    meta = {"draw": 0, "decodes": {1: {}}, "backlogged": [], "prefills": {0: {"backlogged": False}}}
    lat = list(range(1, 101))
    base, fr = _fake(lat), _fake(lat, prefills={0: {"bytes": 12_500, "active": 1000, "jobs": 1}})
    qos = _fake(lat, prefills={0: {"bytes": 9_000, "active": 1000, "jobs": 1}})
    base["decodes"][1]["bytes"], fr["decodes"][1]["bytes"] = 4_000, 2_000
    results = {(0, "decode-only", 1): base, (0, "frfcfs", 1): fr, (0, "fabric-qos", 1): qos}
    rows = {r["policy"]: r for r in judge(results, [meta], seeds=(1,))}
    assert rows["fabric-qos"]["prefill_restated"] == pytest.approx(9_000 / 10_500)
    assert rows["fabric-qos"]["prefill_ratio"] == pytest.approx(9_000 / 12_500)   # the old figure, beside it
    assert rows["fabric-qos"]["prefill_run_gbps"] == pytest.approx(9 * 1.6)
    # FR-FCFS against itself: its prefills over its prefills + 2,000 - 4,000 bytes.
    assert rows["frfcfs"]["prefill_restated"] == pytest.approx(12_500 / 10_500)


class _Ch:
    pc_of = [0, 0, 1, 1]


def test_a_steps_controller_wait_is_split_by_refresh_then_drain_then_its_row_commands():
    # Last access on channel 0, bank 2 (pseudo-channel 1): admitted at 1,000, its first row
    # command at 1,060, its column command at 1,100 (100 cycles in the controller).
    # Bank 2 refreshes over 990-1,010 (10 cycles of it inside), pseudo-channel 1 drains writes
    # over 1,005-1,030 (20 cycles not already refresh) and 1,070-1,080 (inside the row commands:
    # drain); a refresh of another bank and a drain of the other pseudo-channel do not count.
    spans = [{"refresh": [[], [], [(990, 1010), (5000, 5100)], [(1020, 1090)]],
              "drain": [[(1000, 1100)], [(100, 200), (1005, 1030), (1070, 1080)]]}]
    split = wait_split((5, 3, 100, 10), (0, 2, 1000, 1060, 1100), spans, [_Ch()])
    # arbiter, admission, queue, bank, write drain, refresh, service
    assert split == [5, 3, 100 - 10 - 30 - 30, 30, 30, 10, 10]
    assert list(WAIT_PARTS) == ["arbiter", "admission", "queue", "bank", "write drain", "refresh", "service"]
    # A row hit (no row command) and a CXL read.
    assert wait_split((0, 0, 40, 10), (0, 0, 0, -1, 40), spans, [_Ch()]) == [0, 0, 40, 0, 0, 0, 10]
    assert wait_split((0, 0, 0, 77), None, spans, [_Ch()]) == [0, 0, 0, 0, 0, 0, 77]


def test_a_multi_channel_run_reports_what_kvfabric_system_runs_with_its_portions_and_waits(tmp_path):
    d = draw(FAMILY_SEED, 1)
    assert d["meta"]["channels"] == 2
    d["workload"]["system"]["cycles"] = 20_000
    c, w = write_draw(d, tmp_path)
    mine = run_spec(dict(draw=1, policy="fabric-qos", seed=1, contract=c, workload=w, cycles=None))[1]
    theirs = run_system(c, w, "fabric-qos")
    assert mine["channels"] == 2 and mine["utilisation"] == pytest.approx(theirs["utilisation"], abs=1e-4)
    by_id = {t["id"]: t for t in theirs["tenants"]}
    steps = 0
    for tid, dec in mine["decodes"].items():
        assert len(dec["lat"]) == by_id[tid]["steps"]
        assert dec["bytes"] / 20_000 * 1.6 == pytest.approx(by_id[tid]["gbps"], abs=1e-3)
        chans = set(d["workload"]["tenant"][tid].get("channels", [0, 1]))
        for lat, waits, portions in zip(dec["lat"], dec["waits"], dec["portions"]):
            steps += 1
            assert sum(waits) == lat and min(waits) >= 0          # the parts add up to the step
            assert {ch for ch, _ in portions} <= chans            # portions only on its channels
            assert all(0 < p <= lat for _, p in portions)          # the step ends with its slowest portion
    assert steps > 0


def test_the_pooled_decode_ratio_takes_the_p99_over_every_seeds_steps_together():
    """Seed 1's 100 steps are 1..100 and seed 2's 101..200 under fabric-qos,
    1..200 decode-only at both: each seed alone has a p99 of 99 or 199, the
    200 steps pooled the 198th smallest, 198, against decode-only's 198th of
    1,1,2,2,...,200,200 (99).  The under-guaranteed decode 2 is left out."""
    meta = {"draw": 4, "channels": 2, "decodes": {1: {}, 2: {"under": True, "headroom": 0.4}}}

    def run(lat):
        r = _fake(lat)
        r["decodes"][2] = {"lat": [1000] * len(lat), "parts": [], "bytes": 0}
        return r

    base = list(range(1, 201))
    results = {(4, "decode-only", 1): run(base[:100]), (4, "decode-only", 2): run(base[:100]),
               (4, "fabric-qos", 1): run(base[:100]), (4, "fabric-qos", 2): run(base[100:])}
    (p,) = fam.pooled(results, [meta], (1, 2))
    assert (p["draw"], p["channels"], p["decode"], p["steps"]) == (4, 2, 1, 200)
    assert p["p99_ratio"] == 198 / 99
    assert fam.pooled(results, [meta], (1, 2, 3)) == [], "a seed without its runs leaves the draw out"


def test_family_seeds_and_only_run_those_draws_and_seeds(tmp_path):
    out, build = tmp_path / "reports", tmp_path / "build"
    assert fam.main(["--draws", "3", "--only", "2", "--seeds", "3", "--cycles", "12000", "--jobs", "1",
                     "--python", "this", "--out", str(out), "--build", str(build)]) == 0
    doc = json.loads((out / "family.json").read_text())
    assert doc["run_seeds"] == [3]
    assert {(r["draw"], r["seed"]) for r in doc["rows"]} == {(2, 3)}
    assert [m["draw"] for m in doc["draws"]] == [2]
    assert [p["draw"] for p in doc["pooled"]] == [2]
    # The same draw as in the whole family: draw 2 depends on the family seed and 2 only.
    again = tmp_path / "again"
    write_draw(draw(fam.FAMILY_SEED, 2), again)
    for name in ("contract.toml", "workload.toml"):
        assert (again / "draw_2" / name).read_text().split("\n", 3)[3] == \
            (build / "draw_2" / name).read_text().split("\n", 3)[3]
    assert not (build / "draw_0").exists()
    assert "## Decode ratio with the seeds' steps pooled (fabric-qos; seeds 3)" in (out / "family.md").read_text()


@pytest.mark.parametrize("args, words", [
    (["--only", "3"], ["--only", "0..2", "--draws 3"]),
    (["--seeds", "1,x"], ["--seeds", "integers"]),
    (["--seeds", "1,1"], ["--seeds", "distinct"]),
])
def test_family_rejects_bad_seeds_and_draws_naming_the_option(args, words, capsys):
    with pytest.raises(SystemExit):
        fam.main(["--draws", "3", *args])
    err = capsys.readouterr().err
    for w in words:
        assert w in err, (w, err)
