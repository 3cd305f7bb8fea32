"""What the sweep layer costs against a plain process pool (issue #29's target:
no more than 10 % longer on this 2-core machine for the same job).

    python -m kvfabric.scripts.sweep_overhead [--jobs 2] [--repeats 2] [--out reports]

Runs the experiments' quick plan (``make experiments``' runs at reduced
length) alternately through a ``concurrent.futures`` process pool, as the
experiments ran before the sweep layer, and through
:func:`kvfabric.sweep.run_sweep` (a fresh LocalCluster each time, its
start-up included), checks that both give the same results, and writes
``sweep_overhead.json`` and ``.md`` with each wall time and the machine's
load. A benchmark, not a test: the figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from kvfabric.provenance import describe, revision
from kvfabric.sim.studies.experiments import _cost, plan, run_all, run_spec


def pool_run(specs, jobs, compression=25):
    """The experiments' runs through a process pool (the runner before the sweep layer)."""
    ordered = sorted(specs, key=_cost, reverse=True)
    out = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for fut in as_completed([pool.submit(run_spec, s, compression) for s in ordered]):
            key, res = fut.result()
            out[key] = res
    return out


def _comparable(results):
    return {k: {f: v for f, v in r.items() if f != "cpu_s"} for k, r in results.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="reports")
    args = ap.parse_args(argv)
    specs = plan(True)
    rev = revision()
    rows, reference = [], None
    for rep in range(args.repeats):
        for name, fn in (("process pool", pool_run), ("sweep layer (Dask)", run_all)):
            load = round(os.getloadavg()[0], 2)
            t0 = time.perf_counter()
            res = fn(specs, args.jobs)
            wall = time.perf_counter() - t0
            same = reference is None or _comparable(res) == reference
            reference = reference or _comparable(res)
            rows.append({"runner": name, "repeat": rep, "wall_s": round(wall, 1), "runs": len(res),
                         "load_1m_before": load, "same_results": same})
            print(f"{name:20s} repeat {rep}: {wall:7.1f} s, {len(res)} runs, load {load}, "
                  f"same results: {same}", flush=True)
    total = {name: sum(r["wall_s"] for r in rows if r["runner"] == name)
             for name in ("process pool", "sweep layer (Dask)")}
    ratio = total["sweep layer (Dask)"] / total["process pool"]
    doc = {**rev, "jobs": args.jobs, "cpus": os.cpu_count(), "plan": "experiments --quick",
           "rows": rows, "sweep_over_pool": round(ratio, 3)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep_overhead.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = ["# Sweep layer against a process pool (`python -m kvfabric.scripts.sweep_overhead`)", "",
             f"Revision {describe(rev)}; the experiments' quick plan ({rows[0]['runs']} runs), {args.jobs} "
             f"workers, {os.cpu_count()} CPUs. Sweep / pool wall time: **{ratio:.2f}** (target <= 1.10).", "",
             "| runner | repeat | wall s | runs | load (1 min) before | same results |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['runner']} | {r['repeat']} | {r['wall_s']} | {r['runs']} | {r['load_1m_before']} | "
              f"{r['same_results']} |" for r in rows]
    (out / "sweep_overhead.md").write_text("\n".join(lines) + "\n")
    print(f"sweep / pool: {ratio:.2f}; wrote {out / 'sweep_overhead.md'}")
    return 0 if all(r["same_results"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
