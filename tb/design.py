"""The design under test: generated Verilog per parameter set, and how the
test bench hands parameters and configurations to the simulator process.

The Verilog comes from the project's generator (:mod:`kvfabric.hw.verilog`), so
the co-simulation tests exactly what ``make verilog`` ships.  It is written
once per parameter set under ``build/cocotb/verilog/`` (content-addressed by
the runner, so a changed RTL gets a fresh simulator build).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
from pathlib import Path

from kvfabric.spec import FabricParams
from kvfabric.model.registers import FabricConfig, TenantConfig

from .runner import BUILD_ROOT, Build, _locked, build

__all__ = [
    "params_key", "verilog_for", "write_once", "toplevel_of", "build_for",
    "params_to_json", "params_from_json", "config_to_json", "config_from_json",
]


def params_key(params: FabricParams) -> str:
    """Short name of a parameter set, e.g. ``n4c2d4l4096i16t20``."""
    return (f"n{params.tenants}c{params.channels}d{params.queue_depth}"
            f"l{params.max_request_bytes}i{params.id_width}t{params.tag_bits}")


def _generate(params: FabricParams) -> str:
    from kvfabric.hw.verilog import generate  # Amaranth is needed only here
    return generate(params)


def _rtl_hash() -> str:
    """Hash of everything the generated Verilog depends on: the RTL sources, the
    generator and the Amaranth version."""
    import amaranth
    h = hashlib.sha1(amaranth.__version__.encode())
    import kvfabric.hw
    import kvfabric.spec
    sources = [*Path(kvfabric.hw.__file__).parent.glob("*.py"), Path(kvfabric.spec.__file__)]
    for path in sorted(sources):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


@functools.lru_cache(maxsize=None)
def verilog_for(params: FabricParams) -> Path:
    """Write (once per RTL version) and return the generated Verilog of ``params``.

    Generation takes seconds to a minute (the 8 x 8 default: about 35 s of
    elaboration and Yosys); the file is reused by every test process as long
    as the RTL sources are unchanged. A lock per file makes a second process
    that wants the same parameters wait for the first one's file instead of
    generating it again beside it.
    """
    return write_once(BUILD_ROOT / "verilog" / f"kvfabric-{params_key(params)}-{_rtl_hash()}.v",
                      lambda: _generate(params))


def write_once(path: Path, make_text) -> Path:
    """``path``, written with ``make_text()`` unless it exists: under a lock per
    file, so that a second process waits for the first one's text instead of
    making it again beside it, and atomically, so that a reader never sees a
    half-written file."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if not path.exists():
            tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")
            tmp.write_text(make_text())
            os.replace(tmp, path)
    return path


_TOP_RE = re.compile(r"\(\*\s*top\s*=\s*1\s*\*\)\s*(?:\(\*[^)]*\*\)\s*)*module\s+(\S+?)\s*\(", re.S)


def toplevel_of(verilog: Path) -> str:
    """Name of the module Yosys marked ``(* top = 1 *)``."""
    m = _TOP_RE.search(Path(verilog).read_text())
    if not m:
        raise ValueError(f"{verilog}: no module marked (* top = 1 *)")
    return m.group(1)


def build_for(params: FabricParams, sim: str, *, waves: bool = False) -> Build:
    """Build the generated Verilog of ``params`` for ``sim`` (cached); ``waves``
    if a run on it will dump a VCD."""
    v = verilog_for(params)
    return build(sim, [v], toplevel_of(v), f"kvfabric-{params_key(params)}", waves=waves)


# --- passing parameters and configurations to the cocotb process -----------------

def params_to_json(params: FabricParams) -> str:
    return json.dumps(dataclasses.asdict(params), sort_keys=True)


def params_from_json(text: str) -> FabricParams:
    return FabricParams(**json.loads(text))


def config_to_json(config: FabricConfig) -> str:
    return json.dumps({
        "tenants": [dataclasses.asdict(t) for t in config.tenants],
        "fcfs_bypass": int(config.fcfs_bypass),
        "starve_limit": config.starve_limit,
        "epoch_cycles": config.epoch_cycles,
        "credits": list(config.credits),
        "bulk_prio": config.bulk_prio,
        "arrival_prio": config.arrival_prio,
        "bulk_run": config.bulk_run,
        "coord_enable": config.coord_enable,
        "coord_floor": config.coord_floor,
        "coord_epoch_cycles": config.coord_epoch_cycles,
    }, sort_keys=True)


def config_from_json(text: str) -> FabricConfig:
    d = json.loads(text)
    return FabricConfig([TenantConfig(**t) for t in d["tenants"]], fcfs_bypass=d["fcfs_bypass"],
                        starve_limit=d["starve_limit"], epoch_cycles=d["epoch_cycles"],
                        credits=tuple(d.get("credits", (0, 0, 0))), bulk_prio=d.get("bulk_prio", 0),
                        arrival_prio=d.get("arrival_prio", 0), bulk_run=d.get("bulk_run", 0),
                        coord_enable=d.get("coord_enable", 0), coord_floor=d.get("coord_floor", 0),
                        coord_epoch_cycles=d.get("coord_epoch_cycles", 0))


def run_cosim(params: FabricParams, sim: str, scenario: str, test_dir, *, seed: int,
              cycles: int | None = None, waves: bool | None = None,
              module: str = "kvfabric.tb.tests.cosim_tests"):
    """Run cocotb scenario ``scenario`` (all its parametrized variants) of ``module``
    on the generated Verilog of ``params`` under ``sim``, in ``test_dir``.

    ``waves`` (default: ``WAVES`` from the environment) dumps ``test_dir/dump.vcd``.
    Raises ``AssertionError`` with the scoreboard's first mismatch on failure.
    """
    from .runner import run, waves_from_env
    if waves is None:
        waves = waves_from_env()
    b = build_for(params, sim, waves=waves)
    test_dir = Path(test_dir)
    env = {"KVF_PARAMS": params_to_json(params), "KVF_SEED": seed}
    if cycles is not None:
        env["KVF_CYCLES"] = cycles
    return run(b, module, test_dir, test_filter=rf"\.{re.escape(scenario)}(/.*)?$",
               extra_env=env, vcd=(test_dir / "dump.vcd") if waves else None,
               log_file=test_dir / "sim.log")
