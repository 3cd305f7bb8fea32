"""Co-simulation speed: checked cycles per second on each simulator.

    python -m kvfabric.scripts.bench_cosim [--cycles 20000] [--sims icarus,verilator] [--seed 1]

Runs the random soak scenario (``tb/tests/cosim_tests.py::random_long``: random
traffic, reconfiguration, FCFS phases and resets, with the lockstep scoreboard
comparing ports and internal state every cycle) on the 4-tenant, 2-channel
build of ``tests/test_cosim.py`` and reports, per simulator, the simulated
cycles divided by the test's wall-clock time as measured by cocotb (simulator
start-up and the build excluded; the build time is reported separately).
Writes ``reports/bench_cosim.json``.  A measurement, not a test: nothing is
asserted, and the numbers depend on the machine and its load (the load average
is recorded with them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from kvfabric.provenance import revision
from kvfabric.spec import FabricParams
from kvfabric.tb.design import build_for, run_cosim
from kvfabric.tb.runner import BUILD_ROOT, SIMS

CLOCK_NS = 10  # tb/env.py's clock period


def bench(sim: str, params: FabricParams, cycles: int, seed: int) -> dict:
    t0 = time.perf_counter()
    build_for(params, sim)
    build_s = time.perf_counter() - t0
    out = BUILD_ROOT / "bench" / sim
    t0 = time.perf_counter()
    results = run_cosim(params, sim, "random_long", out, seed=seed, cycles=cycles, waves=False)
    total_s = time.perf_counter() - t0
    tc = next(ET.parse(results).iter("testcase"))
    props = {p.get("name"): p.get("value") for p in tc.iter("property")}
    assert props.get("sim_time_unit") == "ns", props
    sim_cycles = round(float(props["sim_time_duration"]) / CLOCK_NS)
    test_s = float(tc.get("time"))
    return {
        "simulator": sim,
        "cycles": sim_cycles,
        "test_seconds": round(test_s, 2),
        "cycles_per_second": round(sim_cycles / test_s),
        "run_seconds_incl_startup": round(total_s, 2),
        "build_seconds_or_cached": round(build_s, 2),
        "seed": seed,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=20000, help="cycles per simulator (default 20000)")
    ap.add_argument("--sims", default=",".join(SIMS), help="comma-separated simulators")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="reports/bench_cosim.json")
    args = ap.parse_args(argv)
    params = FabricParams(tenants=4, channels=2)
    rows = []
    for sim in [s.strip() for s in args.sims.split(",") if s.strip()]:
        r = bench(sim, params, args.cycles, args.seed)
        rows.append(r)
        print(f"{sim:10s} {r['cycles']:8d} cycles in {r['test_seconds']:7.2f} s: "
              f"{r['cycles_per_second']:6d} checked cycles/s "
              f"(run incl. start-up {r['run_seconds_incl_startup']:.1f} s)")
    report = {
        **revision(),
        "what": "cocotb co-simulation of the generated Verilog, golden model in lockstep, "
                "ports and internal state compared every cycle (scenario random_long)",
        "params": {"tenants": params.tenants, "channels": params.channels},
        "machine": {"cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2),
                    "python": platform.python_version()},
        "results": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
