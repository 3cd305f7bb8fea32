"""Replay engines by name: the golden model, or the generated Verilog under a simulator.

The command line looks an engine up here and calls it; the engine reaches the
design itself, so a replay goes command -> engine -> design and never back up.
Simulator engines import cocotb only when they are used.
"""

from __future__ import annotations

from typing import Callable

from kvfabric.model.replay import replay_model

__all__ = ["ENGINES", "replay"]


def _model(params, config, rows, bytes_per_cycle, waves):
    return replay_model(params, config, rows, bytes_per_cycle).log


def _simulator(sim: str) -> Callable:
    def engine(params, config, rows, bytes_per_cycle, waves):
        from kvfabric.tb.replay_engine import replay_rtl  # needs cocotb and the simulator
        return replay_rtl(params, config, rows, sim, bytes_per_cycle=bytes_per_cycle, waves=waves)
    engine.__name__ = f"replay_{sim}"
    return engine


#: Engine name -> ``engine(params, config, rows, bytes_per_cycle, waves) -> grant log``.
ENGINES: dict[str, Callable] = {
    "model": _model,
    "icarus": _simulator("icarus"),
    "verilator": _simulator("verilator"),
}


def replay(engine: str, params, config, rows, bytes_per_cycle, *, waves: bool = False):
    """Grant log of ``rows`` replayed by ``engine`` (spec §8's memory side)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    return ENGINES[engine](params, config, rows, bytes_per_cycle, waves)
