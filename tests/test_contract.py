"""Contract compiler: register values, rounding direction, admission control, errors."""

import copy
from fractions import Fraction

import pytest

from kvfabric.model.contract import ContractError, admit, compile_contract, load_contract

BASE = {
    "fabric": {"clock_mhz": 1000, "channels": 8, "channel_gbps": 400, "admission_limit": 0.85},
    "tenant": [{"id": 0, "name": "decode-a", "guaranteed_gbps": 120, "burst_gbps": 400,
                "burst_duration_ms": 2.0, "priority": 1, "latency_slo_us": 25}],
}


def doc(**tenant_changes):
    d = copy.deepcopy(BASE)
    d["tenant"][0].update(tenant_changes)
    return d


def test_essay_contract_registers():
    c = compile_contract(doc())
    r = c.config.tenants[0]
    # 120 GB/s over 8 channels at 1 GHz = 15 B/cycle per channel = 120 in UQ13.3.
    assert r.rate == 15 * 8
    assert r.peak_rate == 50 * 8
    # 15 GB/s x 2 ms = 30 MB per channel, UQ25.3.
    assert r.capacity == 30_000_000 * 8
    assert r.inv_weight == 256  # the only tenant: the whole channel
    assert (r.priority, r.enable, r.slo_cycles) == (1, 1, 25_000)
    assert c.config.tenants[1].enable == 0  # uncontracted tenants stay disabled


def test_rounding_never_over_promises():
    # 1 GB/s over 8 channels at 300 MHz = 0.41666 B/cycle: rate rounds up, peak rounds down.
    d = doc(guaranteed_gbps=1, burst_gbps=1.2, latency_slo_us=0.0105)
    d["fabric"]["clock_mhz"] = 300
    c = compile_contract(d)
    r = c.config.tenants[0]
    exact_rate = Fraction(1, 8) * 1000 / 300
    assert Fraction(r.rate, 8) >= exact_rate > Fraction(r.rate - 1, 8)
    exact_peak = Fraction(12, 10) / 8 * 1000 / 300
    assert Fraction(r.peak_rate, 8) <= exact_peak < Fraction(r.peak_rate + 1, 8)
    assert r.slo_cycles == 3  # 0.0105 us x 300 MHz = 3.15 cycles: a wait of 4 violates
    # Capacity is at least one maximum request so a LMAX request can ever conform.
    assert r.capacity >= c.params.pcap


def test_capacity_is_zero_without_a_guarantee_and_at_least_pcap_with_one():
    """Spec §12's CAPACITY: a tenant with guaranteed_gbps = 0 (RATE 0) has no
    guaranteed tokens (§6.2), so its capacity is 0 whatever its
    burst_duration_ms; a tenant with a guarantee, however small, keeps the
    floor of one maximum request, and a large one its exact bucket."""
    d = doc(guaranteed_gbps=0, weight=1, burst_duration_ms=2.0)
    small = {"id": 1, "name": "tiny", "guaranteed_gbps": 0.001, "burst_gbps": 0.001,
             "burst_duration_ms": 2.0, "priority": 2, "latency_slo_us": 10, "weight": 1}
    short = {"id": 2, "name": "short", "guaranteed_gbps": 1, "burst_gbps": 1,
             "burst_duration_ms": 0.01, "priority": 2, "latency_slo_us": 10, "weight": 1}
    big = {"id": 3, "name": "big", "guaranteed_gbps": 120, "burst_gbps": 400,
           "burst_duration_ms": 2.0, "priority": 1, "latency_slo_us": 25, "weight": 1}
    d["tenant"] += [small, short, big]
    c = compile_contract(d)
    none, tiny, brief, large = (c.config.tenants[i] for i in range(4))
    assert (none.rate, none.capacity) == (0, 0)
    # 400 GB/s over 8 channels at 1 GHz = 50 B/cycle: the burst cap is untouched.
    assert none.peak_rate == 50 * 8 and none.enable == 1
    # 0.001 GB/s / 8 = 1/8000 B/cycle rounds up to 1/8 (UQ13.3 1); its bucket,
    # 0.000125 GB/s x 2 ms = 250 B, is below one maximum request: PCAP.
    assert tiny.rate == 1 and tiny.capacity == 4096 * 8 == c.params.pcap
    # 1/8 GB/s x 0.01 ms = 1250 B, below PCAP too.
    assert brief.rate == 1 and brief.capacity == c.params.pcap
    # 15 GB/s x 2 ms = 30 MB per channel, above it: exact.
    assert (large.rate, large.capacity) == (15 * 8, 30_000_000 * 8)


