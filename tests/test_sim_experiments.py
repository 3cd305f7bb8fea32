"""The experiment pipeline end to end on tiny runs (the real run is `make experiments`)."""

import dataclasses
import json
from fractions import Fraction

import pytest

from kvfabric.provenance import describe, revision
from kvfabric.sim.studies.experiments import build_run, plan, run_spec
from kvfabric.sim.fabric import QosKnobs
from kvfabric.sim.studies.metrics import pooled
from kvfabric.sim.studies.report import derive, pooled_rows, seed_run_key, write_report
from kvfabric.sim.studies.scenarios import Scale, setup_a, setup_b


def test_plan_has_unique_ids_and_every_kind():
    for quick in (True, False):
        specs = plan(quick)
        ids = [s["id"] for s in specs]
        assert len(ids) == len(set(ids))
        assert {s["kind"] for s in specs} == {"setup_a", "setup_b", "isolation", "idle", "admission",
                                              "coordinator"}


def test_horizon_cuts_every_run_but_keeps_a_whole_prefill_job():
    full = {s["id"]: s["params"] for s in plan()}
    cut = {s["id"]: s["params"] for s in plan(horizon=Fraction(1, 3))}
    assert cut.keys() == full.keys()
    for key, p in cut.items():
        if "periods" in p:
            # A third of the time, but never below half a prefill period.
            assert p["periods"] == max(Fraction(1, 2), full[key]["periods"] / 3), key
        elif "epochs" in p:
            # Issue #27's runs (20 epochs, the even mapping's seed repeats too): at least 8 when cut.
            assert p["epochs"] == 8 and full[key]["epochs"] == 20, key
        else:
            assert p["cycles"] * 3 == full[key]["cycles"], key
    with pytest.raises(ValueError, match="horizon"):
        plan(horizon=Fraction(3, 2))


def test_every_target_run_is_repeated_at_every_seed_with_the_same_length():
    specs = {s["id"]: s for s in plan()}
    workloads = ("A", "B", "half steps", "double steps", "two prefills")
    for workload in workloads:
        for policy in ("decode only", "FR-FCFS", "Fabric-QoS"):
            first = specs[seed_run_key(workload, policy, 1)]
            for seed in (2, 3):
                other = specs[seed_run_key(workload, policy, seed)]
                assert other["params"]["seed"] == seed
                assert other["kind"] == first["kind"] and other["policy"] == first["policy"]
                rest = {k: v for k, v in other["params"].items() if k != "seed"}
                assert rest == first["params"], (workload, policy, seed)
    # The knob row: the double-step workload with the decodes guaranteed 1.5x, every seed, same length.
    double = specs[seed_run_key("double steps", "Fabric-QoS", 1)]["params"]
    for seed in (1, 2, 3):
        knob = specs[seed_run_key("double steps, decode guarantee x1.5", "Fabric-QoS", seed)]["params"]
        assert knob == dict(double, seed=seed, decode_headroom=Fraction(3, 2)), seed
    assert sum(s["group"] == "seeds" for s in specs.values()) == len(workloads) * 3 * 2 + 3
    assert not any(s["group"] == "seeds" for s in plan(quick=True))


def _fake_run(latencies, jobs=()):
    """A run result with only what pooling reads: decode steps and prefill jobs of 1 MiB."""
    return {"steps": [(5, i, lat) for i, lat in enumerate(latencies)],
            "jobs": [(0, 0, s, e) for s, e in jobs], "job_bytes": {0: 1 << 20}}


def test_pooling_takes_the_steps_and_jobs_of_all_seeds_as_one_sample():
    a = _fake_run(range(1, 101), jobs=[(0, 1 << 16)])
    b = _fake_run(range(101, 201), jobs=[(0, 1 << 15), (10, 10)])  # a job of no duration is skipped
    p = pooled([a, b])
    # 99th percentile of 1..200 by nearest rank: the 198th value (ceil(0.99 * 200)).
    assert p["steps"] == 200 and p["p99"] == 198
    # 1 MiB over 2^16 and 2^15 memory cycles at 1.6 GHz: 25.6 and 51.2 GB/s.
    assert p["job_gbps"] == pytest.approx((2 ** 20 / 2 ** 16 + 2 ** 20 / 2 ** 15) / 2 * 1.6)


