"""The README's figures table is generated from reports/*.json and must be current."""

import json
import re
import shutil
from pathlib import Path

from kvfabric.demo import run_demo
from kvfabric.scripts import readme_figures

ROOT = Path(__file__).resolve().parents[1]


def test_committed_table_matches_the_reports():
    assert readme_figures.main(["--check", "--readme", str(ROOT / "README.md"),
                                "--reports", str(ROOT / "reports")]) == 0


def test_a_changed_report_makes_the_table_stale(tmp_path):
    reports = tmp_path / "reports"
    shutil.copytree(ROOT / "reports", reports)
    readme = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", readme)
    state = json.loads((reports / "state_budget.json").read_text())
    state["revision"] = "0123456789ab"
    (reports / "state_budget.json").write_text(json.dumps(state))
    args = ["--readme", str(readme), "--reports", str(reports)]
    assert readme_figures.main(["--check", *args]) == 1
    assert readme_figures.main(args) == 0  # rewrites the table
    assert readme_figures.main(["--check", *args]) == 0
    row = next(line for line in readme.read_text().splitlines() if "state_budget.json" in line
               and line.startswith("| dynamic"))
    assert row.endswith("| `0123456` |")


def test_synthesis_doc_table_is_generated_from_synth_json(tmp_path):
    """docs/synthesis.md's "Where it stands" table is synth.json's rows: a changed
    report makes it stale (and only it: the README's table has the same rows),
    and the generator brings it back."""
    reports = tmp_path / "reports"
    shutil.copytree(ROOT / "reports", reports)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "synthesis.md"
    shutil.copy(ROOT / "docs" / "synthesis.md", doc)
    args = ["--readme", str(tmp_path / "README.md"), "--reports", str(reports)]
    assert readme_figures.main(["--check", *args]) == 0
    synth = json.loads((reports / "synth.json").read_text())
    key = next(iter(synth["targets"]))
    synth["targets"][key]["revision"] = "fedcba9876"
    (reports / "synth.json").write_text(json.dumps(synth))
    assert readme_figures.main(["--check", *args]) == 1
    assert readme_figures.main(args) == 0
    assert readme_figures.main(["--check", *args]) == 0
    section = doc.read_text().split(readme_figures.SYNTH_BEGIN)[1].split(readme_figures.SYNTH_END)[0]
    assert section.strip() == readme_figures.synth_table(reports)
    assert sum(line.endswith("| `fedcba9` |") for line in section.splitlines()) == 1


def test_every_row_names_its_command_and_revision():
    rows = readme_figures.rows(ROOT / "reports")
    assert len(rows) >= 8
    for what, figure, command, revision in rows:
        assert command.startswith("`") and ("make " in command or "python -m kvfabric." in command), what
        # A row whose figures come from several commits names each of them.
        assert revision == "not recorded" or all(re.fullmatch(r"`[0-9a-f]{7}`( \+ uncommitted changes)?", r)
                                                 for r in revision.split(", ")), what
    # Every report the repository holds gives rows (none is silently left out of the table).
    reports = {c.split("`reports/")[1].split(".")[0] for _, _, c, _ in rows if "`reports/" in c}
    assert reports >= {"bench", "soak", "formal", "mutants", "mutants_sim", "state_budget", "synth", "floor",
                       "experiments"}


def test_a_report_before_the_revision_field_reads_not_recorded(tmp_path):
    # experiments.json was a bare list of runs before it recorded its revision.
    runs = json.loads((ROOT / "reports" / "experiments.json").read_text())["runs"]
    (tmp_path / "experiments.json").write_text(json.dumps(runs))
    old = readme_figures.rows(tmp_path)
    assert len(old) >= 4 and {r[3] for r in old} == {"not recorded"}
    (tmp_path / "experiments.json").write_text(json.dumps({"revision": "abcdef1", "dirty": True, "runs": runs}))
    new = readme_figures.rows(tmp_path)
    assert [r[:3] for r in new] == [r[:3] for r in old]
    assert {r[3] for r in new} == {"`abcdef1` + uncommitted changes"}


