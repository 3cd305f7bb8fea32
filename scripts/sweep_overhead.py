"""What the sweep layer costs against a plain process pool (issue #29's target:
no more than 10 % longer on this 2-core machine for the same job).

    python -m kvfabric.scripts.sweep_overhead [--jobs 2] [--repeats 2] [--out reports]

Runs the experiments' quick plan (``make experiments``' runs at reduced
length) alternately through a ``concurrent.futures`` process pool, as the
experiments ran before the sweep layer, and through
:func:`kvfabric.sweep.run_sweep`, checks that both give the same results, and
writes ``sweep_overhead.json`` and ``.md`` with each wall time and the
machine's load. Each run is a fresh Python process, as a ``make`` target is:
a sweep pays its cluster's (and its fork server's) start-up every time, and
the wall time is taken around the runner, after the imports both share.

Where the difference goes, measured per run: the CPU of the command's own
process (for Dask the scheduler, the nannies and the client; for the pool
its feeder thread), the CPU the tasks report (each task's process time: for
Dask this includes the worker's own threads while the task runs), and, once
per repeat, the wall time of a sweep of trivial tasks (the cluster's start,
its workers' start and its close: the fixed cost). A benchmark, not a test:
the figures depend on the machine's load, which is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from kvfabric.provenance import describe, revision
from kvfabric.sim.studies.experiments import _cost, plan, run_all, run_spec

POOL, SWEEP, EMPTY = "process pool", "sweep layer (Dask)", "empty sweep (fixed cost)"


def pool_run(specs, jobs, compression=25):
    """The experiments' runs through a process pool (the runner before the sweep layer)."""
    ordered = sorted(specs, key=_cost, reverse=True)
    out = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for fut in as_completed([pool.submit(run_spec, s, compression) for s in ordered]):
            key, res = fut.result()
            out[key] = res
    return out


def empty_run(specs, jobs):
    """A sweep of one trivial task per worker on the experiments' module: what a
    sweep costs before and after its tasks."""
    from kvfabric.sweep import run_sweep
    swept = run_sweep(_cost, [(s["id"], (s,)) for s in specs[:jobs]], workers=jobs, progress=False)
    return {r.task_id: {"cost": r.value, "cpu_s": r.cpu_s} for r in swept}


RUNNERS = {POOL: pool_run, SWEEP: run_all, EMPTY: empty_run}


def _cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one(runner, jobs, out):
    """Run ``runner`` on the quick plan in this process; pickle its results and timings to ``out``."""
    specs = plan(True)
    cpu0, t0 = _cpu_self(), time.perf_counter()
    res = RUNNERS[runner](specs, jobs)
    wall, cpu = time.perf_counter() - t0, _cpu_self() - cpu0
    with open(out, "wb") as f:
        pickle.dump({"results": res, "wall_s": wall, "command_cpu_s": cpu,
                     "task_cpu_s": sum(r["cpu_s"] for r in res.values())}, f)


def _comparable(results):
    return {k: {f: v for f, v in r.items() if f != "cpu_s"} for k, r in results.items()}


def _fresh(runner, jobs):
    """``one(runner)`` in a fresh interpreter (as a make target runs); its measurements."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.pickle"
        subprocess.run([sys.executable, "-m", "kvfabric.scripts.sweep_overhead", "--one", runner,
                        "--jobs", str(jobs), "--pickle", str(out)], check=True, stderr=subprocess.DEVNULL)
        return pickle.loads(out.read_bytes())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="reports")
    ap.add_argument("--one", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    ap.add_argument("--pickle", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, not {args.repeats}")
    if args.one:
        one(args.one, args.jobs, args.pickle)
        return 0
    rev = revision()
    rows, reference = [], None
    for rep in range(args.repeats):
        for name in (POOL, SWEEP, EMPTY):
            load = round(os.getloadavg()[0], 2)
            got = _fresh(name, args.jobs)
            row = {"runner": name, "repeat": rep, "wall_s": round(got["wall_s"], 2), "runs": len(got["results"]),
                   "command_cpu_s": round(got["command_cpu_s"], 2), "task_cpu_s": round(got["task_cpu_s"], 2),
                   "load_1m_before": load}
            if name != EMPTY:
                row["same_results"] = reference is None or _comparable(got["results"]) == reference
                reference = reference or _comparable(got["results"])
            rows.append(row)
            print(f"{name:25s} repeat {rep}: {row['wall_s']:7.2f} s, {row['runs']} runs, command CPU "
                  f"{row['command_cpu_s']} s, task CPU {row['task_cpu_s']} s, load {load}, "
                  f"same results: {row.get('same_results', '-')}", flush=True)
    total = {name: sum(r["wall_s"] for r in rows if r["runner"] == name) for name in RUNNERS}
    ratio = total[SWEEP] / total[POOL]
    fixed = total[EMPTY] / args.repeats
    doc = {**rev, "jobs": args.jobs, "cpus": os.cpu_count(), "plan": "experiments --quick",
           "rows": rows, "sweep_over_pool": round(ratio, 3), "fixed_cost_s": round(fixed, 2)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep_overhead.json").write_text(json.dumps(doc, indent=2) + "\n")
    runs = next(r["runs"] for r in rows if r["runner"] == POOL)
    loads = [r["load_1m_before"] for r in rows]
    lines = ["# Sweep layer against a process pool (`python -m kvfabric.scripts.sweep_overhead`)", "",
             f"Revision {describe(rev)}; the experiments' quick plan ({runs} runs), {args.jobs} workers, "
             f"{os.cpu_count()} CPUs, each run a fresh process; load (1 min) {min(loads)}-{max(loads)} before "
             f"the runs. Sweep / pool wall time: **{ratio:.2f}** (target <= 1.10). A sweep of {args.jobs} "
             f"trivial tasks (the layer's fixed cost: cluster and worker start, close) took {fixed:.2f} s.", "",
             "Command CPU: the command's own process (Dask: scheduler, nannies, client; pool: its feeder). "
             "Task CPU: the sum of the tasks' process times (Dask: with the worker's own threads).", "",
             "| runner | repeat | wall s | runs | command CPU s | task CPU s | load (1 min) before | same results |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['runner']} | {r['repeat']} | {r['wall_s']} | {r['runs']} | {r['command_cpu_s']} | "
              f"{r['task_cpu_s']} | {r['load_1m_before']} | {r.get('same_results', '-')} |" for r in rows]
    (out / "sweep_overhead.md").write_text("\n".join(lines) + "\n")
    print(f"sweep / pool: {ratio:.2f}; fixed cost {fixed:.2f} s; wrote {out / 'sweep_overhead.md'}")
    return 0 if all(r.get("same_results", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
