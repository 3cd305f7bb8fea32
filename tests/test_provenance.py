"""Every report records the revision it was measured at (kvfabric.provenance)."""

import json
import subprocess
from pathlib import Path

from kvfabric.provenance import SOURCE, describe, revision
from kvfabric.scripts import bench

ROOT = Path(__file__).resolve().parents[1]


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_revision_is_head_and_says_whether_the_source_differs():
    rev = revision()
    assert rev["revision"] == _git("rev-parse", "--short", "HEAD")
    assert rev["dirty"] == bool(_git("status", "--porcelain", "--untracked-files=no", "--", *SOURCE))


def test_describe_names_the_commit_and_uncommitted_changes():
    assert describe({"revision": "0123456789ab"}) == "`0123456`"
    assert describe({"revision": "0123456789ab+dirty"}) == "`0123456` + uncommitted changes"
    assert describe({"revision": "0123456", "dirty": True}) == "`0123456` + uncommitted changes"
    assert describe({"revision": "0123456", "dirty": False}) == "`0123456`"
    assert describe({}) == describe({"revision": None}) == describe({"revision": "unknown"}) == "not recorded"


def test_bench_records_its_revision(tmp_path, monkeypatch):
    fake = {"what": "x", "cycles": 1, "seconds": 1.0, "cycles_per_s": 1.0}
    for name in ("bench_channel_step", "bench_fabric_step", "bench_replay"):
        monkeypatch.setattr(bench, name, lambda n: dict(fake))
    monkeypatch.setattr(bench, "revision", lambda: {"revision": "abcdef1", "dirty": True})
    out = tmp_path / "bench.json"
    assert bench.main(["--only", "model", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert (report["revision"], report["dirty"]) == ("abcdef1", True)
    assert "Revision `abcdef1` + uncommitted changes." in out.with_suffix(".md").read_text()


def test_every_committed_report_has_a_revision_or_says_it_has_none():
    # A report written before its writer recorded the revision says so: in its
    # Markdown, or (a report without one) by a revision of null.
    for path in sorted((ROOT / "reports").glob("*.json")):
        report = json.loads(path.read_text())
        assert isinstance(report, dict), path.name
        # synth.json (a dict of target entries) and floor.json (cores) record a
        # revision per part; other reports (family.json's "targets" are thresholds) one.
        targets = report.get("targets")
        entries = (list(targets.values()) if isinstance(targets, dict)
                   and all(isinstance(v, dict) for v in targets.values()) else None)
        parts = entries or report.get("cores")
        if parts:
            assert all(part.get("revision") for part in parts), path.name
        elif not report.get("revision"):
            md = path.with_suffix(".md")
            assert ("Revision: not recorded" in md.read_text() if md.exists()
                    else "revision" in report), path.name
