"""scripts/axi_timing.py: the medians, the 95 % verdict and the report, from hand-made figures
(the place and route itself is a benchmark, never run by the tests)."""

from kvfabric.scripts.axi_timing import compare, median_fmax, report_md


def test_median_skips_unrouted_seeds_and_names_them():
    median, failed = median_fmax({"1": 60.0, "2": None, "3": 50.0})
    assert median == 55.0
    assert failed == [2]
    assert median_fmax({"1": None}) == (None, [1])


def test_verdict_is_met_at_95_percent_and_not_below():
    assert compare(100.0, 95.0)["met"]
    assert not compare(100.0, 94.9)["met"]
    assert abs(compare(80.0, 60.0)["ratio"] - 0.75) < 1e-12
    # Nothing routed: no verdict can be met.
    assert compare(None, 50.0) == {"ratio": None, "met": False}


def test_report_shows_each_seed_the_ratio_and_the_verdict():
    rep = {"tenants": 8, "data_width": 64, "seeds": [1, 2], "command": "python -m x", "revision": "abc",
           "designs": {
               "bare": {"top": "kvfabric", "fmax_by_seed": {"1": 60.0, "2": 58.0}, "fmax_median_mhz": 59.0,
                        "trellis_comb": 17000, "trellis_ff": 6000, "critical_path": None, "message": None},
               "axi": {"top": "kvfabric_axi", "fmax_by_seed": {"1": 50.0, "2": None}, "fmax_median_mhz": 50.0,
                       "trellis_comb": 30000, "trellis_ff": 9000,
                       "critical_path": {"start": "a", "end": "b", "delay_ns": 20.0, "logic_ns": 5.0,
                                         "routing_ns": 15.0},
                       "message": "1 of 2 seeds did not finish routing"}},
           "verdict": {"ratio": 50 / 59, "met": False}}
    md = report_md(rep)
    assert "**NOT met**" in md and "0.847" in md
    assert "| axi | `kvfabric_axi` | 50.00 | - | 50.00 | 30,000 | 9,000 | a -> b, 20.00 ns" in md
    assert "1 of 2 seeds did not finish routing" in md
