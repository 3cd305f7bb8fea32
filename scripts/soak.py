"""``make soak``: millions of cycles of the full fabric on each simulator against the model,
as independent seeded segments from reset on the sweep layer (kvfabric.sweep, issue #29).

    python -m kvfabric.scripts.soak [--cycles 10000000] [--icarus-cycles 10000000]
        [--segment-cycles 500000] [--sims icarus,verilator] [--seed N] [--jobs 2]
        [--scheduler tcp://host:port] [--tenants 8 --channels 8]

Each simulator's total is cut into segments of ``--segment-cycles``; segment
k of a simulator runs its own random stimulus (tb/trace_stimulus.py, the
cocotb soak's choices) with seed ``seed * 100000 + k`` from reset through the
plain-Verilog testbench (tb/trace_*.py) and compares the grant log with the
golden model's; a mismatch names the simulator, the segment, its seed and the
first differing cycle.  Segments are tasks of one Dask sweep (local workers,
``--jobs``, or the scheduler of ``--scheduler`` / $KVFABRIC_SCHEDULER), so
the report is the same whatever the workers; it gives each simulator's
cycles, simulator seconds summed over segments (cycles/s per worker), and
the wall time predicted from the measured segment times for 8, 32 and 128
workers.  Writes ``reports/soak.json`` and ``reports/soak.md``; exits 1 on
any mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from kvfabric.provenance import describe, revision
from kvfabric.spec import FabricParams
from kvfabric.sweep import predicted_wall, run_sweep
from kvfabric.tb.runner import BUILD_ROOT, SIMS
from kvfabric.tb.trace_check import run_check
from kvfabric.tb.trace_stimulus import soak_stimulus
from kvfabric.tb.trace_tb import build_trace_tb

#: Worker counts the report predicts the wall time for (from measured segment times).
PREDICT_WORKERS = (8, 32, 128)


def _seed(arg) -> int:
    if arg is not None:
        return arg
    env = os.environ.get("KVFABRIC_SEED", "").strip()
    return int(env) if env else 1


def segment_seed(seed: int, index: int) -> int:
    """Segment ``index``'s stimulus seed: its own, not its position in any run order."""
    return seed * 100_000 + index


def soak_segment(tenants: int, channels: int, sim: str, index: int, seed: int, cycles: int) -> dict:
    """One sweep task: a segment's stimulus through ``sim`` and the model, compared."""
    params = FabricParams(tenants=tenants, channels=channels)
    t0 = time.monotonic()
    events, rows = soak_stimulus(params, seed, cycles)
    gen_s = time.monotonic() - t0
    work = BUILD_ROOT / "soak" / sim / f"segment-{index:05d}"
    res = run_check(params, events, rows, [sim], work, jobs=1, log=lambda *a, **k: None, stimulus_seconds=gen_s)
    (s,) = res.sims
    if s.mismatch is None:
        shutil.rmtree(work, ignore_errors=True)  # logs of a passing segment are not kept
    return {"segment": index, "seed": seed, "cycles": s.cycles, "events": res.stimulus_events,
            "wall_seconds": round(time.monotonic() - t0, 2), "seconds": round(s.seconds, 2),
            "cpu_seconds": round(s.cpu_seconds, 2), "model_seconds": round(res.model_seconds, 2),
            "grants": s.grants, "model_grants": res.model_grants, "waiting_at_end": res.waiting_at_end,
            "mismatch": str(s.mismatch) if s.mismatch else None}


