"""The soak's segments (scripts/soak.py, issue #29): seeds from the segment's
own index, a mismatch named by segment and seed, wall time predicted by list
scheduling of the measured segment times."""

from kvfabric.scripts.soak import segment_seed, summarize_sim
from kvfabric.sweep import predicted_wall


def _segment(k, *, seconds=10.0, wall=12.0, mismatch=None):
    return {"segment": k, "seed": segment_seed(3, k), "cycles": 500_000, "events": 1, "wall_seconds": wall,
            "seconds": seconds, "cpu_seconds": seconds / 2, "model_seconds": 1.0, "grants": 100,
            "model_grants": 100, "waiting_at_end": 0, "mismatch": mismatch}


def test_segment_seeds_are_distinct_and_depend_only_on_seed_and_index():
    assert segment_seed(3, 7) == segment_seed(3, 7) == 300_007
    assert len({segment_seed(s, k) for s in (1, 2) for k in range(1000)}) == 2000


def test_predicted_wall_is_list_scheduling_of_the_segment_times():
    assert predicted_wall([4, 3, 3, 2], 2) == 6        # {4, 2} and {3, 3}
    assert predicted_wall([5, 1, 1, 1], 8) == 5        # never below the longest segment
    assert predicted_wall([2] * 10, 3) == 8            # ceil(10 / 3) segments on the busiest
    assert predicted_wall([], 4) == 0


def test_summary_names_the_first_mismatching_segment_and_its_seed():
    segs = [_segment(0), _segment(1, mismatch="cycle 1234 channel 1: tenant 2 != 3"), _segment(2)]
    row = summarize_sim("icarus", segs, build_seconds=1.0)
    assert (row["cycles"], row["segments"], row["mismatches"], row["grants"]) == (1_500_000, 3, 1, 300)
    assert row["first_mismatch"] == "segment 1 (seed 300001): cycle 1234 channel 1: tenant 2 != 3"
    assert row["cycles_per_s"] == 50_000                       # 1.5 M cycles / 30 simulator seconds
    assert row["predicted_wall_seconds"] == {"8": 12.0, "32": 12.0, "128": 12.0}


def test_summary_of_clean_segments_has_no_mismatch():
    row = summarize_sim("verilator", [_segment(k) for k in range(20)], build_seconds=0.0)
    assert row["mismatches"] == 0 and row["first_mismatch"] is None
    assert row["predicted_wall_seconds"]["8"] == 36.0           # 20 segments of 12 s on 8 workers: 3 rounds
