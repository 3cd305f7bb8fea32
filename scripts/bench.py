"""``make bench``: how fast the golden model, the co-simulation and the system model run.

Writes ``reports/bench.json`` and ``reports/bench.md``. Measured, never
asserted: the numbers depend on the machine and on what else runs on it, so
the report records the CPU count and load next to them, and the revision it
ran (``kvfabric.provenance``: the commit and whether the source differed from it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path

from kvfabric.provenance import describe, revision
from kvfabric.spec import FabricParams
from kvfabric.model.channel import ChannelModel, Request
from kvfabric.model.contract import load_contract
from kvfabric.model.fabric import FabricModel
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.model.replay import replay_model
from kvfabric.model.scenario import essay_trace


def _saturated_config(p: FabricParams) -> FabricConfig:
    return FabricConfig([TenantConfig(rate=100, capacity=1 << 20, peak_rate=400, inv_weight=2048,
                                      priority=i % 4, enable=1) for i in range(p.tenants)],
                        starve_limit=5000)


def bench_channel_step(cycles: int) -> dict:
    """One channel stepped cycle by cycle, a request offered and the memory ready every cycle."""
    p = FabricParams(channels=1)
    ch = ChannelModel(p, _saturated_config(p))
    rng = random.Random(1)
    reqs = [Request(rng.randrange(p.tenants), rng.choice([64, 256]), i & 0xFFFF) for i in range(cycles)]
    grants = k = 0
    t0 = time.perf_counter()
    for t in range(cycles):
        res = ch.step(t & 0xFFFFFF, reqs[k], True)
        k += res.accepted
        grants += res.transferred is not None
    dt = time.perf_counter() - t0
    return {"what": "ChannelModel.step, saturated (1 channel x 8 tenants, a grant almost every cycle)",
            "cycles": cycles, "grants": grants, "seconds": dt, "cycles_per_s": cycles / dt}


def bench_fabric_step(cycles: int) -> dict:
    """The whole 8 x 8 fabric with telemetry stepped in lockstep (what co-simulation does)."""
    p = FabricParams()
    fab = FabricModel(p, _saturated_config(p))
    rng = random.Random(2)
    ready = [True] * p.channels
    t0 = time.perf_counter()
    for t in range(cycles):
        fab.step([Request(rng.randrange(p.tenants), 256, t & 0xFFFF) for _ in range(p.channels)], ready)
    dt = time.perf_counter() - t0
    return {"what": "FabricModel.step, 8 channels x 8 tenants + telemetry, saturated",
            "cycles": cycles, "seconds": dt, "cycles_per_s": cycles / dt,
            "channel_cycles_per_s": cycles * p.channels / dt}


def bench_replay(decode_cycles: int) -> dict:
    """``kvfabric replay --engine model`` on the demo's essay trace (with fast-forward)."""
    compiled = load_contract("examples/essay.toml")
    rows = essay_trace(compiled.params.channels, cycles=decode_cycles)
    t0 = time.perf_counter()
    result = replay_model(compiled.params, compiled.config, rows, compiled.bytes_per_cycle)
    dt = time.perf_counter() - t0
    ch_cycles = result.cycles * compiled.params.channels
    return {"what": "replay of the essay trace (examples/essay.toml, 8 channels), fast-forward on",
            "requests": len(rows), "cycles": result.cycles, "seconds": dt,
            "cycles_per_s": result.cycles / dt, "channel_cycles_per_s": ch_cycles / dt}


def bench_cosim(cycles: int) -> list[dict]:
    """Checked co-simulation (scripts/bench_cosim.py) of the regression's
    4-tenant x 2-channel build and of the default 8 x 8 fabric."""
    from kvfabric.scripts.bench_cosim import bench  # cocotb + simulators
    out = []
    for params in (FabricParams(tenants=4, channels=2), FabricParams()):
        shape = f"{params.tenants} tenants x {params.channels} channels"
        for sim in ("icarus", "verilator"):
            r = bench(sim, params, cycles, seed=1)
            r.update(sim=sim, what=f"cocotb, {shape}, golden model compared every cycle",
                     cycles_per_s=r["cycles_per_second"])
            out.append(r)
    return out