def test_pooled_rows_judge_the_targets_over_every_seed():
    results = {}
    for seed in (1, 2, 3):
        alone = range(100, 200)
        # Seed 3's fabric-qos tail is 1.5x its decode-only tail; pooled, the tail stays under 1.2x.
        qos = [x * (1.5 if seed == 3 and x >= 198 else 1) for x in alone]
        results[seed_run_key("A", "decode only", seed)] = _fake_run(alone)
        results[seed_run_key("A", "FR-FCFS", seed)] = _fake_run(alone, jobs=[(0, 1000)])
        results[seed_run_key("A", "Fabric-QoS", seed)] = _fake_run(qos, jobs=[(0, 1100)])
    (row,) = pooled_rows(results)
    assert row["workload"] == "A" and row["steps"] == 300
    assert row["p99_ratio_per_seed"][2] > 1.2 and row["p99_ratio_per_seed"][0] == pytest.approx(1)
    assert row["p99_ratio"] < 1.2
    assert row["prefill_ratio"] == pytest.approx(1000 / 1100)
    assert row["met"]
    # A knob row takes its decode-only and FR-FCFS baselines from the workload it varies.
    knob = "double steps, decode guarantee x1.5"
    for seed in (1, 2, 3):
        results[seed_run_key("double steps", "decode only", seed)] = _fake_run(range(100, 200))
        results[seed_run_key("double steps", "FR-FCFS", seed)] = _fake_run(range(100, 200), jobs=[(0, 1000)])
        results[seed_run_key(knob, "Fabric-QoS", seed)] = _fake_run(range(200, 300), jobs=[(0, 1000)])
    rows = {r["workload"]: r for r in pooled_rows(results)}
    assert set(rows) == {"A", knob}    # the double-step workload itself has no Fabric-QoS runs here
    assert rows[knob]["p99_ratio"] == pytest.approx((200 + 0.99 * 99) / (100 + 0.99 * 99), rel=1e-3)
    assert not rows[knob]["met"] and rows[knob]["prefill_ratio"] == pytest.approx(1)
    del results[seed_run_key("A", "FR-FCFS", 2)]
    assert "A" not in {r["workload"] for r in pooled_rows(results)}  # a workload missing a seed is not judged


def test_isolation_variants_change_only_the_writes_the_knobs_or_the_seed():
    from kvfabric.sim.studies.focused import isolation

    plain, dry = isolation("Fabric-QoS", 1000), isolation("Fabric-QoS", 1000, writes=False)
    assert [t.write_share for t in plain.tenants] == [4, 0, 0, 0]
    assert [t.write_share for t in dry.tenants] == [0, 0, 0, 0]
    knobs = QosKnobs(drain_interval=None)
    assert isolation("Fabric-QoS", 1000, knobs=knobs).policy.knobs is knobs
    with pytest.raises(ValueError, match="Fabric-QoS only"):
        isolation("Fabric", 1000, knobs=knobs)
    # Another seed draws other random addresses and changes nothing else.
    other = isolation("Fabric-QoS", 1000, seed=2)
    draws = [[t.rng.random() for _ in range(5)] for t in (plain.tenants[1], other.tenants[1])]
    assert draws[0] != draws[1]
    assert [t.write_share for t in other.tenants] == [4, 0, 0, 0]
    specs = {s["id"]: s["params"] for s in plan()}
    assert specs["isolation/Fabric-QoS, no writes"]["writes"] is False
    assert specs["isolation/Fabric-QoS, no drain interval"]["drain_interval"] is None
    assert specs["QoS-entries/no drain interval"]["drain_interval"] is None
    assert [specs[f"isolation/Fabric-QoS, seed {s}"]["seed"] for s in (1, 2, 3)] == [1, 2, 3]
    # The knob reaches the controller the run builds.
    system, *_ = build_run(dict(kind="isolation", policy="Fabric-QoS",
                                params=dict(cycles=1000, drain_interval=None)), Scale(25))
    assert system.channel.drain.interval is None
    system, *_ = build_run(dict(kind="isolation", policy="Fabric-QoS", params=dict(cycles=1000)), Scale(25))
    assert system.channel.drain.interval == QosKnobs().drain_interval


def test_isolation_target_is_judged_on_the_worst_default_seed():
    from kvfabric.sim.studies.report import isolation_judged

    def run(shares):
        # timeline rows: (window, bytes per tenant); the first and last windows are skipped
        rows = [(0, [1, 1, 1, 1])] + [(i + 1, [int(x * 1000) for x in r]) for i, r in enumerate(shares)]
        return {"timeline": rows + [(len(rows), [1, 1, 1, 1])], "bytes": [0] * 4}

    even = run([(0.25, 0.25, 0.25, 0.25)] * 3)
    off = run([(0.25, 0.25, 0.25, 0.25), (0.26, 0.24, 0.25, 0.25)])   # 4 % in one window
    results = {"isolation/Fabric-QoS": even, "isolation/Fabric-QoS, seed 2": off,
               "isolation/Fabric-QoS, no drain interval": run([(0.5, 0.5, 0, 0)])}
    worst, n, labels = isolation_judged(results)
    assert n == 2 and worst == pytest.approx(0.04)
    assert labels == ["Fabric-QoS", "Fabric-QoS, seed 2"]
    assert isolation_judged({"isolation/Fabric": even}) is None


