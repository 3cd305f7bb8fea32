"""``make regress``: a seeded random co-simulation regression on the sweep layer (issue #29).

    python -m kvfabric.scripts.regress [--seeds 20] [--sim icarus|verilator] [--seed N]
        [--cycles 3000] [--tenants 4 --channels 2] [--jobs 2] [--scheduler tcp://host:port]
        [--out reports]

Each task is one random configuration and its random traffic (the library's
generator, :mod:`kvfabric.tb.stimulus`, through the cocotb scenario
``random_long`` of tb/tests/cosim_tests.py: idle insertion, backpressure,
credit returns, FCFS now and then, a reset in the traffic one time in five),
run on the generated Verilog under one simulator and compared with the golden
model every cycle by the scoreboard.  Task k's seed is ``seed * 100000 + k``:
its own, never its position in a run order, so any task can be rerun alone
(``make regress`` prints the seeds; ``KVF_SEED=<seed>`` reruns one under
pytest's cosim runner).  Up to 20 000 cycles a task is one configuration.

Tasks run on the sweep layer (``--jobs`` local workers, or the scheduler of
``--scheduler`` / $KVFABRIC_SCHEDULER); the simulator model is built once,
before the sweep.  A mismatch names the task's seed and the first differing
cycle (channel, field, expected, actual); a task that fails otherwise (the
simulator crashed) is reported by its id with its error.  Writes
``regress.json`` and ``regress.md`` under ``--out`` with the workers and each
task's wall and CPU seconds (the worker's and the simulator's); apart from
those timing fields the report is the same whatever the workers.  Exits 1 on
any mismatch or failed task.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import sys
import time
from pathlib import Path

from kvfabric.provenance import describe, revision
from kvfabric.spec import FabricParams
from kvfabric.sweep import run_sweep

#: The cocotb module and scenario each task runs.
MODULE, SCENARIO = "kvfabric.tb.tests.cosim_tests", "random_long"
#: Longest task that stays one configuration (random_long's phase length).
MAX_CYCLES = 20_000
#: Shortest task worth a simulator start (random_long's shortest phase).
MIN_CYCLES = 100
#: The scoreboard's first-mismatch line (tb/scoreboard.py, ``fail``).
MISMATCH = re.compile(r"MISMATCH cycle (\d+) [^\n]*?\(seed -?\d+\)")


def task_seed(seed: int, index: int) -> int:
    """Task ``index``'s seed: its own, not its position in any run order."""
    return seed * 100_000 + index


def classify(error: str | None) -> dict:
    """A task's outcome from its failure text (None: it passed): ``status``
    pass or mismatch, the scoreboard's first mismatch line and its cycle."""
    if error is None:
        return {"status": "pass", "mismatch": None, "mismatch_cycle": None}
    m = MISMATCH.search(error)
    if m:
        return {"status": "mismatch", "mismatch": m.group(0).strip(), "mismatch_cycle": int(m.group(1))}
    # Not a per-cycle difference (e.g. a request never granted at the end checks).
    first = next((ln.strip() for ln in error.splitlines()[1:] if ln.strip()), error.strip())
    return {"status": "mismatch", "mismatch": first[:400], "mismatch_cycle": None}