def bench_cosim_trace(scale: float) -> list[dict]:
    """Trace-driven co-simulation (tb/trace_check.py) of the default 8 x 8 fabric on
    the soak stimulus: the simulator's rate (cycles / its run's wall time) and the
    checked rate (cycles / wall time of simulator and model running in parallel,
    logs compared; builds excluded).  Icarus runs fewer cycles: it is the slower
    simulator on this design by far, whatever the testbench (the report says how much)."""
    from kvfabric.tb.runner import BUILD_ROOT
    from kvfabric.tb.trace_check import run_check
    from kvfabric.tb.trace_stimulus import soak_stimulus
    from kvfabric.tb.trace_tb import build_trace_tb
    params = FabricParams()
    out = []
    for sim, cycles in (("icarus", int(20_000 * scale)), ("verilator", int(1_000_000 * scale))):
        build_trace_tb(params, sim)  # not timed
        events, rows = soak_stimulus(params, 1, cycles, tail=min(60_000, cycles // 4))
        t0 = time.perf_counter()
        res = run_check(params, events, rows, [sim], BUILD_ROOT / "bench" / f"trace-{sim}", jobs=2)
        wall = time.perf_counter() - t0
        s = res.sims[0]
        out.append({"sim": sim, "what": "trace-driven (plain-Verilog testbench, no Python per cycle), "
                                        "8 tenants x 8 channels, grant log compared with the model's",
                    "cycles": res.cycles, "sim_seconds": round(s.seconds, 2),
                    "sim_cycles_per_s": round(s.rate), "sim_cpu_seconds": round(s.cpu_seconds, 2),
                    "sim_cycles_per_cpu_s": round(s.cpu_rate),
                    "model_cpu_seconds": round(res.model_cpu_seconds, 2),
                    "model_seconds": round(res.model_seconds, 2),
                    "checked_seconds": round(wall, 2), "cycles_per_s": round(res.cycles / wall),
                    "mismatches": s.mismatches})
    return out


def bench_system(labels=("FR-FCFS", "Fabric")) -> list[dict]:
    """The HBM3 command-level system model on the essay's setup A (``--quick`` scale)."""
    from kvfabric.sim.studies.experiments import build_run, plan  # the experiment runner's own construction
    from kvfabric.sim.hbm3 import HBM3_6400
    from kvfabric.sim.studies.scenarios import Scale

    out = []
    specs = {s["label"]: s for s in plan(quick=True) if s["group"] == "A"}
    for label in labels:
        system, horizon, _, _ = build_run(specs[label], Scale())
        t0 = time.perf_counter()
        system.run(horizon)
        dt = time.perf_counter() - t0
        ns = horizon * HBM3_6400.tck_ps / 1000
        out.append({"sim": label, "what": f"sim/ setup A (1 prefill + 3 decode), policy {label}",
                    "cycles": horizon, "seconds": dt, "cycles_per_s": horizon / dt,
                    "simulated_ns_per_s": ns / dt})
    return out


def bench_system_family(cycles: int, policies=("frfcfs", "fabric-qos")) -> list[dict]:
    """The system model with prefills running (issue #26's speed target): the
    workload family's first draw (three prefills, one backlogged, four decodes),
    in CPython and in PyPy (as ``make family`` runs it), cycles per CPU second
    of the process that simulates."""
    import tempfile

    from kvfabric.sim.studies import family
    from kvfabric.sim.studies.family_run import simulate
    from kvfabric.sim.studies.pypy import call, default_pypy, interpreter_of

    pypy = default_pypy()
    # This interpreter, then PyPy when there is one (make's set-up creates it).
    names = {python: interpreter_of(python) for python in (None, pypy)}
    out = []
    with tempfile.TemporaryDirectory() as build:
        paths = family.write_draw(family.draw(family.FAMILY_SEED, 0), build)
        for policy in policies:
            spec = family.plan([paths], policies=[policy], seeds=[1], cycles=cycles)[0]
            for python, name in names.items():
                if python is None:
                    _, r = simulate(spec)
                else:
                    _, r = call(python, "kvfabric.sim.studies.family_run", "simulate", spec)
                out.append({"sim": f"{name}, {policy}",
                            "what": f"sim/ family draw 0 (3 prefills, one backlogged, 4 decodes), {cycles:,} cycles, "
                                    "rate per CPU second",
                            "cycles": cycles, "cpu_seconds": round(r["cpu_s"], 2),
                            "cycles_per_s": cycles / r["cpu_s"]})
    return out


def table(results: dict) -> str:
    lines = ["| benchmark | what | rate |", "|---|---|---|"]
    for name, r in results.items():
        if isinstance(r, list):
            for item in r:
                rate = f"{item.get('cycles_per_s', 0):,.0f} cycles/s"
                if "sim_cycles_per_s" in item:
                    rate += (f" checked ({item['sim_cycles_per_s']:,.0f} cycles/s simulator alone, "
                             f"{item['cycles']:,} cycles, {item['mismatches']} mismatches)")
                if "simulated_ns_per_s" in item:
                    rate += f" ({item['simulated_ns_per_s']:,.0f} simulated ns/s)"
                lines.append(f"| {name} ({item.get('sim', '')}) | {item.get('what', '')} | {rate} |")
            continue
        if "error" in r:
            lines.append(f"| {name} | not measured | {r['error']} |")
            continue
        rate = (f"{r['simulated_ns_per_s']:,.0f} simulated ns/s" if "simulated_ns_per_s" in r
                else f"{r['cycles_per_s']:,.0f} cycles/s")
        if "channel_cycles_per_s" in r:
            rate += f" ({r['channel_cycles_per_s']:,.0f} channel-cycles/s)"
        lines.append(f"| {name} | {r['what']} | {rate} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="shorter runs (for a smoke check)")
    ap.add_argument("--only", choices=["model", "cosim", "trace", "system", "family"], action="append",
                    help="run only these groups (default: all)")
    ap.add_argument("--out", default="reports/bench.json")
    args = ap.parse_args(argv)
    groups = args.only or ["model", "cosim", "system", "family"]
    scale = 0.2 if args.quick else 1.0
    results: dict = {}
    if "model" in groups:
        print("benchmarking the golden model ...", flush=True)
        results["model_channel_step"] = bench_channel_step(int(200_000 * scale))
        results["model_fabric_step"] = bench_fabric_step(int(20_000 * scale))
        results["model_replay"] = bench_replay(int(40_000 * scale))
    if "cosim" in groups:
        print("benchmarking co-simulation (builds the RTL on first use) ...", flush=True)
        results["cosim"] = bench_cosim(int(20_000 * scale))
    if "cosim" in groups or "trace" in groups:
        print("benchmarking trace-driven co-simulation (builds the testbench on first use) ...", flush=True)
        results["cosim_trace"] = bench_cosim_trace(scale)
    if "system" in groups:
        print("benchmarking the HBM3 system model ...", flush=True)
        results["system_model"] = bench_system()
    if "family" in groups:
        print("benchmarking the HBM3 system model with prefills running, CPython and PyPy ...", flush=True)
        results["system_model_prefills"] = bench_system_family(int(4_000_000 * scale))
    report = {**revision(), "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                        "load_avg_1m": os.getloadavg()[0]}, "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    md = Path(args.out).with_suffix(".md")
    md.write_text(f"# kvfabric benchmarks (`make bench`)\n\nRevision {describe(report)}. Machine: "
                  f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
                  f"{os.getloadavg()[0]:.2f} at the end.\n\n"
                  + table(results) + "\n")
    print(table(results))
    print(f"wrote {args.out} and {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
