"""The AXI4 top (spec §14) as a design under test: its Verilog per parameter
pair, its simulator build, and how parameters reach the cocotb process.

Like :mod:`kvfabric.tb.design` for the bare arbiter: the Verilog is what
``kvfabric verilog --axi`` writes, regenerated when any RTL source changes.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from pathlib import Path

from kvfabric.axi import AxiParams
from kvfabric.spec import FabricParams

from .design import params_key, toplevel_of, write_once
from .runner import BUILD_ROOT, Build, build

__all__ = ["AXI_TOP_NAME", "axi_key", "axi_verilog_for", "axi_build_for", "axi_job_json", "axi_job_from_json",
           "run_axi_cosim"]

#: Top module of the AXI4 Verilog.
AXI_TOP_NAME = "kvfabric_axi"


def axi_key(params: FabricParams, axi: AxiParams) -> str:
    return (f"{params_key(params)}-a{axi.addr_width}d{axi.data_width}i{axi.id_width}"
            f"il{axi.interleave_bytes}f{axi.frag_beats}r{axi.read_entries}w{axi.write_entries}"
            f"{'-memclk' if axi.mem_clock else ''}{'-shared' if axi.shared_port else ''}")


def _rtl_hash() -> str:
    import amaranth
    import kvfabric.axi
    import kvfabric.hw
    import kvfabric.spec
    h = hashlib.sha1(amaranth.__version__.encode())
    root = Path(kvfabric.hw.__file__).parent
    sources = [*root.rglob("*.py"), Path(kvfabric.spec.__file__), Path(kvfabric.axi.__file__)]
    for path in sorted(sources):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


@functools.lru_cache(maxsize=None)
def axi_verilog_for(params: FabricParams, axi: AxiParams) -> Path:
    """Write (once per RTL version) and return the AXI4 top's Verilog; like
    :func:`kvfabric.tb.design.verilog_for`, a second process waits for the
    first one's file instead of generating it beside it."""
    from kvfabric.hw.verilog import generate_axi
    return write_once(BUILD_ROOT / "verilog" / f"kvfabric_axi-{axi_key(params, axi)}-{_rtl_hash()}.v",
                      lambda: generate_axi(params, axi))


def axi_build_for(params: FabricParams, axi: AxiParams, sim: str, *, waves: bool = False) -> Build:
    """Build the AXI4 top of ``params``/``axi`` for ``sim`` (cached); ``waves``
    if a run on it will dump a VCD."""
    v = axi_verilog_for(params, axi)
    return build(sim, [v], toplevel_of(v), f"kvfabric_axi-{axi_key(params, axi)}", waves=waves)


def axi_job_json(params: FabricParams, axi: AxiParams, **extra) -> str:
    return json.dumps({"params": dataclasses.asdict(params), "axi": dataclasses.asdict(axi), **extra},
                      sort_keys=True)


def axi_job_from_json(text: str):
    d = json.loads(text)
    return FabricParams(**d.pop("params")), AxiParams(**d.pop("axi")), d


def run_axi_cosim(params: FabricParams, axi: AxiParams, sim: str, scenario: str, test_dir, *, seed: int,
                  module: str = "kvfabric.tb.tests.axi_tests", waves: bool | None = None, **extra):
    """Run cocotb test ``scenario`` of ``module`` on the AXI4 top under ``sim``.

    ``extra`` goes to the test as fields of the job (``KVF_AXI_JOB``).
    """
    from .runner import run, waves_from_env
    if waves is None:
        waves = waves_from_env()
    b = axi_build_for(params, axi, sim, waves=waves)
    test_dir = Path(test_dir)
    test_dir.mkdir(parents=True, exist_ok=True)
    env = {"KVF_AXI_JOB": axi_job_json(params, axi, **extra), "KVF_SEED": seed}
    return run(b, module, test_dir, test_filter=rf"\.{re.escape(scenario)}(/.*)?$", extra_env=env,
               vcd=(test_dir / "dump.vcd") if waves else None, log_file=test_dir / "sim.log")