def test_peak_never_below_rate_after_rounding():
    d = doc(guaranteed_gbps=1, burst_gbps=1)
    d["fabric"]["clock_mhz"] = 300
    r = compile_contract(d).config.tenants[0]
    assert r.peak_rate >= r.rate


def test_weights_normalised_and_default_proportional():
    d = doc()
    d["tenant"].append({"id": 3, "name": "small", "guaranteed_gbps": 40, "burst_gbps": 40,
                        "burst_duration_ms": 1, "priority": 2, "latency_slo_us": 10})
    c = compile_contract(d)
    a, b = c.config.tenants[0], c.config.tenants[3]
    assert a.inv_weight == -(-256 * 160 // 120) and b.inv_weight == 256 * 4
    assert sum(Fraction(256, t.inv_weight) for t in (a, b)) <= 1


def test_admission_rejects_and_says_by_how_much():
    d = doc(guaranteed_gbps=2000, burst_gbps=3200, burst_duration_ms=0.1)  # 2000 of 3200 GB/s
    compile_contract(d)
    new = {"id": 1, "name": "prefill", "guaranteed_gbps": 800, "burst_gbps": 800,
           "burst_duration_ms": 0.1, "priority": 2, "latency_slo_us": 100}
    with pytest.raises(ContractError) as e:
        admit(d, new)
    msg = str(e.value)
    assert "tenant 'prefill'" in msg and "admission rejected" in msg
    # 0.85 x 3200 = 2720; 2000 + 800 = 2800: 80 GB/s over.
    assert "2720.000 GB/s" in msg and "by 80.000 GB/s" in msg
    admitted = admit(d, dict(new, guaranteed_gbps=720, burst_gbps=720))
    assert admitted.config.tenants[1].enable == 1


@pytest.mark.parametrize("change, message", [
    (dict(guaranteed_gbps=-1), "tenant 'decode-a': guaranteed_gbps must be >= 0"),
    (dict(burst_gbps=100), "burst_gbps \\(100\\) must be >= guaranteed_gbps \\(120\\)"),
    (dict(priority=4), "priority 4 out of range 0..3"),
    (dict(id=8), "id 8 out of range 0..7"),
    (dict(burst_duration_ms=3.0), "burst_duration_ms is unrepresentable: a bucket of 45 MB"),
    (dict(guaranteed_gbps=0), "give an explicit weight"),
    (dict(weight=0.0001), "weight is unrepresentable"),
    (dict(latency_slo_us=20000), "latency_slo_us is unrepresentable"),
    (dict(color=3), "tenant 'decode-a': unknown key\\(s\\) color"),
    (dict(name=""), "name must be a non-empty string"),
    (dict(priority="high"), "priority must be a number"),
])
def test_bad_tenant_fields_are_named(change, message):
    d = doc(**change)
    if "weight" in change:  # a second tenant makes the weight ratio matter
        d["tenant"].append({"id": 1, "name": "big", "guaranteed_gbps": 100, "burst_gbps": 100,
                            "burst_duration_ms": 1, "priority": 0, "latency_slo_us": 1})
        d["tenant"][0]["guaranteed_gbps"] = 1
        d["tenant"][0]["burst_gbps"] = 1
    with pytest.raises(ContractError, match=message):
        compile_contract(d)


def test_missing_and_unknown_fabric_keys():
    d = doc()
    del d["fabric"]["channel_gbps"]
    with pytest.raises(ContractError, match=r"\[fabric\]: missing key\(s\) channel_gbps"):
        compile_contract(d)
    d = doc()
    d["fabric"]["clock_ghz"] = 1
    with pytest.raises(ContractError, match=r"unknown key\(s\) clock_ghz"):
        compile_contract(d)
    d = doc()
    del d["tenant"][0]["latency_slo_us"]
    with pytest.raises(ContractError, match=r"tenant 'decode-a': missing key\(s\) latency_slo_us"):
        compile_contract(d)
    d = doc()
    d["tenant"].append(dict(d["tenant"][0], name="dup"))
    with pytest.raises(ContractError, match="id 0 already used by tenant 'decode-a'"):
        compile_contract(d)


def test_example_contract_loads():
    c = load_contract("examples/essay.toml")
    assert [t.name for t in c.tenants] == ["prefill", "decode-a", "decode-b", "decode-c"]
    assert c.bytes_per_cycle == 400


def test_bad_toml_reports_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[fabric\n")
    with pytest.raises(ContractError, match="bad.toml: not valid TOML"):
        load_contract(f)


def test_narrow_tags_reject_heavy_weights():
    d = doc()
    d["fabric"]["tag_bits"] = 12
    d["tenant"].append({"id": 1, "name": "big", "guaranteed_gbps": 1000, "burst_gbps": 1000,
                        "burst_duration_ms": 0.01, "priority": 0, "latency_slo_us": 1})
    with pytest.raises(ContractError, match="tenant 'decode-a': weight is unrepresentable with tag_bits=12"):
        compile_contract(d)
    d["fabric"]["tag_bits"] = 20
    compile_contract(d)


# ---- CREDITS (spec §6.6, §12) ----------------------------------------------------------------

def _two_tenants(**fabric):
    """decode-a (priority 1, peak 400 GB/s = 50 B/cycle per channel) and a
    prefill at priority 2; B = 400 B/cycle per channel at 1 GHz."""
    d = doc()
    d["tenant"].append({"id": 1, "name": "prefill", "guaranteed_gbps": 400, "burst_gbps": 3200,
                        "burst_duration_ms": 0.5, "priority": 2, "latency_slo_us": 1000})
    d["fabric"].update(fabric)
    return d


def test_contract_without_credit_keys_compiles_credits_off():
    c = compile_contract(_two_tenants())
    assert (c.config.credits, c.config.bulk_prio, c.config.arrival_prio) == ((0, 0, 0), 0, 0)
    assert not c.gives_credits and not c.gives_bulk_priorities


def test_arrival_priorities_set_the_arrival_mask_and_nothing_else():
    # Spec §12: arrival_prio = sum of 2^p; the limits and bulk mask are untouched,
    # and the contract without credits keeps the mask (a replay orders the same).
    c = compile_contract(_two_tenants(arrival_priorities=[1, 3], bulk_priorities=[2]))
    assert (c.config.arrival_prio, c.config.bulk_prio, c.config.credits) == (0b1010, 0b0100, (0, 0, 0))
    assert not c.gives_credits and c.config_without_credits.arrival_prio == 0b1010
    assert compile_contract(_two_tenants(arrival_priorities=[])).config.arrival_prio == 0


def test_bulk_run_defaults_to_the_longest_run_with_bulk_priorities():
    # Spec §12: bulk_run absent is 255 (8 bits all set) when some priority is
    # bulk and 0 (off) when none is; given, it is used as written.
    assert compile_contract(_two_tenants(bulk_priorities=[2])).config.bulk_run == 255
    assert compile_contract(_two_tenants()).config.bulk_run == 0
    assert compile_contract(_two_tenants(bulk_priorities=[2], bulk_run=0)).config.bulk_run == 0
    assert compile_contract(_two_tenants(bulk_priorities=[2], bulk_run=17)).config.bulk_run == 17
    # The arbiter register, so replays without credits keep it too.
    c = compile_contract(_two_tenants(bulk_priorities=[2], bulk_run=17))
    assert c.config_without_credits.bulk_run == 17


def test_credit_limits_and_bulk_priorities_as_written():
    c = compile_contract(_two_tenants(credit_urgent=3, credit_guaranteed=0, credit_burst=255,
                                      bulk_priorities=[3, 2]))
    assert (c.config.credits, c.config.bulk_prio) == ((3, 0, 255), 0b1100)
    assert c.gives_credits and c.gives_bulk_priorities
    # Bulk priorities alone set the mask, not the limits.
    c = compile_contract(_two_tenants(bulk_priorities=[0]))
    assert (c.config.credits, c.config.bulk_prio, c.gives_credits) == ((0, 0, 0), 1, False)


def test_credit_limits_sized_by_littles_law():
    # L = 100 ns = 100 cycles at 1 GHz, s = 256 B. Guaranteed class: decode-a alone
    # (the prefill's priority 2 is bulk) at its 50 B/cycle peak: 50 * 100 / 256 =
    # 19.5 -> 20, doubled (spec §12) -> 40. Burst: the channel, 400 * 100 / 256 =
    # 156.25 -> 157, not doubled. Urgent: one per contracted tenant, 2.
    c = compile_contract(_two_tenants(memory_round_trip_ns=100, memory_request_bytes=256,
                                      bulk_priorities=[2]))
    assert c.config.credits == (2, 40, 157)
    # Without bulk priorities the prefill is latency-bound too: 50 + 400 B/cycle,
    # capped at the channel's 400, 157 like the burst class; doubled, 314 passes
    # the 8-bit register, so the doubling stops at 255 (the need itself fits).
    assert compile_contract(_two_tenants(memory_round_trip_ns=100, memory_request_bytes=256)
                            ).config.credits == (2, 255, 157)
    # A limit the contract gives wins over its Little's-law default; the rest stay sized.
    c = compile_contract(_two_tenants(memory_round_trip_ns=100, memory_request_bytes=256,
                                      bulk_priorities=[2], credit_burst=64))
    assert c.config.credits == (2, 40, 64)
    c = compile_contract(_two_tenants(memory_round_trip_ns=100, memory_request_bytes=256,
                                      bulk_priorities=[2], credit_guaranteed=20))
    assert c.config.credits == (2, 20, 157)
    # s defaults to max_request_bytes (4096): 5000 / 4096 -> 2, doubled 4;
    # 40000 / 4096 -> 10.
    c = compile_contract(_two_tenants(memory_round_trip_ns=100, bulk_priorities=[2]))
    assert c.config.credits == (2, 4, 10)
    # Every tenant bulk: the guaranteed class carries nothing, yet it is checked
    # (a need of 1, doubled).
    c = compile_contract(_two_tenants(memory_round_trip_ns=100, bulk_priorities=[1, 2]))
    assert c.config.credits[1] == 2


def test_credit_sizing_follows_the_clock():
    # 100 ns at 250 MHz is 25 cycles; B = 400 GB/s / 250 MHz = 1600 B/cycle:
    # burst 1600 * 25 / 4096 = 9.77 -> 10 (the same bytes in flight as at 1 GHz).
    d = _two_tenants(memory_round_trip_ns=100, bulk_priorities=[2])
    d["fabric"]["clock_mhz"] = 250
    assert compile_contract(d).config.credits[2] == 10


def test_replays_program_no_credits():
    c = compile_contract(_two_tenants(credit_urgent=1, credit_guaranteed=2, credit_burst=3,
                                      bulk_priorities=[2]))
    off = c.config_without_credits
    assert (off.credits, off.bulk_prio) == ((0, 0, 0), 0b0100)
    assert off.tenants == c.config.tenants and off.starve_limit == c.config.starve_limit


def _write(tmp_path, d):
    lines = ["[fabric]"] + [f"{k} = {v!r}" for k, v in d["fabric"].items()]
    for t in d["tenant"]:
        lines.append("[[tenant]]")
        lines += [f"{k} = " + (f'"{v}"' if isinstance(v, str) else repr(v)) for k, v in t.items()]
    path = tmp_path / "c.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_compile_emits_the_credits_register(tmp_path, capsys):
    from kvfabric.cli import main
    path = _write(tmp_path, _two_tenants(credit_urgent=3, credit_guaranteed=17, credit_burst=200,
                                         bulk_priorities=[2]))
    assert main(["compile", "--config", str(path)]) == 0
    # Spec §9: CREDITS [7:0] urgent, [15:8] guaranteed, [23:16] burst, [27:24] bulk_prio.
    word = 3 | 17 << 8 | 200 << 16 | 0b0100 << 24
    out = capsys.readouterr().out
    assert f"CREDITS=0x{word:08X}" in out
    # Spec §9: CTRL [15:8] bulk_run, 255 by default with bulk priorities (§12).
    assert "CTRL=0x0000FF00: fcfs_bypass=0 bulk_run=255" in out
    assert main(["compile", "--config", str(path), "--writes"]) == 0
    writes = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["0x001C", f"0x{word:08X}", "CREDITS"] in writes
    assert ["0x000C", "0x0000FF00", "CTRL"] in writes
    # Every tenant of the 8 is programmed (uncontracted ones disabled), the last
    # write tenant 7's COMMIT at 0x100 + 7 * 0x20 + 0x18.
    names = [w[2] for w in writes]
    assert writes[-1][:2] == ["0x01F8", "0x00000001"] and names.count("COMMIT") == 8


def test_replay_of_a_contract_with_credits_is_the_replay_without(tmp_path, capsys):
    """Spec §8's memory side returns no credits: the CLI replays with limits 0
    (limits of 1 with no returns would stop each class after one grant)."""
    from kvfabric.cli import main
    trace = tmp_path / "t.csv"
    trace.write_text("cycle,channel,tenant,bytes\n" +
                     "".join(f"{i},{i % 8},{i % 2},256\n" for i in range(64)))
    logs = []
    for name, fabric in (("off", {}), ("on", dict(credit_urgent=1, credit_guaranteed=1, credit_burst=1))):
        path = _write(tmp_path, _two_tenants(**fabric))
        out = tmp_path / f"{name}.csv"
        assert main(["replay", "--config", str(path), "--trace", str(trace), "--out", str(out)]) == 0
        logs.append(out.read_text())
    assert logs[0] == logs[1] and logs[0].count("\n") == 65