def test_scale_maps_essay_time_consistently():
    scale = Scale(25)
    assert scale.cycles(1) == 64_000          # 1 essay ms = 40 us at 1.6 GHz
    assert scale.essay_ms(64_000) == 1
    a = setup_a(scale)
    # The prefill takes 24% of a period at channel peak (32 B per cycle).
    job = a.make_tenants()[0].job_transactions * 128
    assert abs(Fraction(job, 32 * a.horizon // 2) - Fraction(24, 100)) < Fraction(1, 1000)
    b = setup_b(scale)
    assert len(b.make_tenants()) == 8 and b.cxl() is not None
    # The headroom knob raises every decode's guarantee, nothing else.
    base, more = setup_a(scale).contract["tenant"], setup_a(scale, decode_headroom=Fraction(3, 2)).contract["tenant"]
    for t, u in zip(base, more):
        scale_by = Fraction(3, 2) if t["name"].startswith("decode") else 1
        assert u["guaranteed_gbps"] == pytest.approx(t["guaranteed_gbps"] * float(scale_by), abs=1e-3), t["name"]


@pytest.fixture(scope="module")
def tiny_results():
    specs = [
        dict(id="A/decode only", group="A", label="decode only", kind="setup_a", policy="FR-FCFS",
             params=dict(periods=Fraction(12, 100), prefill=False)),
        dict(id="A/FCFS", group="A", label="FCFS", kind="setup_a", policy="FCFS",
             params=dict(periods=Fraction(12, 100))),
        dict(id="A/Fabric", group="A", label="Fabric", kind="setup_a", policy="Fabric",
             params=dict(periods=Fraction(12, 100))),
        dict(id="A/Fabric-QoS", group="A", label="Fabric-QoS", kind="setup_a", policy="Fabric-QoS",
             params=dict(periods=Fraction(12, 100))),
        dict(id="QoS-entries/entries 8/32/64", group="QoS-entries", label="entries 8/32/64", kind="setup_a",
             policy="Fabric-QoS", params=dict(periods=Fraction(5, 100), entries=(8, 32, 64))),
        dict(id="isolation/Fabric", group="isolation", label="Fabric", kind="isolation",
             policy="Fabric", params=dict(cycles=40_000)),
        dict(id="admission/limit 0.85", group="admission", label="limit 0.85", kind="admission",
             policy="Fabric", params=dict(limit=Fraction(85, 100), job_bytes=1 << 16, cycles=30_000)),
    ]
    return specs, dict(run_spec(s) for s in specs)


def test_tiny_runs_measure_what_the_report_needs(tiny_results):
    specs, results = tiny_results
    fcfs = derive(results["A/FCFS"])
    assert fcfs["steps"] > 20 and fcfs["contended"] > 0
    assert 0 < fcfs["busy_util"] <= 1 and 0 <= fcfs["conflict"] <= 1
    assert derive(results["A/decode only"])["p99"] < fcfs["p99"]
    assert results["A/Fabric"]["grants"][0] > 0
    qos = results["A/Fabric-QoS"]
    assert sum(qos["class_grants"]) == sum(qos["grants"]) > 0
    assert qos["class_grants"][1] > 0 and qos["class_grants"][2] > 0  # guaranteed and burst grants
    # A credit per 256 B request the entries hold (8 each: the studies' REQUEST_BYTES).
    assert results["QoS-entries/entries 8/32/64"]["credit_limits"] == [1, 4, 8]
    # Every decode step's split adds up to its latency.
    steps = sorted(lat for _, _, lat in qos["steps"])
    assert sorted(sum(p) for p in qos["step_parts"]) == steps
    adm = results["admission/limit 0.85"]
    assert adm["rejected"] == 3  # 5 x 1/6 of the channel fit under 0.85, 8 were asked


def test_report_is_written_with_claims_and_plots(tiny_results, tmp_path):
    specs, results = tiny_results
    path = write_report(results, specs, out_dir=str(tmp_path), quick=True, wall_s=1.0, jobs=1,
                        compression=25)
    text = open(path).read()
    assert "| Essay claim | Our measurement | Configuration | Verdict |" in text
    assert "1 essay ms = 40 µs simulated" in text
    for png in ("decode_latency_cdf.png", "bandwidth_share.png", "bank_conflicts.png",
                "decode_p99_frontier.png"):
        assert (tmp_path / png).stat().st_size > 1000
    assert "## Issue #14: the QoS controller behind the fabric" in text
    assert "| A/Fabric-QoS |" in text
    report = json.loads((tmp_path / "experiments.json").read_text())
    # The revision the runs were made at (none given: the checkout's, now).
    assert report["revision"] == revision()["revision"] and isinstance(report["dirty"], bool)
    assert f"Revision: {describe(report)}." in text
    runs = report["runs"]
    assert sorted(r["id"] for r in runs) == sorted(results)
    qos = next(r for r in runs if r["id"] == "A/Fabric-QoS")
    assert qos["p99_ns"] > qos["p50_ns"] > 0 and qos["prefill_gbps"] > 0
    assert set(qos["tail_split_ns"]) == {"arbiter", "admission", "queue", "service"}


def test_report_is_byte_for_byte_the_same_with_1_2_4_workers_and_any_completion_order(tmp_path):
    """Issue #29: the sweep layer gives the same experiments.json and .md, byte
    for byte once the timing fields (wall, CPU, worker count) are fixed, with
    1, 2 and 4 local workers, with the tasks submitted in a shuffled order
    (so they complete in another), and with the results handed to the report
    in a shuffled order."""
    import random

    from kvfabric.sim.studies.experiments import plan, run_all
    from kvfabric.sim.studies.report import write_report

    # Five of the quick plan's shortest runs (about half a CPU second each).
    wanted = ("A/decode only", "idle/FR-FCFS, stream", "idle/Fabric, stream", "idle/FR-FCFS, random",
              "idle/Fabric, random")
    specs = [s for s in plan(True) if s["id"] in wanted]
    assert len(specs) == len(wanted)
    seed = 29
    print(f"shuffle seed={seed}")
    rng = random.Random(seed)
    shuffled = rng.sample(specs, len(specs))
    rev = {"revision": "0000000", "dirty": False}

    def report(results, name):
        """The report of ``results`` with every timing field fixed, as bytes."""
        untimed = {k: {**v, "cpu_s": 0.0} for k, v in results.items()}
        out = tmp_path / name
        write_report(untimed, specs, out_dir=str(out), quick=True, wall_s=0.0, jobs=1, compression=25,
                     only="some", revision=rev)
        return (out / "experiments.json").read_bytes(), (out / "experiments.md").read_bytes()

    runs = {f"{jobs} workers": run_all(specs, jobs) for jobs in (1, 2, 4)}
    runs["2 workers, shuffled tasks"] = run_all(shuffled, 2)
    one = runs["1 workers"]
    runs["results shuffled"] = {k: one[k] for k in rng.sample(list(one), len(one))}
    reports = {name: report(results, name.replace(" ", "_").replace(",", "")) for name, results in runs.items()}
    assert all(set(r) == {s["id"] for s in specs} for r in runs.values())
    assert all(r == reports["1 workers"] for r in reports.values()), \
        [name for name, r in reports.items() if r != reports["1 workers"]]


def test_coordinator_figures_read_rates_and_the_reaction_from_the_timeline():
    """Issue #27's figures from a run's timeline: the mean of whole windows after
    two epochs and the latency (before and after a move), and the reaction, from
    the move to the first window from which the moved tenant stays at 95 %."""
    from kvfabric.sim.studies.metrics import coordinator_figures

    win, epoch = 1000, 2048                     # memory cycles per window; fabric cycles per epoch
    settle = (2 * epoch + 1024) * 4             # 20,480 memory cycles
    move, horizon = 40_000, 100_000
    rate = {w: (40.0 if w * win < move else 10.0 if w * win < move + 7000 else 39.0) for w in range(100)}
    res = {"timeline_window": win, "horizon": horizon, "memory_per_fabric": 4, "epoch_cycles": epoch,
           "move_cycle": move, "guaranteed_gbps": [40.0, 10.0], "bytes": [0, 0],
           "timeline": [(w, [int(r * win / 1.6), int(10 * win / 1.6)]) for w, r in rate.items()]}
    f = coordinator_figures(res)
    assert f["gbps_before"][0] == pytest.approx(40.0) and f["gbps"][0] == pytest.approx(39.0)
    assert f["share"] == [pytest.approx(39 / 40), pytest.approx(1.0)]
    assert f["reaction_us"] == pytest.approx(7000 * 0.625 / 1000)
    assert f["reaction_epochs"] == pytest.approx(7000 / (epoch * 4))
    assert settle < move
    res["timeline"] = [(w, [int(10 * win / 1.6)] * 2) for w in range(100)]
    assert coordinator_figures(res)["reaction_us"] is None


def test_moved_to_channels_carried_against_the_guarantees_they_ask():
    """The shift row's channel figures: per channel and tenant the mean GB/s of
    the whole windows after the move's settling (a window without data: 0),
    and the report's sentence comparing what the moved-to channels carried
    with what the two prefills' guarantees and the decodes ask of them."""
    from kvfabric.sim.studies.metrics import coordinator_figures
    from kvfabric.sim.studies.report import _moved_to_channels

    win, epoch = 1000, 2048
    move, horizon = 39_520, 100_000      # after the move and its settling (20,480): windows 60 .. 99
    per_window = {c: [int(g * win / 1.6) for g in ((20.0, 11.0, 4.0) if c in (2, 3) else (0.0, 11.0, 4.0))]
                  for c in range(4)}
    res = {"timeline_window": win, "horizon": horizon, "memory_per_fabric": 4, "epoch_cycles": epoch,
           "move_cycle": move, "guaranteed_gbps": [40.0, 48.0, 8.0], "bytes": [0, 0, 0], "moved_to": [2, 3],
           "timeline": [(w, [0, 0, 0]) for w in range(100)],
           # channel 1 sends nothing in every other window after the move
           "channel_timeline": [[[w, per_window[c]] for w in range(100) if not (c == 1 and w >= 60 and w % 2)]
                                for c in range(4)]}
    f = coordinator_figures(res)
    assert f["moved_to"] == [2, 3]
    assert f["channels_after_gbps"][2] == [pytest.approx(20.0), pytest.approx(11.0), pytest.approx(4.0)]
    assert f["channels_after_gbps"][1] == [0.0, pytest.approx(5.5), pytest.approx(2.0)]
    text = _moved_to_channels(f, ["mover", "spread", "decode"])
    # 40/2 + 48/4 + 4 = 36 GB/s asked of channels 2 and 3, which carried 35
    assert "channels 2 and 3 carried 35.0 and 35.0 GB/s" in text
    assert "got 5.5-11.0 GB/s on each" in text and "ask 36.0 GB/s" in text and "more than they carried" in text


def test_setups_a_and_b_on_8_channels_are_planned_and_reported():
    """Issue #27: setups A and B on 8 channels (each channel the one-channel
    load, the contract's totals x8, the coordinator on and off), and the report
    judging them by issue #14's targets against their own 8-channel baselines."""
    from kvfabric.sim.studies.report import coordinator_section

    specs = {s["id"]: s for s in plan()}
    labels = ("decode only", "FR-FCFS", "Fabric-QoS, coordinator on", "Fabric-QoS, coordinator off")
    for setup, kind in (("A", "setup_a"), ("B", "setup_b")):
        runs = [specs[f"coordinator-setups/{setup}, 8 channels, {label}"] for label in labels]
        assert [s["kind"] for s in runs] == [kind] * 4
        assert [s["policy"] for s in runs] == ["FR-FCFS", "FR-FCFS", "Fabric-QoS", "Fabric-QoS"]
        assert {s["params"]["channels"] for s in runs} == {8}
        assert [s["params"].get("coordinator", False) for s in runs] == [False, False, True, False]
        assert runs[0]["params"]["prefill"] is False
        assert len({s["params"]["periods"] for s in runs}) == 1   # one length: the ratios compare like with like
        # The judged three again at seeds 2 and 3, the same otherwise, for the report to pool.
        for label, run in zip(labels[:3], runs):
            for seed in (2, 3):
                again = specs[f"coordinator-setups/{setup}, 8 channels, {label}, seed {seed}"]
                assert again["params"] == dict(run["params"], seed=seed) and again["policy"] == run["policy"]
        assert f"coordinator-setups/{setup}, 8 channels, {labels[3]}, seed 2" not in specs
    assert not any(s["group"] == "coordinator-setups" for s in plan(quick=True))
    # Built, not run: 8 channels, each with the one-channel registers, the coordinator over them.
    scale = Scale(25)
    system, horizon, extract, _ = build_run(specs["coordinator-setups/A, 8 channels, Fabric-QoS, coordinator on"],
                                            scale)
    one, *_ = build_run(dict(kind="setup_a", policy="Fabric-QoS", params=dict(periods=1)), scale)
    assert len(system.policies) == 8 and extract(system) == {"channels": 8, "coordinator_results": 0}
    config = system.policies[0].compiled.config
    assert config.coord_enable == 1 and config.coord_epoch_cycles == 8192
    assert config == dataclasses.replace(one.policy.compiled.config, coord_enable=1, coord_epoch_cycles=8192)
    steps = [t.step_bytes for t in system.tenants if t.kind == "decode"]
    assert steps == [8 * t.step_bytes for t in one.tenants if t.kind == "decode"]
    b, *_ = build_run(specs["coordinator-setups/B, 8 channels, Fabric-QoS, coordinator off"], scale)
    assert len(b.cxl) == 8 and not b.policies[0].compiled.config.coord_enable

    # The report from made-up figures: p99 in cycles, prefill job GB/s.
    def figures(p99, job_gbps):
        return dict(p99=p99, job_gbps=job_gbps, **{f"tail_{n}": 1.0 for n in ("arbiter", "admission", "queue",
                                                                               "service")})

    by, results = {}, {}
    for setup, qos in (("A", (1100, 290)), ("B", (1300, 300))):
        prefix = f"coordinator-setups/{setup}, 8 channels, "
        for label, f in (("decode only", (1000, float("nan"))), ("FR-FCFS", (3000, 320)),
                         ("Fabric-QoS, coordinator on", qos), ("Fabric-QoS, coordinator off", (1100, 300))):
            by[prefix + label] = figures(*f)
            results[prefix + label] = dict(description=f"setup {setup}", horizon=1_000_000, channels=8,
                                           coordinator_results=19 if label.endswith(" on") else 0)
    lines = []
    coordinator_section(lines.append, results, by)
    text = "\n".join(lines)
    assert "## Issue #27: contracts across channels (the coordinator)" in text
    assert "### Setup A on 8 channels" in text and "### Setup B on 8 channels" in text
    # A: 1.10x at 91 %: met; B: 1.30x at 94 %: not met; FR-FCFS itself 3.00x: not met.
    assert "| coordinator-setups/A, 8 channels, Fabric-QoS, coordinator on | 688 | 1.10 | 290.0 | 91% |" in text
    row = next(x for x in lines if x.startswith("| coordinator-setups/A, 8 channels, Fabric-QoS, coordinator on"))
    assert row.endswith(" met |") and not row.endswith("not met |")
    row = next(x for x in lines if x.startswith("| coordinator-setups/B, 8 channels, Fabric-QoS, coordinator on"))
    assert "| 1.30 | 300.0 | 94% |" in row and row.endswith("not met |")
    assert "Coordinator results applied: Fabric-QoS, coordinator on 19." in text
    assert "coordinator-setups/A, 8 channels, decode only |" not in text   # the baseline is the line above the table


def test_even_mapping_runs_at_six_seeds_of_full_length():
    # Issue #27's even-mapping decode p99 (on against off) is pooled over
    # seeds 1-6 of one length: one seed's p99 rests on about 110 steps.
    from kvfabric.sim.studies.experiments import plan
    specs = {s["id"]: s for s in plan()}
    for on in ("on", "off"):
        runs = [specs[f"coordinator/even, coordinator {on}"]] + [
            specs[f"coordinator/even, coordinator {on}, seed {seed}"] for seed in range(2, 7)]
        assert [r["params"].get("seed", 1) for r in runs] == [1, 2, 3, 4, 5, 6]
        assert {r["params"]["epochs"] for r in runs} == {20}
    assert "coordinator/even, coordinator on, seed 7" not in specs


def test_only_selects_run_ids_with_commas():
    # Run ids contain commas: one id as it is, or ids separated by ';'.
    from kvfabric.sim.studies.experiments import plan, select
    specs = plan()
    ids = lambda only: [s["id"] for s in select(specs, only)]  # noqa: E731
    assert ids("coordinator/even, coordinator on") == ["coordinator/even, coordinator on"]
    assert ids("B/Fabric, kind-aware; coordinator/decode only") == ["B/Fabric, kind-aware",
                                                                    "coordinator/decode only"]
    assert ids("A/Fabric-QoS,B/")[0] == "A/Fabric-QoS" and all(i.startswith("B/") for i in ids("A/Fabric-QoS,B/")[1:])
    assert ids("no such run") == []


def test_merge_into_replaces_only_the_rerun_runs_rows_and_section(tmp_path):
    """``--merge-into`` (sim/studies/experiments.py ``merge_report``): the
    re-run group's JSON entries, per-run rows, section and plot replace the
    full report's; every other line stays; the revision line is followed by
    a note naming the runs, the revision and the command, once per group
    however often it is merged."""
    from kvfabric.sim.studies.experiments import merge_report

    def report(d, rev, value, extra=()):
        d.mkdir()
        runs = [{"id": i, "group": i.split("/")[0], "value": value} for i in ("A/x", "coordinator/a", *extra)]
        (d / "experiments.json").write_text(json.dumps({"revision": rev, "dirty": False, "runs": runs}))
        (d / "experiments.md").write_text(
            f"# T\n\nRevision: `{rev}`.\n\n## Issue #14: setups\n\nsetup text {value}\n\n"
            f"## Issue #27: contracts across channels (the coordinator)\n\ncoordinator text {value}\n\n"
            f"## Per-run measurements\n\n| Run | v |\n|---|---|\n| A/x | {value} |\n| coordinator/a | {value} |\n")
        (d / "coordinator_shift.png").write_bytes(value.encode())

    report(tmp_path / "full", "aaa", "old")
    report(tmp_path / "part", "bbb", "new")
    part = json.loads((tmp_path / "part" / "experiments.json").read_text())
    part["runs"] = [r for r in part["runs"] if r["id"] != "A/x"]
    (tmp_path / "part" / "experiments.json").write_text(json.dumps(part))
    for _ in range(2):
        merge_report(tmp_path / "part", tmp_path / "full", "cmd --only coordinator/")
    md = (tmp_path / "full" / "experiments.md").read_text()
    print(md)
    assert "setup text old" in md and "| A/x | old |" in md
    assert "coordinator text new" in md and "coordinator text old" not in md and "| coordinator/a | new |" in md
    assert md.count("Merged: the runs `coordinator/a` were re-run at revision `bbb`") == 1
    assert "Revision: `aaa`.\n\nMerged: " in md and "\n\n\n" not in md
    assert "`cmd --only coordinator/`" in md and md.index("Revision: `aaa`") < md.index("Merged:")
    full = json.loads((tmp_path / "full" / "experiments.json").read_text())
    assert full["revision"] == "aaa" and [r["value"] for r in full["runs"]] == ["old", "new"]
    assert full["merged"] == [{"revision": "bbb", "dirty": False, "command": "cmd --only coordinator/",
                               "runs": ["coordinator/a"]}]
    assert (tmp_path / "full" / "coordinator_shift.png").read_bytes() == b"new"


def test_merge_into_keeps_an_earlier_note_for_the_runs_not_rerun(tmp_path):
    """Two groups merged together, then one of them again: the first note
    still names the other group's runs (in the Markdown and the JSON), the
    second the group re-run."""
    from kvfabric.sim.studies.experiments import merge_report

    ids = ["A/x", "B/y"]    # groups without a section of their own

    def report(d, rev, runs):
        d.mkdir()
        (d / "experiments.json").write_text(json.dumps({"revision": rev, "dirty": False, "runs": [
            {"id": i, "group": i.split("/")[0]} for i in runs]}))
        (d / "experiments.md").write_text(f"# T\n\nRevision: `{rev}`.\n\n## Per-run measurements\n\n| Run | v |\n"
                                          f"|---|---|\n" + "".join(f"| {i} | {rev} |\n" for i in runs))

    report(tmp_path / "full", "aaa", ids)
    report(tmp_path / "both", "bbb", ids)
    report(tmp_path / "one", "ccc", ids[:1])
    merge_report(tmp_path / "both", tmp_path / "full", "cmd both")
    merge_report(tmp_path / "one", tmp_path / "full", "cmd one")
    md = (tmp_path / "full" / "experiments.md").read_text()
    print(md)
    assert "Merged: the runs `B/y` were re-run at revision `bbb` (`cmd both`)" in md
    assert "Merged: the runs `A/x` were re-run at revision `ccc` (`cmd one`)" in md
    assert md.count("Merged: ") == 2 and "\n\n\n" not in md
    full = json.loads((tmp_path / "full" / "experiments.json").read_text())
    assert [(m["revision"], m["runs"]) for m in full["merged"]] == [("bbb", ids[1:]), ("ccc", ids[:1])]


def test_setups_on_8_channels_pool_seeds_1_to_3_from_their_steps_and_jobs():
    """The pooled line's figures from made-up runs: decode-only steps 1..100 at
    each seed, Fabric-QoS 1..100 at seeds 1 and 2 and 101..200 at seed 3, so
    the pooled p99 is the 297th smallest of 300 (197: only 198, 199 and 200
    are above it) against decode-only's (99, the value at ranks 295-297);
    one prefill job per run, FR-FCFS 10 GB/s, Fabric-QoS 9 at seeds 1-2 and
    6 at seed 3: 8 / 10 = 80 %, not met.  The report prints the line under
    the setup's table."""
    from kvfabric.sim.studies.report import coordinator_section, setup_seeds_pooled

    prefix = "coordinator-setups/A, 8 channels, "

    def run(lats, gbps):
        # job_rates: job_bytes / (end - start) * 1.6 GB/s per byte per cycle.
        return dict(steps=[(0, 0, x) for x in lats], jobs=[(0, 0, 0, 1600)], job_bytes={0: gbps * 1000},
                    description="setup A", horizon=1_000_000, channels=8, coordinator_results=0)

    base = list(range(1, 101))
    results = {}
    for seed, qos_lat, qos_gbps in ((1, base, 9), (2, base, 9), (3, [x + 100 for x in base], 6)):
        tail = "" if seed == 1 else f", seed {seed}"
        results[f"{prefix}decode only{tail}"] = run(base, 0)
        results[f"{prefix}FR-FCFS{tail}"] = run(base, 10)
        results[f"{prefix}Fabric-QoS, coordinator on{tail}"] = run(qos_lat, qos_gbps)
    row = setup_seeds_pooled(results, prefix)
    assert row["steps"] == 300
    assert row["p99_ratio"] == pytest.approx(197 / 99)
    assert row["prefill_ratio"] == pytest.approx(0.8) and not row["met"]
    assert row["p99_ratio_per_seed"] == pytest.approx([1, 1, 199 / 99])
    assert row["prefill_ratio_per_seed"] == pytest.approx([0.9, 0.9, 0.6])
    by = {k: dict(p99=99.0, job_gbps=9.0, **{f"tail_{n}": 1.0 for n in ("arbiter", "admission", "queue", "service")})
          for k in results}
    lines = []
    coordinator_section(lines.append, results, by)
    assert any(line.startswith("Seeds 1-3 pooled (300 steps of Fabric-QoS, coordinator on): 1.99x decode-only "
                               "(per seed 1.00 / 1.00 / 2.01), prefill 80% of FR-FCFS (per seed 90% / 90% / 60%): "
                               "targets not met.") for line in lines)
    assert not any(", seed " in line for line in lines if line.startswith("| ")), "seed 1's table only"
    del results[f"{prefix}FR-FCFS, seed 3"]
    assert setup_seeds_pooled(results, prefix) is None, "a missing seed leaves the line out"


def test_merge_into_keeps_the_setups_section_tables_and_replaces_their_subsections(tmp_path):
    """Re-running 'coordinator-setups/' replaces the two setups' subsections of
    the issue #27 section (not the coordinator's own runs before them) and
    their per-run rows; a run's row in its section's table (another width)
    is the section's, not the per-run table's (the first --merge-into of this
    group wrote per-run rows into the section tables)."""
    from kvfabric.sim.studies.experiments import merge_report

    ids = ["coordinator/a", "coordinator-setups/A, 8 channels, q", "coordinator-setups/B, 8 channels, q"]

    def report(d, rev, value, runs):
        d.mkdir()
        (d / "experiments.json").write_text(json.dumps({"revision": rev, "dirty": False, "runs": [
            {"id": i, "group": i.split("/")[0], "value": value} for i in runs]}))
        sections = "".join(f"### Setup {s} on 8 channels\n\nsetup {s} {value}\n\n| Run | p99 | ratio |\n"
                           f"|---|---|---|\n| coordinator-setups/{s}, 8 channels, q | {value} | 1 |\n\n"
                           f"Seeds pooled {s} {value}\n\n" for s in "AB" if f"coordinator-setups/{s}, 8 channels, q" in runs)
        per_run = "".join(f"| {i} | {value} |\n" for i in runs)
        (d / "experiments.md").write_text(
            f"# T\n\nRevision: `{rev}`.\n\n## Issue #27: contracts across channels (the coordinator)\n\n"
            f"coordinator text {value}\n\n{sections}## Per-run measurements\n\n| Run | v |\n|---|---|\n{per_run}")

    report(tmp_path / "full", "aaa", "old", ids)
    report(tmp_path / "part", "bbb", "new", ids[1:])
    merge_report(tmp_path / "part", tmp_path / "full", "cmd --only coordinator-setups/")
    md = (tmp_path / "full" / "experiments.md").read_text()
    print(md)
    assert "coordinator text old" in md and "| coordinator/a | old |" in md
    for s in "AB":
        assert f"setup {s} new" in md and f"Seeds pooled {s} new" in md and f"setup {s} old" not in md
        assert f"| coordinator-setups/{s}, 8 channels, q | new | 1 |" in md      # the section's table row
        assert f"| coordinator-setups/{s}, 8 channels, q | new |\n" in md         # the per-run row
    assert md.index("### Setup A") < md.index("### Setup B") < md.index("## Per-run measurements")


def test_merge_into_keeps_a_setups_one_channel_line():
    """A setup's line about its one-channel runs (another group, not re-run)
    survives a merge of the setups' section, which the ``--only`` report
    cannot write without those runs; a line the new section has is its own."""
    from kvfabric.sim.studies.experiments import _kept_lines

    old = "### Setup A\n\nSeeds pooled old\n\nApplied: 3.\nOne channel (setup A above): 0.99x.\n\n"
    new = "### Setup A\n\nSeeds pooled new\n\nApplied: 3.\n\n"
    assert _kept_lines(new, old) == ("### Setup A\n\nSeeds pooled new\n\nApplied: 3.\n"
                                     "One channel (setup A above): 0.99x.\n\n")
    mine = new.replace("Applied: 3.\n", "Applied: 3.\nOne channel (setup A above): 1.01x.\n")
    assert _kept_lines(mine, old) == mine
