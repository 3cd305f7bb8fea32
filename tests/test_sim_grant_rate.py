"""The grant-rate study (sim/studies/grant_rate.py): what it varies and how it judges."""

import pytest

from kvfabric.sim.studies import family as fam
from kvfabric.sim.studies import grant_rate as gr
from kvfabric.sim.studies.metrics import NS_PER_CYCLE


def test_a_variant_changes_the_clock_and_in_decodes_alone_only_the_prefills():
    d = fam.draw(fam.FAMILY_SEED, 1)
    alone = gr.variant_draw(d, 800, "decodes alone")
    both = gr.variant_draw(d, 450, "with prefills")
    assert alone["contract"]["fabric"]["clock_mhz"] == 800 and both["contract"]["fabric"]["clock_mhz"] == 450
    assert d["contract"]["fabric"]["clock_mhz"] == 400            # the draw itself is left alone
    assert both["contract"]["fabric"]["admission_limit"] == 0.86
    # Its requests are single transactions, the family's two: nothing else of the workload changes.
    assert d["workload"]["system"]["request_bytes"] == fam.REQUEST_BYTES == 256
    assert both["workload"]["system"]["request_bytes"] == both["contract"]["fabric"]["memory_request_bytes"] \
        == gr.REQUEST_BYTES == 128
    assert dict(both["workload"], system=d["workload"]["system"]) == d["workload"]
    assert both["contract"]["tenant"] == alone["contract"]["tenant"] == d["contract"]["tenant"]
    kinds = [(t["kind"], u["kind"]) for t, u in zip(d["workload"]["tenant"], alone["workload"]["tenant"])]
    assert ("prefill", "idle") in kinds
    assert all(new == ("idle" if old == "prefill" else old) for old, new in kinds)
    assert [t for t in alone["workload"]["tenant"] if t["kind"] == "decode"] == \
        [t for t in d["workload"]["tenant"] if t["kind"] == "decode"]
    with pytest.raises(ValueError, match="variant must be one of"):
        gr.variant_draw(d, 400, "prefills alone")


def test_the_lowest_clock_draws_are_those_drawn_at_400_mhz():
    got = gr.lowest_clock_draws(draws=8)
    clocks = [fam.draw(fam.FAMILY_SEED, k)["contract"]["fabric"]["clock_mhz"] for k in range(8)]
    assert got and got == [k for k, c in enumerate(clocks) if c == 400]
    assert set(clocks) - {400}  # and some draws are not at it


def _run(lat_by_decode):
    return {"decodes": {t: {"lat": lat} for t, lat in lat_by_decode.items()}, "utilisation": 0.5}


def test_the_worst_decode_ratio_is_the_p99_over_its_decode_only_p99_with_seeds_pooled():
    # Nearest-rank p99 of 1..100 is 99; of the pooled 1..200, 198.
    results = {(0, None, None, 1): _run({0: list(range(1, 101)), 1: list(range(1, 101))}),
               (0, None, None, 2): _run({0: list(range(101, 201)), 1: list(range(101, 201))}),
               (0, 400, "with prefills", 1): _run({0: [2 * x for x in range(1, 101)],
                                                   1: [3 * x for x in range(1, 101)]}),
               (0, 400, "with prefills", 2): _run({0: [2 * x for x in range(101, 201)],
                                                   1: list(range(101, 201))})}
    meta = {"draw": 0, "decodes": {0: {"under": False}, 1: {"under": False}}}
    ratio, decode, p99, base_p99 = gr._worst(results, meta, 400, "with prefills", (1,))
    assert (ratio, decode) == (3.0, 1)
    # Pooled: decode 0's steps are 2..400 (p99 396), decode 1's 3..300 and 101..200 (p99 294).
    ratio, decode, p99, base_p99 = gr._worst(results, meta, 400, "with prefills", (1, 2))
    assert (decode, ratio) == (0, pytest.approx(396 / 198))
    assert (p99, base_p99) == (pytest.approx(396 * NS_PER_CYCLE), pytest.approx(198 * NS_PER_CYCLE))
    # A decode under-guaranteed on purpose is not judged (the family's rule).
    meta["decodes"][0]["under"] = True
    ratio, decode, _, _ = gr._worst(results, meta, 400, "with prefills", (1, 2))
    assert (decode, ratio) == (1, pytest.approx(294 / 198))
