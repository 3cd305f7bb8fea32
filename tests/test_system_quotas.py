"""``kvfabric system`` enforces the contract's ``hbm_quota_mb`` / ``cxl_quota_mb``
(spec §12, issue #44): a decode reads no more of its KV from HBM than its HBM
quota holds, the rest over CXL; quotas that cannot hold a tenant's KV are
errors naming the files, the tenant, the quota and the figures.

The oracles are the quota's definition: a decode reads ``step_bytes`` of KV
every step in ``block_bytes`` blocks, so an HBM quota of Q bytes keeps
``floor(Q / block_bytes)`` blocks in HBM, and the share of its reads over
CXL is the rest's share of its blocks (counted here, not taken from the code).
"""

from pathlib import Path

import pytest

from kvfabric.model.compat import tomllib
from kvfabric.sim.workload import MB, WorkloadError, parse_workload, residency
from kvfabric.system import run_system

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = (ROOT / "examples" / "system_contract.toml").read_text()

# A decode of 64 blocks of 256 B per step, beside a prefill.
WORKLOAD = """
[system]
cycles = 60000
seed = 3

[[tenant]]
id = 0
kind = "prefill"
job_bytes = 1048576
period_cycles = 60000

[[tenant]]
id = 1
kind = "decode"
step_bytes = 16384
think_cycles = 3000

[[tenant]]
id = 2
kind = "idle"

[[tenant]]
id = 3
kind = "idle"
"""


def _contract(tmp_path, **quotas):
    """examples/system_contract.toml with ``quotas`` (key -> TOML lines) after a tenant's name."""
    text = CONTRACT
    for name, lines in quotas.items():
        text = text.replace(f'name = "{name}"\n', f'name = "{name}"\n{lines}\n')
    path = tmp_path / "contract.toml"
    path.write_text(text)
    return path


def _workload(tmp_path, text=WORKLOAD):
    path = tmp_path / "workload.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("hbm_blocks", [0, 16, 40, 64])
def test_decode_reads_over_cxl_what_its_hbm_quota_does_not_hold(tmp_path, hbm_blocks):
    blocks, block = 64, 256
    quota_mb = hbm_blocks * block / MB
    result = run_system(_contract(tmp_path, **{"decode-a": f"hbm_quota_mb = {quota_mb!r}"}),
                        _workload(tmp_path), "fabric-qos")
    row = next(r for r in result["residency"] if r["id"] == 1)
    assert (row["footprint_bytes"], row["hbm_bytes"], row["cxl_bytes"]) == \
        (blocks * block, hbm_blocks * block, (blocks - hbm_blocks) * block)
    decode = next(r for r in result["tenants"] if r["id"] == 1)
    assert decode["steps"] >= 5, "too few steps to judge"
    # A decode's window is its step, so every step is issued whole: the share
    # of its reads over CXL is exactly the share of its blocks the quota leaves out.
    assert row["cxl_read_share"] == round((blocks - hbm_blocks) / blocks, 4), row
    # Tenants without quotas are listed unbounded and read nothing over CXL.
    prefill = next(r for r in result["residency"] if r["id"] == 0)
    assert prefill["hbm_quota_mb"] is None and prefill["cxl_read_share"] is None


def test_no_quota_no_residency_section(tmp_path):
    result = run_system(_contract(tmp_path), _workload(tmp_path), "fcfs")
    assert "residency" not in result


def test_cxl_quota_too_small_names_tenant_quota_and_figures(tmp_path):
    contract = _contract(tmp_path, **{"decode-a": f"hbm_quota_mb = {4096 / MB!r}\ncxl_quota_mb = {8192 / MB!r}"})
    with pytest.raises(WorkloadError) as e:
        run_system(contract, _workload(tmp_path), "fabric-qos")
    msg = str(e.value)
    # 16384 B of KV, 4096 B in HBM: 12288 B must live in CXL, above 8192 B.
    for part in (str(contract), "tenant 1", "cxl_quota_mb", "8192 B", "12288 B", "raise cxl_quota_mb"):
        assert part in msg, (part, msg)


def test_prefill_job_above_its_hbm_quota_is_an_error(tmp_path):
    contract = _contract(tmp_path, prefill="hbm_quota_mb = 0.5")
    with pytest.raises(WorkloadError, match=r"tenant 0: hbm_quota_mb = 0\.5 \(524288 B\) cannot hold the "
                                            r"prefill's job of 1048576 B"):
        run_system(contract, _workload(tmp_path), "fabric-qos")


def test_residency_from_the_definitions():
    wl = parse_workload(tomllib.loads(WORKLOAD.replace('kind = "idle"\n', 'kind = "decode"\nstep_bytes = 4096\n'
                                                       'think_cycles = 100\nblock_bytes = 1024\n'
                                                       'cxl_fraction = 0.5\n', 1)),
                        [0, 1, 2, 3], source="w.toml")
    rows = residency(wl, {1: {"hbm_quota_mb": 1000 / MB}, 2: {"hbm_quota_mb": 1}}, source="c.toml")
    by_id = {r["id"]: r for r in rows}
    # 1000 B hold 3 blocks of 256 B.
    assert (by_id[1]["hbm_blocks"], by_id[1]["hbm_bytes"], by_id[1]["cxl_bytes"]) == (3, 768, 16384 - 768)
    # A quota above the footprint bounds nothing; cxl_fraction may spill any block.
    assert (by_id[2]["hbm_blocks"], by_id[2]["hbm_bytes"], by_id[2]["cxl_bytes"]) == (4, 4096, 4096)
    assert by_id[3]["footprint_bytes"] == 0 and by_id[3]["hbm_blocks"] is None