def test_an_unrouted_seed_is_named_beside_the_median():
    entry = {"status": "ok", "device": "LFE5U-85F, CABGA381, speed 8", "design": {"tenants": 8, "channels": 1},
             "target_mhz": 100.0, "seeds": [1, 2, 3],
             "fmax_mhz": 59.7, "fmax_by_seed": {"1": 62.0, "2": 59.7, "3": None}, "revision": "0123456789ab",
             "utilisation": {"TRELLIS_COMB": {"used": 10, "available": 100, "percent": 10.0}}}
    (row,) = readme_figures._synth_rows({"targets": {"ecp5_1ch": entry}})
    assert "59.7 MHz routed (median of seeds 1,2,3, seed 3 not routed in time, counted as slowest" in row[1]
    entry["fmax_by_seed"]["3"] = 61.0
    (row,) = readme_figures._synth_rows({"targets": {"ecp5_1ch": entry}})
    assert "not routed" not in row[1]


def test_floor_row_names_each_exact_core_and_every_commit_it_was_measured_at(tmp_path):
    cores = [{"core": "allpairs", "order_bits": 24, "fmax_median_mhz": 128.34, "fmax_by_seed": {"1": 1, "2": 2},
              "revision": "d53bcba632cc"},
             {"core": "fast", "order_bits": 24, "fmax_median_mhz": 178.99, "fmax_by_seed": {"1": 1, "2": 2},
              "revision": "442c543e96a0"},
             {"core": "fast", "order_bits": 8, "fmax_median_mhz": 250.0, "fmax_by_seed": {"1": 1},
              "revision": "ffffffffffff"}]
    (tmp_path / "floor.json").write_text(json.dumps({"cores": cores}))
    [(what, figure, command, revision)] = readme_figures.rows(tmp_path)
    assert "24-bit order" in what
    assert "all-pairs (today's structure) 128.34 MHz" in figure
    assert "registered class and order bits (issue #25) 178.99 MHz" in figure
    assert "250" not in figure and "median of seeds 1,2;" in figure
    assert revision == "`d53bcba`, `442c543`"


def _columns(line):
    return re.split(r"\s{2,}", line.strip())


def test_readme_demo_excerpt_is_what_the_demo_prints(tmp_path, capsys):
    # The README quotes `make demo`'s output; the model is exact, so every line it
    # quotes must be what `kvfabric demo` prints today, column by column.
    readme = (ROOT / "README.md").read_text()
    block = readme.split("`make demo` replays", 1)[1].split("```\n", 2)[1]
    run_demo(out_dir=str(tmp_path))
    printed = capsys.readouterr().out.splitlines()
    sections, section, header, checked = {}, None, None, 0
    for line in printed:
        if line.startswith("== "):
            section, header = line.split(":")[0], None
        elif section and line.lstrip().startswith("tenant"):
            header = _columns(line)
        elif section and header and line.strip() and line.strip()[0].isdigit():
            row = dict(zip(header, line.split()))
            sections[section, row["tenant"]] = row
    for line in block.splitlines():
        if line.startswith("== "):
            section = line
        elif line.lstrip().startswith("tenant"):
            header = _columns(line)
        elif line.strip() and line.strip()[0].isdigit():
            quoted = dict(zip(header, line.split()))
            actual = sections[section, quoted["tenant"]]
            assert {k: actual[k] for k in quoted} == quoted, (section, line)
            checked += 1
        elif line.startswith("worst decode"):
            assert line in printed
            checked += 1
    assert checked >= 5