def summarize_sim(sim: str, segments: list[dict], build_seconds: float) -> dict:
    """One simulator's row of the report from its segments (in segment order)."""
    cycles = sum(g["cycles"] for g in segments)
    seconds = sum(g["seconds"] for g in segments)
    cpu = sum(g["cpu_seconds"] for g in segments)
    bad = [g for g in segments if g["mismatch"]]
    first = (f"segment {bad[0]['segment']} (seed {bad[0]['seed']}): {bad[0]['mismatch']}" if bad else None)
    walls = [g["wall_seconds"] for g in segments]
    return {"sim": sim, "cycles": cycles, "segments": len(segments), "seconds": round(seconds, 1),
            "cycles_per_s": round(cycles / seconds) if seconds else 0, "cpu_seconds": round(cpu, 1),
            "cycles_per_cpu_s": round(cycles / cpu) if cpu else 0,
            "grants": sum(g["grants"] for g in segments), "mismatches": len(bad), "first_mismatch": first,
            "build_seconds": round(build_seconds, 1),
            "predicted_wall_seconds": {str(w): round(predicted_wall(walls, w), 1) for w in PREDICT_WORKERS},
            "segment_results": segments}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=10_000_000, help="cycles on Verilator")
    ap.add_argument("--icarus-cycles", type=int, default=10_000_000, help="cycles on Icarus")
    ap.add_argument("--segment-cycles", type=int, default=500_000,
                    help="cycles per segment, each from reset with its own seed (default 500000)")
    ap.add_argument("--sims", default=",".join(SIMS))
    ap.add_argument("--seed", type=int, default=None, help="default: KVFABRIC_SEED or 1")
    ap.add_argument("--jobs", type=int, default=2, help="local Dask workers (default 2)")
    ap.add_argument("--scheduler", default=None,
                    help="address of a running Dask scheduler (default: $KVFABRIC_SCHEDULER, else local workers)")
    ap.add_argument("--tenants", type=int, default=FabricParams().tenants)
    ap.add_argument("--channels", type=int, default=FabricParams().channels)
    ap.add_argument("--json", default="reports/soak.json")
    args = ap.parse_args(argv)
    params = FabricParams(tenants=args.tenants, channels=args.channels)
    sims = [s.strip() for s in args.sims.split(",") if s.strip()]
    for s in sims:
        if s not in SIMS:
            ap.error(f"--sims: {s!r} is not one of {', '.join(SIMS)}")
    if args.segment_cycles < 100_000:
        ap.error(f"--segment-cycles {args.segment_cycles}: at least 100000 (each segment ends with a "
                 f"60000-cycle drain)")
    seed = _seed(args.seed)
    totals = {sim: (args.icarus_cycles if sim == "icarus" else args.cycles) for sim in sims}
    t0 = time.monotonic()
    rev = revision()
    builds = {}
    for sim in sims:  # once, before the sweep: a Verilator 8 x 8 build takes minutes
        builds[sim] = build_trace_tb(params, sim, log=print).build_seconds
    tasks = []
    for sim in sorted(sims, key=lambda s: s != "icarus"):  # the slow simulator's segments first
        total = totals[sim]
        for k in range((total + args.segment_cycles - 1) // args.segment_cycles):
            cycles = min(args.segment_cycles, total - k * args.segment_cycles)
            tasks.append((f"{sim}/{k}", (params.tenants, params.channels, sim, k, segment_seed(seed, k),
                                         max(cycles, 100_000))))
    print(f"[soak] {len(tasks)} segments of up to {args.segment_cycles:,} cycles, seed {seed}: "
          + ", ".join(f"{sim} {totals[sim]:,} cycles" for sim in sims), flush=True)
    info = {}
    swept = run_sweep(soak_segment, tasks, workers=args.jobs, scheduler=args.scheduler, desc="soak", info=info)
    failed = [r for r in swept if not r.ok]
    for r in failed:
        print(f"[soak] segment {r.task_id} failed: {r.error}", file=sys.stderr)
    runs = []
    for sim in sims:
        segments = [r.value for r in swept if r.ok and r.task_id.startswith(sim + "/")]
        row = summarize_sim(sim, segments, builds[sim])
        print(f"[soak] {sim:9s} {row['cycles']:>11,} cycles in {row['segments']} segments, "
              f"{row['cycles_per_s']:,} cycles/s per worker, mismatches {row['mismatches']}"
              + (f"  {row['first_mismatch']}" if row["first_mismatch"] else ""), flush=True)
        runs.append({"cycles": row["cycles"], "seed": seed, "sims": [row]})
    total = time.monotonic() - t0
    report = {
        **rev,
        "what": "trace-driven co-simulation (plain-Verilog testbench, grant logs compared with "
                "the golden model's afterwards), random soak stimulus in independent segments from reset",
        "params": {"tenants": params.tenants, "channels": params.channels},
        "command": "make soak",
        "machine": {"cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2),
                    "python": platform.python_version()},
        "workers": info.get("workers"), "scheduler": info.get("scheduler"),
        "segment_cycles": args.segment_cycles, "segment_seed": "seed * 100000 + segment",
        "failed_segments": [{"segment": r.task_id, "error": r.error} for r in failed],
        "total_seconds": round(total, 1),
        "runs": runs,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# kvfabric soak (`make soak`)", "",
             f"Revision {describe(rev)}. {params.tenants} tenants x {params.channels} channels, segments of "
             f"{args.segment_cycles:,} cycles from reset (seed {seed} x 100000 + segment); "
             f"{info.get('workers')} worker(s) ({info.get('scheduler')}); machine: {os.cpu_count()} CPUs, "
             f"load average {report['machine']['loadavg_1m']} at the end; total {total / 60:.1f} min.", "",
             "| simulator | cycles | segments | simulator s (sum) | cycles/s per worker | CPU s | grants "
             "| mismatches | predicted wall s on " + " / ".join(map(str, PREDICT_WORKERS)) + " workers |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for s in r["sims"]:
            pred = " / ".join(f"{s['predicted_wall_seconds'][str(w)]:,}" for w in PREDICT_WORKERS)
            lines.append(f"| {s['sim']} | {s['cycles']:,} | {s['segments']} | {s['seconds']:,} | "
                         f"{s['cycles_per_s']:,} | {s['cpu_seconds']:,} | {s['grants']:,} | {s['mismatches']} "
                         f"| {pred} (predicted) |")
    if failed:
        lines += ["", "Failed segments: " + ", ".join(r.task_id for r in failed)]
    Path(args.json).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"[soak] total {total:.0f} s; wrote {args.json} and {Path(args.json).with_suffix('.md')}")
    bad = [s for r in runs for s in r["sims"] if s["mismatches"]]
    return 1 if bad or failed else 0


if __name__ == "__main__":
    sys.exit(main())