def regress_task(b, params_json: str, seed: int, cycles: int, work_root: str) -> dict:
    """One sweep task: scenario ``random_long`` with ``seed`` on build ``b``,
    checked every cycle against the model; its outcome and the simulator's CPU
    seconds (the worker's own are the sweep's ``cpu_s``). A passing task's
    directory is removed; a mismatching one keeps its log."""
    from kvfabric.tb.runner import run

    work = Path(work_root) / b.sim / f"seed-{seed}"
    shutil.rmtree(work, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    error = None
    try:
        run(b, MODULE, work, test_filter=rf"\.{SCENARIO}$", log_file=work / "sim.log",
            extra_env={"KVF_PARAMS": params_json, "KVF_SEED": seed, "KVF_CYCLES": cycles})
    except AssertionError as exc:  # the scoreboard's verdict: a result, not a crash
        error = str(exc)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    outcome = classify(error)
    if outcome["status"] == "pass":
        shutil.rmtree(work, ignore_errors=True)
    sim_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {**outcome, "log": None if outcome["status"] == "pass" else str(work / "sim.log"),
            "sim_cpu_s": round(sim_cpu, 2)}


def _positive(name, lo, hi):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer from {lo} to {hi}, not {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{name} must be from {lo} to {hi}, not {value}")
        return value
    return parse


def build_parser():
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.regress", description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=_positive("--seeds", 1, 99_999), default=20,
                    help="how many random tasks (default 20)")
    ap.add_argument("--sim", choices=("icarus", "verilator"), default="icarus")
    ap.add_argument("--seed", type=_positive("--seed", 0, 10**12), default=None,
                    help="base seed: task k has seed * 100000 + k (default: KVFABRIC_SEED or 1)")
    ap.add_argument("--cycles", type=_positive("--cycles", MIN_CYCLES, MAX_CYCLES), default=3000,
                    help=f"cycles of traffic per task, {MIN_CYCLES} to {MAX_CYCLES} (one configuration; "
                         "default 3000)")
    ap.add_argument("--tenants", type=_positive("--tenants", 1, 64), default=4)
    ap.add_argument("--channels", type=_positive("--channels", 1, 64), default=2)
    ap.add_argument("--jobs", type=_positive("--jobs", 1, 1024), default=2, help="local Dask workers (default 2)")
    ap.add_argument("--scheduler", default=None,
                    help="address of a running Dask scheduler (default: $KVFABRIC_SCHEDULER, else local workers)")
    ap.add_argument("--out", default="reports", help="where regress.json and regress.md go (default reports)")
    return ap


def _base_seed(arg) -> int:
    if arg is not None:
        return arg
    env = os.environ.get("KVFABRIC_SEED", "").strip()
    return int(env) if env else 1


def main(argv=None) -> int:
    from kvfabric.tb.design import build_for, params_to_json
    from kvfabric.tb.runner import BUILD_ROOT

    args = build_parser().parse_args(argv)
    try:
        params = FabricParams(tenants=args.tenants, channels=args.channels)
    except ValueError as exc:
        build_parser().error(f"--tenants/--channels: {exc}")
    seed = _base_seed(args.seed)
    rev = revision()
    t0 = time.monotonic()
    b = build_for(params, args.sim)  # once, before the sweep (Verilator: a minute or more)
    build_s = time.monotonic() - t0
    seeds = [task_seed(seed, k) for k in range(args.seeds)]
    print(f"[regress] {args.seeds} tasks of {args.cycles:,} cycles on {args.sim}, "
          f"{params.tenants} x {params.channels}, seeds {seeds[0]}..{seeds[-1]} (seed {seed} x 100000 + k)",
          flush=True)
    work_root = str(BUILD_ROOT / "regress")
    tasks = [(f"{args.sim}/seed {s}", (b, params_to_json(params), s, args.cycles, work_root)) for s in seeds]
    info = {}
    t1 = time.monotonic()
    swept = run_sweep(regress_task, tasks, workers=args.jobs, scheduler=args.scheduler, desc="regress", info=info)
    wall = time.monotonic() - t1
    rows = []
    for s, r in zip(seeds, swept):
        row = {"task": r.task_id, "seed": s, "cycles": args.cycles}
        if r.ok:
            row.update(r.value)
        else:
            row.update(status="error", mismatch=None, mismatch_cycle=None, log=None, sim_cpu_s=None,
                       error=r.error.splitlines()[0])
        row.update(wall_s=round(r.wall_s, 2), cpu_s=round(r.cpu_s, 2))
        rows.append(row)
        if row["status"] != "pass":
            print(f"[regress] {r.task_id}: {row['status']}: {row.get('error') or row['mismatch']}", flush=True)
    report = write_report(args, params, seed, rows, rev, info, wall, build_s)
    counts = report["counts"]
    print(f"[regress] {counts['pass']} passed, {counts['mismatch']} mismatched, {counts['error']} failed "
          f"of {len(rows)} in {wall:.0f} s on {info.get('workers')} worker(s); wrote "
          f"{Path(args.out) / 'regress.md'}")
    return 0 if counts["pass"] == len(rows) else 1


#: Fields that depend on the machine and the run, not on the design and the seeds.
TIMING_FIELDS = ("wall_s", "cpu_s", "sim_cpu_s")


def write_report(args, params, seed, rows, rev, info, wall, build_s) -> dict:
    """regress.json and regress.md under ``args.out``; returns the JSON document."""
    counts = {k: sum(r["status"] == k for r in rows) for k in ("pass", "mismatch", "error")}
    doc = {**rev, "what": f"cocotb scenario {SCENARIO} (tb/tests/cosim_tests.py), one random configuration "
                          "and traffic per task, compared with the golden model every cycle",
           "command": "python -m kvfabric.scripts.regress", "sim": args.sim,
           "params": {"tenants": params.tenants, "channels": params.channels}, "seed": seed,
           "task_seed": "seed * 100000 + task", "cycles_per_task": args.cycles, "counts": counts,
           "tasks": rows,
           "timing": {"fields": list(TIMING_FIELDS), "workers": info.get("workers"),
                      "scheduler": info.get("scheduler"), "wall_s": round(wall, 1), "build_s": round(build_s, 1),
                      "cpu_s": round(sum(r["cpu_s"] for r in rows), 1),
                      "sim_cpu_s": round(sum(r["sim_cpu_s"] or 0 for r in rows), 1),
                      "cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2),
                      "python": platform.python_version()}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "regress.json").write_text(json.dumps(doc, indent=2) + "\n")
    t = doc["timing"]
    lines = ["# kvfabric random co-simulation regression (`make regress`)", "",
             f"Revision {describe(rev)}. {len(rows)} tasks of {args.cycles:,} cycles on {args.sim}, "
             f"{params.tenants} tenants x {params.channels} channels, scenario `{SCENARIO}` (one random "
             f"configuration and traffic per task, checked every cycle against the model), task seeds "
             f"{seed} x 100000 + task: **{counts['pass']} passed, {counts['mismatch']} mismatched, "
             f"{counts['error']} failed**.", "",
             f"Timing: {t['wall_s']} s wall on {t['workers']} worker(s) ({t['scheduler']}), build {t['build_s']} s, "
             f"{t['cpu_s']} s worker CPU + {t['sim_cpu_s']} s simulator CPU; {t['cpus']} CPUs, load average "
             f"{t['loadavg_1m']} at the end.", "",
             "| task | seed | result | first mismatch | wall s | worker CPU s | simulator CPU s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        what = r.get("error") or r["mismatch"] or ""
        lines.append(f"| {r['task']} | {r['seed']} | {r['status']} | {what.replace('|', '/')} | {r['wall_s']} | "
                     f"{r['cpu_s']} | {r['sim_cpu_s']} |")
    (out / "regress.md").write_text("\n".join(lines) + "\n")
    return doc


if __name__ == "__main__":
    sys.exit(main())
