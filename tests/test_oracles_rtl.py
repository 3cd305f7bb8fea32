"""The oracles of ``tests/oracles.py`` judging the RTL: short traces replayed by
``kvfabric.engines.replay`` under Icarus and Verilator (spec §8's memory side),
checked from the grant logs alone, exactly as the model's runs are.

Two traces on the parameters of ``tests/test_cosim.py``'s SMALL build (4
tenants, 2 channels, so the build is shared): every tenant backlogged on one
channel with one heavy weight (fairness against GPS), and buckets that have
filled before a burst, a conforming top-priority tenant and a flood
(envelopes and the delay bound).
"""

from fractions import Fraction

import pytest

import oracles
from kvfabric.engines import replay
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.model.trace import TraceRow
from kvfabric.spec import FabricParams
from kvfabric.tb.runner import sims_from_env

pytestmark = pytest.mark.cosim

PARAMS = FabricParams(tenants=4, channels=2)
MAX16 = (1 << 16) - 1
LMAX = PARAMS.max_request_bytes
START = 4000  # every bucket of the second trace is full by then


def rows_of(events):
    return [TraceRow(i, *e) for i, e in enumerate(sorted(events))]


def fairness_case():
    """Weights 3:1:1:1 (exact inverse weights, so no cost rounds), 16 maximum
    requests per tenant queued at cycle 0 on channel 0, 12 on channel 1."""
    inv = [512, 1536, 1536, 1536]
    cfg = FabricConfig([TenantConfig(rate=0, capacity=0, peak_rate=MAX16, inv_weight=x, enable=1)
                        for x in inv])
    events = [(0, 0, t, LMAX) for _ in range(16) for t in range(4)]
    events += [(0, 1, t, LMAX) for _ in range(12) for t in range(4)]
    return cfg, rows_of(events), Fraction(64), inv


def bucket_case():
    """Channel 0 from cycle START: tenant 0 (full 32 KB committed bucket, uncapped
    peak), tenant 1 (same, peak rate 20 B/cycle), tenant 2 (priority 0, traffic
    conforming to its (16 KB, 8 B/cycle) contract: the whole bucket at once, then
    the rate), tenant 3 (a flood on the burst path)."""
    pcap = PARAMS.pcap
    tenants = [
        TenantConfig(rate=80, capacity=8 * pcap, peak_rate=MAX16, inv_weight=1024, priority=1, enable=1),
        TenantConfig(rate=80, capacity=8 * pcap, peak_rate=160, inv_weight=1024, priority=1, enable=1),
        TenantConfig(rate=64, capacity=4 * pcap, peak_rate=64, inv_weight=1024, priority=0, enable=1),
        TenantConfig(rate=0, capacity=0, peak_rate=MAX16, inv_weight=1024, priority=2, enable=1),
    ]
    events = [(START, 0, t, LMAX) for _ in range(12) for t in (0, 1)]
    events += [(START, 0, 2, 512)] * 32  # 16 KB = capacity/8
    events += [(START + 64 * k, 0, 2, 512) for k in range(1, 40)]  # 8 B/cycle
    events += [(START, 0, 3, LMAX)] * 24
    return FabricConfig(tenants), rows_of(events), Fraction(128)


def backlogged_prefix(events, counts):
    """Events up to the grant that empties the first tenant's supply (it is
    backlogged until then; GPS compares only backlogged tenants)."""
    left = dict(counts)
    for k, e in enumerate(events):
        left[e.tenant] -= 1
        if left[e.tenant] == 0:
            return events[:k + 1]
    return events


@pytest.fixture(scope="module", params=["model", *sims_from_env()])
def engine(request):
    return request.param


def test_rtl_fairness_against_gps(engine):
    cfg, rows, bpc, inv = fairness_case()
    log = replay(engine, PARAMS, cfg, rows, bpc)
    assert all(r.grant_cycle is not None for r in log)
    shares = [Fraction(256, x) for x in inv]
    for channel, per_tenant in ((0, 16), (1, 12)):
        events = backlogged_prefix(oracles.from_grant_log(log, channel), {t: per_tenant for t in range(4)})
        assert len(events) >= 3 * per_tenant // 2  # the heavy tenant (half) runs out first
        lag = oracles.gps_lag_exact(events, shares)
        assert lag <= 2 * LMAX + PARAMS.tag_unit * 4, f"{engine} channel {channel}: GPS lag {float(lag)} B"
        verdict = oracles.gps_fairness(events, inv, lmax=LMAX)
        assert verdict.ok, f"{engine} channel {channel}: {verdict}"


def test_rtl_envelopes_and_delay(engine):
    cfg, rows, bpc = bucket_case()
    log = replay(engine, PARAMS, cfg, rows, bpc)
    events = oracles.from_grant_log(log, 0)
    assert len(events) == len(rows)
    for i in range(4):
        t = cfg.tenants[i]
        for verdict in oracles.envelope(events, i, rate=t.rate, capacity=t.capacity, peak_rate=t.peak_rate,
                                        pcap=PARAMS.pcap, at="transferred", lmax=LMAX):
            assert verdict.ok, f"{engine}: {verdict}"
    # The envelopes were reached: tenant 0 took its committed capacity, tenant 1 its peak bucket.
    committed = oracles.envelope(events, 0, rate=80, capacity=cfg.tenants[0].capacity, peak_rate=MAX16,
                                 pcap=PARAMS.pcap, at="transferred")[1]
    assert committed.worst >= committed.allowed - 2 * LMAX, f"{engine}: {committed}"
    peak = oracles.envelope(events, 1, rate=80, capacity=cfg.tenants[1].capacity, peak_rate=160,
                            pcap=PARAMS.pcap, at="transferred")[0]
    assert peak.worst >= peak.allowed - 2 * LMAX, f"{engine}: {peak}"
    t2 = cfg.tenants[2]
    bound = oracles.delay_bound(rate=t2.rate, capacity=t2.capacity, lmax=LMAX, bytes_per_cycle=bpc)
    verdict = oracles.delays(events, 2, bound)
    assert verdict.ok, f"{engine}: {verdict}"
    assert verdict.worst >= bound / 2, f"{engine}: the delay bound is not approached: {verdict}"
