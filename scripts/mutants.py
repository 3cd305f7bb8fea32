"""Mutation testing of the golden model: ``make mutants`` (issue #16).

Each mutant is one deliberate misreading of the spec, written as a text
substitution in ``model/channel.py``. For every mutant a fresh Python process
loads the mutated module in place of ``kvfabric.model.channel`` (nothing on
disk changes) and runs the fast model-level tests - never the RTL tests, so a
mutant must be caught by an oracle of the model's own, not by disagreeing with
the Verilog. A mutant is *killed* when some test fails (or the run exceeds the
time limit). The score is killed / (mutants - equivalent), written with the
survivors to ``reports/mutants.md`` and ``reports/mutants.json``.

A mutant whose text no longer occurs in ``model/channel.py`` is an error, not a
survivor: the list must follow the model (rename the substitution).

    python -m kvfabric.scripts.mutants [--jobs 2] [--only NAME ...] [--out reports]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "model/channel.py"
MODULE = "kvfabric.model.channel"
#: Fast model-level tests, most discriminating first (the run stops at the first failure).
TESTS = [
    "tests/test_model_credits.py",  # seconds: kills the credit mutants before the long oracles run
    "tests/test_oracles.py",
    "tests/test_model_bounds.py",
    "tests/test_model_urgency.py",
    "tests/test_replay.py",
    "tests/test_model_telemetry.py",
    "tests/test_model_wrap.py",
]
#: Runs the CLI in a subprocess, which would load the unmutated model.
DESELECT = ["tests/test_replay.py::test_cli_replay_end_to_end"]
TIME_LIMIT = 900  # seconds per mutant; the unmutated suite takes about 150 s on one core


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str  # the misreading, in the spec's words
    edits: tuple[tuple[str, str], ...]  # (text in model/channel.py, replacement)
    listed: bool = False  # one of the mutants issue #16 lists
    equivalent: str = ""  # reason, if the mutant cannot change behaviour the spec defines


def M(name, what, *edits, listed=False, equivalent=""):
    return Mutant(name, what, tuple(edits), listed, equivalent)


MUTANTS = [
    # ---- the eleven of issue #16 ----
    M("wfq_no_eligibility", "WF2Q+ eligibility removed (plain WFQ)",
      ("eligible = not mod_lt(self.vt_prev, self.tag[i], p.tag_bits)", "eligible = True"), listed=True),
    M("sfq_start_tag_order", "heads ordered by start tag instead of finish tag",
      ("finish = (self.tag[i] + head.cost) & ((1 << p.tag_bits) - 1)", "finish = self.tag[i]"), listed=True),
    M("v_never_jumps_to_vmin", "V never jumps to vmin",
      ("next_vt = mod_max(next_vt, self.vmin, p.tag_bits)", "pass"), listed=True),
    M("v_twice_as_fast", "V advances by twice the served units",
      ("next_vt = (self.vt + self.served) & tag_mask", "next_vt = (self.vt + 2 * self.served) & tag_mask"),
      listed=True),
    M("burst_keeps_level", "a burst grant keeps the committed level (spec §6.3 spends it)",
      ("level[i] = min(cfg.rate, cfg.capacity)", "level[i] = min(level[i] + cfg.rate, cfg.capacity)"),
      listed=True),
    M("conform_ignores_peak", "conform ignores the peak bucket",
      ("conform = peak_ok and self.level[i] >= need", "conform = self.level[i] >= need"), listed=True),
    M("capacity_never_applied", "the committed capacity never caps the level",
      ("level[i] = min(level[i] - debit + cfg.rate, cfg.capacity)", "level[i] = level[i] - debit + cfg.rate"),
      ("level[i] = x if x < cfg.capacity else cfg.capacity", "level[i] = x"), listed=True),
    M("urgent_youngest_first", "urgent heads served youngest first",
      ("return mod_lt(a[3], b[3], p.ts_bits)", "return mod_lt(b[3], a[3], p.ts_bits)"), listed=True),
    M("queue_depth_plus_one", "a queue accepts D + 1 entries",
      ("return [o >= depth for o in self.occupancy()]", "return [o > depth for o in self.occupancy()]"),
      ("return self.occupancy()[tenant] < self.params.queue_depth",
       "return self.occupancy()[tenant] <= self.params.queue_depth"),
      ("accepted = occ < p.queue_depth", "accepted = occ <= p.queue_depth"), listed=True),
    M("committed_never_conforms", "the committed bucket never conforms",
      ("conform = peak_ok and self.level[i] >= need", "conform = peak_ok and False"), listed=True),
    M("committed_never_refills", "the committed bucket never refills",
      ("level[i] = min(level[i] - debit + cfg.rate, cfg.capacity)", "level[i] = min(level[i] - debit, cfg.capacity)"),
      ("level[i] = min(cfg.rate, cfg.capacity)", "level[i] = 0"),
      ("x = level[i] + cfg.rate", "x = level[i]"), listed=True),
    # ---- selection ----
    M("tie_to_higher_index", "equal keys go to the higher tenant index",
      ("if best is None or self._beats(key, best_key):", "if best is None or not self._beats(best_key, key):")),
    M("eligible_strict", "eligible only when the start tag is strictly below V",
      ("eligible = not mod_lt(self.vt_prev, self.tag[i], p.tag_bits)", "eligible = mod_lt(self.tag[i], self.vt_prev, p.tag_bits)")),
    M("ineligible_first", "ineligible heads before eligible ones",
      ("        if a[1] != b[1]:\n            return a[1]", "        if a[1] != b[1]:\n            return b[1]")),
    M("priority_inverted", "priority 3 is the highest",
      ("cls = 0 if (limit != 0 and old) else 1 + cfg.priority",
       "cls = 0 if (limit != 0 and old) else 4 - cfg.priority")),
    M("priority_ignored", "every conforming head in class 1",
      ("cls = 0 if (limit != 0 and old) else 1 + cfg.priority", "cls = 0 if (limit != 0 and old) else 1")),
    M("burst_as_priority_zero", "a burst head competes in class 1",
      ("        elif peak_ok:\n            cls = 5", "        elif peak_ok:\n            cls = 1")),
    M("zero_limit_still_urgent", "starve_limit = 0 does not disable the guard",
      ("cls = 0 if (limit != 0 and old) else", "cls = 0 if old else")),
    M("old_strictly_older", "old means age > starve_limit instead of >=",
      ("old = not mod_lt(deadline, head.ts, p.ts_bits)", "old = mod_lt(head.ts, deadline, p.ts_bits)")),
    M("fcfs_youngest_first", "FCFS bypass serves the youngest head",
      ("if q and (best is None or mod_lt(q[0].ts, best_key, p.ts_bits)):",
       "if q and (best is None or mod_lt(best_key, q[0].ts, p.ts_bits)):")),
    M("burst_kind_guaranteed", "class-5 grants reported (and charged) as guaranteed",
      ("(URGENT if cls == 0 else GUARANTEED if cls <= 4 else BURST)", "(URGENT if cls == 0 else GUARANTEED)")),
    M("urgent_kind_guaranteed", "class-0 grants reported as guaranteed (spec §6.6's kind 3 lost)",
      ("(URGENT if cls == 0 else GUARANTEED if cls <= 4 else BURST)", "(GUARANTEED if cls <= 4 else BURST)")),
    # ---- memory-side credits (spec §6.6) ----
    M("credit_not_checked", "a head competes whatever its class's credit",
      ("if key[0] == NO_CLASS or not credit[self._credit_class_of(key[0])]:", "if key[0] == NO_CLASS:")),
    M("credit_limit_off_by_one", "a class may hold one more than its limit",
      ("return tuple(limit == 0 or held < limit", "return tuple(limit == 0 or held <= limit")),
    M("credit_return_underflow", "a return with nothing in flight is not ignored",
      ("inflight[k] = x - 1 if (credit_return[k] and x > 0) else x", "inflight[k] = (x - 1) % 256 if credit_return[k] else x")),
    M("credit_no_saturation", "the in-flight count wraps instead of saturating at 255",
      ("x = x if x < _INFLIGHT_MAX else _INFLIGHT_MAX", "x = x % (_INFLIGHT_MAX + 1)")),
    M("load_ignores_ready", "the grant register is reloaded while the memory side refuses it",
      ("load = self.grant is None or grant_ready", "load = True")),
    # ---- buckets ----
    M("guaranteed_no_debit", "a guaranteed grant does not debit the committed level",
      ("level[i] = min(level[i] - debit + cfg.rate, cfg.capacity)", "level[i] = min(level[i] + cfg.rate, cfg.capacity)")),
    M("peak_no_debit", "a grant does not debit the peak level",
      ("peak[i] = min(peak[i] - debit + cfg.peak_rate, pcap)", "peak[i] = min(peak[i] + cfg.peak_rate, pcap)")),
    M("peak_uncapped", "the peak level is not capped at PCAP",
      ("peak[i] = min(peak[i] - debit + cfg.peak_rate, pcap)", "peak[i] = peak[i] - debit + cfg.peak_rate"),
      ("peak[i] = x if x < pcap else pcap", "peak[i] = x")),
    M("bucket_test_strict", "a bucket covers a request only when strictly above it",
      ("peak_ok = self.peak[i] >= need", "peak_ok = self.peak[i] > need")),
    # ---- tags and virtual time ----
    M("winner_tag_kept", "the winner's tag does not advance by its cost",
      ("tag[i] = (tag[i] + head.cost) & tag_mask", "tag[i] = tag[i]")),
    M("cost_rounded_down", "cost rounds down instead of up",
      ("return (nbytes * inv_weight + (1 << shift) - 1) >> shift", "return (nbytes * inv_weight) >> shift")),
    M("served_rounded_down", "served(bytes) rounds down instead of up",
      ("next_served = ((head.bytes + (1 << p.tag_shift) - 1) >> p.tag_shift) if fabric_grant else 0",
       "next_served = (head.bytes >> p.tag_shift) if fabric_grant else 0")),
    M("vmin_over_empty_queues", "vmin taken over every tenant, idle ones included",
      ("nonempty = [i for i in range(n) if self.fifo[i]]", "nonempty = list(range(n))")),
    M("idle_tenant_not_raised", "a newly backlogged tenant keeps its old tag (banks credit while idle)",
      ("floor = lag_floor if fifo[i] else vt", "floor = lag_floor")),
    M("backlogged_raised_to_v", "a backlogged tenant's tag is raised to V, not V - LAG_WINDOW",
      ("floor = lag_floor if fifo[i] else vt", "floor = vt")),
    M("no_tag_ceiling", "no upper clamp at V + LAG_WINDOW",
      ("                if ((ceiling - tag[i]) & tag_mask) >= half:  # tag_min(tag, ceiling)\n"
       "                    tag[i] = ceiling\n", "")),
    # ---- ingress ----
    M("ready_ignores_ingress", "acceptance ignores the request held in the ingress register",
      ("                if self.ingress is not None and self.ingress[0] == req.tenant:\n"
       "                    occ += 1\n", "")),
    M("oversize_request_valid", "a request above LMAX is not invalid",
      ("or nbytes == 0 or nbytes > p.max_request_bytes)", "or nbytes == 0)")),
]


# ---- worker: one mutant, in this process ---------------------------------------------------

class _FirstFailure:
    """pytest plugin: remember the first failing test's id."""

    def __init__(self):
        self.failed: str | None = None

    def pytest_runtest_logreport(self, report):
        if report.failed and self.failed is None:
            self.failed = report.nodeid