def _family_report(worst_ratio, worst_prefill, backlogged=(2, 2), rate=210_000.0, under=(300.0, 400.0)):
    ratio = {"n": 4, "median": 1.1, "p90": worst_ratio, "worst": worst_ratio}
    share = {"n": 4, "median": 0.95, "p90": worst_prefill, "worst": worst_prefill}
    qos = {"p99_ratio": ratio, "prefill_restated": share, "backlogged_met": backlogged[0],
           "backlogged_runs": backlogged[1], "worst": {"draw": 1, "seed": 2}}
    frfcfs = {**qos, "p99_ratio": {**ratio, "worst": 3.5}}
    # One under-guaranteed decode: p99 under fabric-qos, under FR-FCFS.
    rows = [{"policy": "fabric-qos", "under": [{"decode": 0, "p99_ns": under[0], "frfcfs_p99_ns": under[1]}]},
            {"policy": "frfcfs", "under": [{"decode": 0, "p99_ns": under[1], "frfcfs_p99_ns": under[1]}]}]
    return {"revision": "0123456789ab", "dirty": False, "argv": "", "family_seed": 26, "run_seeds": [1, 2],
            "draws": [{}, {}], "targets": {"p99_ratio": 1.2, "prefill_ratio": 0.9}, "jobs": 2, "steps": 500,
            "summary": {"frfcfs": frfcfs, "fabric-qos": qos}, "interpreter": "PyPy 3.9.16", "rows": rows,
            "speed": {"with prefills": {"cycles_per_cpu_s": rate, "cycles_per_wall_s": rate - 5_000}},
            "runs_done": 16, "wall_s": 600.0, "predicted_default_wall_s_own_cores": 80 * 60.0}


def test_family_rows_judge_every_target_from_the_report():
    (tail, speed) = readme_figures._family_rows(_family_report(1.19, 0.91))
    assert tail[0].startswith("decode tail over drawn workloads") and tail[2] == "`make family` → `reports/family.md`"
    assert "2 drawn workloads x 2 seeds (family seed 26, 500-step runs)" in tail[1]
    assert "1.19x worst (draw 1, seed 2; FR-FCFS 3.50x)" in tail[1]
    assert "at most 0.75x their FR-FCFS p99 (1 runs)" in tail[1]
    assert tail[1].endswith(": met)") and tail[3] == "`0123456`"
    assert ("210 k channel-cycles per CPU second with prefills running (PyPy 3.9.16; target 200 k: met); "
            "16 runs in 10.0 min on 2 workers; the default family predicted at 80 min on 2 workers "
            "(target 90 min: met)") == speed[1]
    for args in ((1.21, 0.91), (1.19, 0.89), (1.19, 0.91, (1, 2))):
        assert readme_figures._family_rows(_family_report(*args))[0][1].endswith(": not met)")
    late = _family_report(1.0, 1.0, under=(401.0, 400.0))
    assert readme_figures._family_rows(late)[0][1].endswith(": not met)")
    assert "target 200 k: not met" in readme_figures._family_rows(_family_report(1.0, 1.0, rate=199_000))[1][1]
    slow = {**_family_report(1.0, 1.0), "predicted_default_wall_s_own_cores": 91 * 60.0}
    assert "(target 90 min: not met)" in readme_figures._family_rows(slow)[1][1]


def test_grant_rate_row_takes_the_worst_draw_per_clock_and_variant():
    """Per clock, the largest pooled ratio over the draws, with prefills and
    with the decodes alone kept apart."""
    def row(draw, clock, variant, ratio):
        return {"draw": draw, "clock_mhz": clock, "variant": variant, "pooled_ratio": ratio,
                "grant_over_peak": clock / 400}
    report = {"meta": {"draws": [1, 8], "seeds": [1, 2], "revision": "abc1234", "dirty": False},
              "rows": [row(1, 400, "decodes alone", 1.13), row(1, 400, "with prefills", 1.21),
                       row(8, 400, "decodes alone", 1.30), row(8, 400, "with prefills", 1.12),
                       row(1, 500, "decodes alone", 1.01), row(1, 500, "with prefills", 1.09),
                       row(8, 500, "decodes alone", 1.02), row(8, 500, "with prefills", 1.00)]}
    (what, figure, cmd, rev), = readme_figures._grant_rate_rows(report)
    assert "with their prefills 1.21x at 400 MHz, 1.09x at 500 MHz" in figure
    assert "decodes alone through the fabric 1.30x at 400 MHz, 1.02x at 500 MHz" in figure
    assert "(1, 8)" in figure and "1x, 1.25x the channel's peak" in figure
    assert "grant_rate" in cmd and rev == "`abc1234`"
    assert readme_figures._grant_rate_rows({"meta": report["meta"], "rows": []}) == []
