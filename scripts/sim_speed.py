"""The system model's speed and a fingerprint of what it does (issue #26).

Usage::

    python -m kvfabric.scripts.sim_speed [--cycles C] [--draws N] [--only TEXT] [--json OUT] [--no-log]

Runs the first ``--draws`` workloads of the family (``sim/studies/family.py``,
seed 26, written to ``build/sim_speed/``) under decode-only, FR-FCFS, fabric,
fabric-qos and FCFS for ``--cycles`` memory cycles (seeds 1 and 2 for draw 0,
seed 1 for the others), then every setup A and B run of ``make experiments
--quick`` over its own horizon.  Prints, per run, a digest of its outcome
(channel statistics, the tenants' steps and jobs, the front end's grant
counts, the loop's busy cycles), a digest of its command log (every command
with its cycle, ``Channel(log_commands=...)``) and its memory cycles per CPU
second (``time.process_time``, so another process on the machine slows the
figure less than the wall clock's); then the rate over all runs and over the
runs with prefills.

An optimisation of ``sim/`` must leave every digest unchanged: run this before
and after and compare (``--json`` writes the digests).  The rates depend on
the machine and its load (printed); compare rates measured alternately in
the same period, never assert them in a test.  ``--no-log`` leaves the
command log out (the rate without its cost; the outcome digests stay).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

POLICIES = ("decode-only", "frfcfs", "fabric", "fabric-qos", "fcfs")


def digest(obj) -> str:
    return hashlib.sha256(repr(obj).encode()).hexdigest()[:16]


def outcome(system) -> dict:
    """What a run did, as plain data (the channel's statistics and queue state,
    the tenants' results, the front end's grant counts, the loop's counters)."""
    ch = system.channel
    tenants = [{k: getattr(t, k, None) for k in ("steps", "step_parts", "jobs", "issued", "completed")}
               for t in system.tenants]
    grants = {k: getattr(system.policy, k, None) for k in ("grants", "burst_grants", "class_grants")}
    return {"stats": vars(ch.stats).copy(), "tenants": tenants, "policy": grants, "busy": system.busy_cycles,
            "now": system.now, "occupancy": ch.occupancy, "inflight": len(ch.inflight)}


def runs(cycles, draws, build):
    """``(name, make)`` pairs; ``make()`` returns ``(system, cycles)``, not yet run."""
    from kvfabric.sim.studies import experiments, family
    from kvfabric.sim.studies.scenarios import Scale

    paths = [family.write_draw(family.draw(family.FAMILY_SEED, k), build) for k in range(draws)]
    for k, (c, w) in enumerate(paths):
        for policy in POLICIES:
            for seed in ((1, 2) if k == 0 else (1,)):
                yield (f"draw{k}/{policy}/s{seed}",
                       lambda c=c, w=w, p=policy, s=seed: (family.build_system(c, w, p, s, cycles)[0], cycles))
    for spec in experiments.plan(quick=True):
        if spec["group"] in ("A", "B"):
            yield f"exp/{spec['id']}", lambda spec=spec: experiments.build_run(spec, Scale())[:2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.sim_speed", description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=200_000, help="memory cycles per family run (default 200,000)")
    ap.add_argument("--draws", type=int, default=3, help="family draws (default 3)")
    ap.add_argument("--only", default=None, help="only runs whose name contains this text")
    ap.add_argument("--json", default=None, help="write {run: [outcome digest, log digest, cycles/CPU s]} here")
    ap.add_argument("--no-log", action="store_true", help="no command log (and no log digest)")
    ap.add_argument("--build", default="build/sim_speed", help="where the drawn files go")
    args = ap.parse_args(argv)
    total = [0, 0.0]
    prefills = [0, 0.0]
    out = {}
    for name, make in runs(args.cycles, args.draws, args.build):
        if args.only and args.only not in name:
            continue
        system, cycles = make()
        if not args.no_log:
            system.channel.log = []
        t0 = time.process_time()
        system.run(cycles)
        cpu = time.process_time() - t0
        log = "-" if args.no_log else digest(system.channel.log)
        out[name] = [digest(outcome(system)), log, round(cycles / cpu)]
        total[0] += cycles
        total[1] += cpu
        if "decode-only" not in name and "decode only" not in name:
            prefills[0] += cycles
            prefills[1] += cpu
        print(f"{name:40s} {out[name][0]} {log} {cycles / cpu:10,.0f} cycles/CPU s", flush=True)
    if total[1]:
        rate = f"{prefills[0] / prefills[1]:,.0f}" if prefills[1] else "-"
        print(f"all runs {total[0] / total[1]:,.0f} cycles/CPU s; with prefills {rate}; "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