def _install(mutant: Mutant | None) -> None:
    """Load model/channel.py (mutated) as kvfabric.model.channel before anything imports it."""
    import kvfabric.model as package

    path = ROOT / TARGET
    source = path.read_text()
    if mutant is not None:
        source = apply(source, mutant)
    spec = importlib.util.spec_from_loader(MODULE, loader=None, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    module.__package__ = "kvfabric.model"
    sys.modules[MODULE] = module
    exec(compile(source, str(path), "exec"), module.__dict__)
    package.channel = module


def apply(source: str, mutant: Mutant) -> str:
    for old, new in mutant.edits:
        count = source.count(old)
        if count != 1:
            raise ValueError(f"mutant {mutant.name}: {old!r} occurs {count} times in {TARGET} (need 1)")
        source = source.replace(old, new)
    return source


def _worker(name: str, result_path: str) -> int:
    import pytest

    mutant = None if name == "none" else next(m for m in MUTANTS if m.name == name)
    _install(mutant)
    plugin = _FirstFailure()
    args = ["-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", str(ROOT),
            *TESTS]
    for d in DESELECT:
        args += ["--deselect", d]  # node ids are relative to the rootdir (cwd)
    code = pytest.main(args, plugins=[plugin])
    Path(result_path).write_text(json.dumps({"exit": int(code), "failed": plugin.failed}))
    return 0


# ---- driver ----------------------------------------------------------------------------------

@dataclass
class Outcome:
    name: str
    status: str  # killed | survived | equivalent | timeout | error
    seconds: float
    killed_by: str | None = None
    detail: str = ""
    extra: dict = field(default_factory=dict)


def run_one(name: str, workdir: Path) -> Outcome:
    result = workdir / f"{name}.json"
    result.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KVFABRIC_SEED"}  # the CI seeds
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "kvfabric.scripts.mutants", "--worker", name,
                               "--result", str(result)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return Outcome(name, "timeout", time.monotonic() - start, detail=f"over {TIME_LIMIT} s")
    seconds = time.monotonic() - start
    if not result.exists():
        return Outcome(name, "error", seconds, detail=(proc.stderr or proc.stdout)[-2000:])
    data = json.loads(result.read_text())
    if data["exit"] == 0:
        return Outcome(name, "survived", seconds)
    if data["failed"]:
        return Outcome(name, "killed", seconds, killed_by=data["failed"])
    # pytest exited non-zero without a failing test: collection or usage error
    return Outcome(name, "error", seconds, detail=proc.stdout[-2000:])


def report(outcomes: list[Outcome], baseline: Outcome, wall: float, out: Path, note: str = "") -> dict:
    by_name = {m.name: m for m in MUTANTS}
    counted = [o for o in outcomes if o.status != "equivalent"]
    killed = [o for o in counted if o.status in ("killed", "timeout")]
    score = len(killed) / len(counted) if counted else 0.0
    listed = [o for o in outcomes if by_name[o.name].listed]
    summary = {
        "target": TARGET, "tests": TESTS, "deselected": DESELECT,
        "mutants": len(outcomes), "equivalent": sum(o.status == "equivalent" for o in outcomes),
        "killed": len(killed), "survived": [o.name for o in counted if o.status == "survived"],
        "errors": [o.name for o in counted if o.status == "error"],
        "score": round(score, 4),
        "listed_killed": sum(o.status in ("killed", "timeout") for o in listed), "listed": len(listed),
        "baseline_seconds": round(baseline.seconds, 1), "wall_seconds": round(wall, 1), "note": note,
        "results": [{"name": o.name, "what": by_name[o.name].what, "listed": by_name[o.name].listed,
                     "status": o.status, "killed_by": o.killed_by, "seconds": round(o.seconds, 1),
                     "reason": by_name[o.name].equivalent, "detail": o.detail} for o in outcomes],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutants.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "# Mutation score of the golden model",
        "",
        f"Command: `make mutants` (`python -m kvfabric.scripts.mutants`), {len(outcomes)} curated mutants "
        f"of `{TARGET}` against the model-level tests ({', '.join(t.split('/')[-1] for t in TESTS)}; "
        "no RTL test), each in its own process, stopping at the first failing test.",
        "",
        f"- **Score: {len(killed)} / {len(counted)} = {score:.1%}** "
        f"(equivalent mutants excluded: {summary['equivalent']})",
        f"- Issue #16's listed mutants killed: {summary['listed_killed']} / {summary['listed']}",
        f"- Survivors: {', '.join(summary['survived']) or 'none'}",
        f"- Errors: {', '.join(summary['errors']) or 'none'}",
        f"- Wall time: {wall / 60:.1f} min ({note or 'one run'}); the unmutated suite alone: "
        f"{baseline.seconds:.0f} s",
        "",
        "| mutant | misreading | listed | result | first failing test | s |",
        "|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        m = by_name[o.name]
        what = m.what + (f" — equivalent: {m.equivalent}" if m.equivalent else "")
        lines.append(f"| `{o.name}` | {what} | {'yes' if m.listed else ''} | {o.status} | "
                     f"{('`' + o.killed_by.split('tests/')[-1] + '`') if o.killed_by else ''} | {o.seconds:.0f} |")
    (out / "mutants.md").write_text("\n".join(lines) + "\n")
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    ap.add_argument("--only", nargs="*", help="run only these mutants (no report files)")
    ap.add_argument("--out", default=str(ROOT / "reports"), help="where mutants.md/.json go")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="re-run only the survivors of OUT/mutants.json (after adding tests) and "
                         "rewrite the report with their new results")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args.worker, args.result)

    source = (ROOT / TARGET).read_text()
    for m in MUTANTS:  # every substitution must still match: fail before spending minutes
        apply(source, m)
    names = [m.name for m in MUTANTS]
    previous = None
    if args.rerun_survivors:
        previous = json.loads((Path(args.out) / "mutants.json").read_text())
        known = {r["name"] for r in previous["results"]}
        # survivors, errors, and mutants added to the list since that run
        args.only = [r["name"] for r in previous["results"] if r["status"] in ("survived", "error")]
        args.only += [n for n in names if n not in known]
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            ap.error(f"unknown mutant(s) {', '.join(unknown)}")
        names = [n for n in names if n in args.only]
    workdir = ROOT / "build" / "mutants"
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    # The unmutated model must pass first (skipped for --only, a quick re-check).
    baseline = Outcome("none", "survived", 0.0) if args.only and not previous else run_one("none", workdir)
    print(f"unmutated suite: {baseline.status} in {baseline.seconds:.0f} s", flush=True)
    if baseline.status != "survived":
        print(f"the unmutated model fails the suite ({baseline.killed_by or baseline.detail}); stopping")
        return 2
    by_name = {m.name: m for m in MUTANTS}

    def one(name):
        if by_name[name].equivalent:
            return Outcome(name, "equivalent", 0.0)
        o = run_one(name, workdir)
        print(f"{name:28s} {o.status:9s} {o.seconds:5.0f} s  {o.killed_by or o.detail[:200]}", flush=True)
        return o

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(one, names))
    wall = time.monotonic() - t0
    if previous is not None:
        rerun = {o.name: o for o in outcomes}
        merged = [rerun.get(r["name"]) or Outcome(r["name"], r["status"], r["seconds"], r["killed_by"],
                                                   r["detail"]) for r in previous["results"]]
        merged += [o for o in outcomes if o.name not in {r["name"] for r in previous["results"]}]
        note = (f"{previous['wall_seconds'] / 60:.1f} min for the full run, then "
                f"{wall / 60:.1f} min re-running {len(outcomes)} survivor(s)/new mutant(s) "
                f"({', '.join(o.name for o in outcomes)}) after tests were added")
        summary = report(merged, baseline, previous["wall_seconds"] + wall, Path(args.out), note=note)
        print(f"score {summary['score']:.1%}, survivors {summary['survived']}")
        return 0 if not summary["survived"] and not summary["errors"] else 1
    if args.only:
        return 0 if all(o.status in ("killed", "timeout", "equivalent") for o in outcomes) else 1
    summary = report(outcomes, baseline, wall, Path(args.out))
    print(f"score {summary['score']:.1%}, survivors {summary['survived']}, {wall / 60:.1f} min")
    return 0 if not summary["survived"] and not summary["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
