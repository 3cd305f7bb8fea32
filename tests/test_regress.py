"""The seeded random co-simulation regression on the sweep layer
(scripts/regress.py, issue #29): a small fixed-seed run on Icarus passes with
the same report on 1 and 2 workers, and a real model/RTL disagreement is
reported with the task's seed and the first differing cycle."""

import json

import pytest

from kvfabric.scripts.regress import build_parser, classify, main, regress_task, task_seed, write_report
from kvfabric.spec import FabricParams

pytestmark = pytest.mark.cosim

SEED = 29  # fixed in CI; the tasks' seeds are printed by the command


def _untimed(out):
    """regress.json without its timing fields, and regress.md without its timing line and columns."""
    doc = json.loads((out / "regress.json").read_text())
    doc.pop("timing")
    doc.pop("dirty")
    for row in doc["tasks"]:
        for f in ("wall_s", "cpu_s", "sim_cpu_s"):
            row.pop(f)
    md = [ln.rsplit("|", 4)[0] if ln.startswith("|") else ln
          for ln in (out / "regress.md").read_text().splitlines() if not ln.startswith("Timing:")]
    return doc, md


def test_small_fixed_seed_regression_passes_the_same_on_one_and_two_workers(tmp_path, capsys):
    reports = []
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        assert main(["--seeds", "3", "--sim", "icarus", "--cycles", "500", "--seed", str(SEED),
                     "--jobs", str(jobs), "--out", str(out)]) == 0
        doc = json.loads((out / "regress.json").read_text())
        assert doc["timing"]["workers"] == jobs
        assert all(r["wall_s"] > 0 and r["cpu_s"] >= 0 and r["sim_cpu_s"] > 0 for r in doc["tasks"])
        reports.append(_untimed(out))
    doc, md = reports[0]
    assert [r["seed"] for r in doc["tasks"]] == [task_seed(SEED, k) for k in range(3)] == [2900000, 2900001, 2900002]
    assert doc["counts"] == {"pass": 3, "mismatch": 0, "error": 0}
    assert "**3 passed, 0 mismatched, 0 failed**" in "\n".join(md)
    assert reports[0] == reports[1]
    assert "seeds 2900000..2900002" in capsys.readouterr().out


def test_a_mismatch_names_the_seed_and_the_cycle(tmp_path):
    """The golden model of a 2-deep queue against RTL built with 4-deep queues
    (a real disagreement, not a mock): the task reports a mismatch with the
    scoreboard's first differing cycle and the seed, and keeps its log."""
    from kvfabric.tb.design import build_for, params_to_json

    b = build_for(FabricParams(tenants=4, channels=2), "icarus")
    model = FabricParams(tenants=4, channels=2, queue_depth=2)
    seed = task_seed(SEED, 1)
    got = regress_task(b, params_to_json(model), seed, 600, str(tmp_path / "work"))
    assert got["status"] == "mismatch"
    assert got["mismatch"].startswith(f"MISMATCH cycle {got['mismatch_cycle']} channel ")
    assert got["mismatch"].endswith(f"(seed {seed})") and got["mismatch_cycle"] > 0
    assert (tmp_path / "work" / "icarus" / f"seed-{seed}" / "sim.log").is_file()
    args = build_parser().parse_args(["--seeds", "1", "--cycles", "600", "--out", str(tmp_path / "out")])
    row = {"task": f"icarus/seed {seed}", "seed": seed, "cycles": 600, **got, "wall_s": 1.0, "cpu_s": 0.1}
    doc = write_report(args, FabricParams(tenants=4, channels=2), SEED, [row], {"revision": "x", "dirty": False},
                       {"workers": 1, "scheduler": "local"}, 1.0, 0.1)
    assert doc["counts"] == {"pass": 0, "mismatch": 1, "error": 0}
    md = (tmp_path / "out" / "regress.md").read_text()
    assert f"| icarus/seed {seed} | {seed} | mismatch | MISMATCH cycle {got['mismatch_cycle']} channel" in md


def test_classify_without_a_cycle_keeps_the_first_failure_line():
    text = "1 of 1 cocotb tests failed on icarus:\nrandom_long: AssertionError: 2 requests never granted\nmore"
    assert classify(text) == {"status": "mismatch", "mismatch": "random_long: AssertionError: 2 requests never granted",
                              "mismatch_cycle": None}
    assert classify(None)["status"] == "pass"


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0"], "--seeds must be from 1 to 99999, not 0"),
    (["--cycles", "50"], "--cycles must be from 100 to 20000, not 50"),
    (["--cycles", "many"], "--cycles must be an integer from 100 to 20000, not 'many'"),
    (["--sim", "xcelium"], "invalid choice: 'xcelium'"),
])
def test_init_wrong_options(argv, message, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert message in capsys.readouterr().err
