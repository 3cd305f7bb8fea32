"""``make soak``: millions of cycles of the full fabric on each simulator against the model.

    python -m kvfabric.scripts.soak [--cycles 10000000] [--icarus-cycles 200000]
        [--sims icarus,verilator] [--seed N] [--jobs 2] [--tenants 8 --channels 8]

The trace-driven co-simulation (tb/trace_*.py): a random stimulus with the
cocotb soak's choices (tb/trace_stimulus.py) runs through the plain-Verilog
testbench on each simulator while the golden model runs the same stimulus in
``--jobs`` processes; the grant logs are compared afterwards and the first
mismatch (cycle, channel, field) is printed.  Icarus gets its own, shorter
stimulus of the same seed (``--icarus-cycles``): it simulates the 8 x 8 fabric
at only a few hundred cycles per second (reports/soak.md).  Writes
``reports/soak.json`` and ``reports/soak.md``; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from kvfabric.provenance import describe, revision
from kvfabric.spec import FabricParams
from kvfabric.tb.runner import BUILD_ROOT, SIMS
from kvfabric.tb.trace_check import run_check
from kvfabric.tb.trace_stimulus import soak_stimulus


def _seed(arg) -> int:
    if arg is not None:
        return arg
    env = os.environ.get("KVFABRIC_SEED", "").strip()
    return int(env) if env else 1


def soak(params, sims, cycles: int, seed: int, jobs: int, work: Path) -> dict:
    t0 = time.monotonic()
    events = soak_stimulus(params, seed, cycles)
    gen_s = time.monotonic() - t0
    print(f"[soak] stimulus: {cycles:,} cycles, {len(events):,} events, seed {seed} "
          f"({gen_s:.1f} s); simulating on {', '.join(sims)}", flush=True)
    res = run_check(params, events, sims, work, jobs=jobs, stimulus_seconds=gen_s)
    out = {"cycles": res.cycles, "seed": seed, "events": res.stimulus_events,
           "stimulus_seconds": round(gen_s, 1), "model_seconds": round(res.model_seconds, 1),
           "model_cpu_seconds": round(res.model_cpu_seconds, 1),
           "model_cycles_per_s": round(res.cycles / res.model_seconds),
           "model_grants": res.model_grants, "waiting_at_end": res.waiting_at_end,
           "wall_seconds": round(res.wall_seconds, 1), "sims": []}
    for s in res.sims:
        print(f"[soak] {s.sim:9s} {s.cycles:>11,} cycles {s.seconds:8.1f} s {s.rate:>9,.0f} cycles/s "
              f"(CPU {s.cpu_seconds:.1f} s, {s.cpu_rate:,.0f} cycles/CPU-s) "
              f"{s.grants:>10,} grants  mismatches {s.mismatches}"
              + (f"  {s.mismatch}" if s.mismatch else ""), flush=True)
        out["sims"].append({"sim": s.sim, "cycles": s.cycles, "seconds": round(s.seconds, 1),
                            "cycles_per_s": round(s.rate), "cpu_seconds": round(s.cpu_seconds, 1),
                            "cycles_per_cpu_s": round(s.cpu_rate), "grants": s.grants,
                            "mismatches": s.mismatches,
                            "first_mismatch": str(s.mismatch) if s.mismatch else None,
                            "build_seconds": round(s.build_seconds, 1)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=10_000_000)
    ap.add_argument("--icarus-cycles", type=int, default=200_000)
    ap.add_argument("--sims", default=",".join(SIMS))
    ap.add_argument("--seed", type=int, default=None, help="default: KVFABRIC_SEED or 1")
    ap.add_argument("--jobs", type=int, default=2, help="model processes")
    ap.add_argument("--tenants", type=int, default=FabricParams().tenants)
    ap.add_argument("--channels", type=int, default=FabricParams().channels)
    ap.add_argument("--json", default="reports/soak.json")
    args = ap.parse_args(argv)
    params = FabricParams(tenants=args.tenants, channels=args.channels)
    sims = [s.strip() for s in args.sims.split(",") if s.strip()]
    for s in sims:
        if s not in SIMS:
            ap.error(f"--sims: {s!r} is not one of {', '.join(SIMS)}")
    seed = _seed(args.seed)
    t0 = time.monotonic()
    rev = revision()
    runs = []
    if "icarus" in sims:
        runs.append(soak(params, ["icarus"], args.icarus_cycles, seed, args.jobs,
                         BUILD_ROOT / "soak" / "icarus"))
    others = [s for s in sims if s != "icarus"]
    if others:
        runs.append(soak(params, others, args.cycles, seed, args.jobs, BUILD_ROOT / "soak" / "main"))
    total = time.monotonic() - t0
    report = {
        **rev,
        "what": "trace-driven co-simulation (plain-Verilog testbench, grant logs compared with "
                "the golden model's afterwards), random soak stimulus",
        "params": {"tenants": params.tenants, "channels": params.channels},
        "command": "make soak",
        "machine": {"cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2),
                    "python": platform.python_version()},
        "total_seconds": round(total, 1),
        "runs": runs,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# kvfabric soak (`make soak`)", "",
             f"Revision {describe(rev)}. {params.tenants} tenants x {params.channels} channels; machine: {os.cpu_count()} CPUs, "
             f"load average {report['machine']['loadavg_1m']} at the end; total {total / 60:.1f} min.", "",
             "| simulator | cycles | seconds | cycles/s | CPU s | cycles/CPU-s | grants | mismatches "
             "| model s (CPU s, jobs) | check wall s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for s in r["sims"]:
            lines.append(f"| {s['sim']} | {s['cycles']:,} | {s['seconds']:,} | {s['cycles_per_s']:,} | "
                         f"{s['cpu_seconds']:,} | {s['cycles_per_cpu_s']:,} | "
                         f"{s['grants']:,} | {s['mismatches']} | {r['model_seconds']} "
                         f"({r['model_cpu_seconds']}, {args.jobs}) | {r['wall_seconds']} |")
    Path(args.json).with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"[soak] total {total:.0f} s; wrote {args.json} and {Path(args.json).with_suffix('.md')}")
    bad = [s for r in runs for s in r["sims"] if s["mismatches"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
