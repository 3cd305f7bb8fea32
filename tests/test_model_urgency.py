"""The starvation guard's age test (spec §6.2): a head is old when
``ts_le(ts, now - starve_limit)``, which must equal ``age >= starve_limit``
for every age below half the timestamp range, across timestamp wrap."""

import random

import pytest

from kvfabric.spec import FabricParams
from kvfabric.model.channel import ChannelModel, QueueEntry
from kvfabric.model.contract import ContractError, compile_contract
from kvfabric.model.registers import FabricConfig, TenantConfig

P = FabricParams(tenants=2, channels=1)
HALF = 1 << (P.ts_bits - 1)


def winner(now, age, limit):
    """Tenant 0 (priority 3) has a head ``age`` cycles old, tenant 1
    (priority 0) a new one; both conform, so tenant 0 wins only if urgent."""
    full = dict(rate=8, capacity=P.pcap, peak_rate=8, inv_weight=256, enable=1)
    cfg = FabricConfig([TenantConfig(priority=3, **full), TenantConfig(priority=0, **full)],
                       starve_limit=limit)
    ch = ChannelModel(P, cfg)
    mask = (1 << P.ts_bits) - 1
    for i, ts in ((0, (now - age) & mask), (1, now)):
        ch.level[i], ch.peak[i] = P.pcap, P.pcap
        ch.fifo[i].append(QueueEntry(bytes=64, id=i, ts=ts, cost=2))
    return ch.select(now)[0]


def test_old_equals_age_at_least_limit(seed):
    rng = random.Random(seed)
    for _ in range(3000):
        limit = rng.choice([1, 2, HALF - 1, rng.randrange(1, HALF)])
        age = rng.choice([limit - 1, limit, limit + 1, rng.randrange(HALF)])
        age = min(max(age, 0), HALF - 1)
        now = rng.choice([0, age - 1, (1 << P.ts_bits) - 1, rng.randrange(1 << P.ts_bits)]) % (1 << P.ts_bits)
        want = 0 if age >= limit else 1
        assert winner(now, age, limit) == want, (now, age, limit)


def test_zero_limit_disables_the_guard():
    assert winner(now=5, age=HALF - 1, limit=0) == 1


def test_starve_limit_register_is_23_bits():
    FabricConfig([TenantConfig()], starve_limit=HALF - 1)
    with pytest.raises(ValueError, match="starve_limit"):
        FabricConfig([TenantConfig()], starve_limit=HALF)


def test_contract_rejects_an_unrepresentable_starvation_limit():
    doc = {"fabric": {"clock_mhz": 1000, "channels": 8, "channel_gbps": 400, "admission_limit": 0.85,
                      "starvation_limit_us": 8400},
           "tenant": [{"id": 0, "name": "decode", "guaranteed_gbps": 10, "burst_gbps": 20,
                       "burst_duration_ms": 1.0, "priority": 0, "latency_slo_us": 25}]}
    with pytest.raises(ContractError, match=r"starvation_limit_us.*8400000.*23-bit register holds at most 8388607"):
        compile_contract(doc)
    doc["fabric"]["starvation_limit_us"] = 8388
    assert compile_contract(doc).config.starve_limit == 8_388_000
