"""Small helpers shared by :mod:`scripts.synth` and :mod:`scripts.state_budget`.

Running the YoWASP tools
    The YoWASP builds of Yosys and nextpnr run in a WebAssembly sandbox that
    sees only the current working directory (docs/synthesis.md, TOOLCHAIN.md).
    Every tool therefore runs with the project root as its working directory
    and every path handed to it is relative to that root; :func:`rel` enforces
    this instead of letting a tool silently write nothing.

Reading netlists
    ``write_json`` netlists name nets by bit numbers; :class:`Netlist` indexes
    them so that a cell's output bit can be turned back into the public wire
    names that alias it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from importlib import metadata
from pathlib import Path

__all__ = [
    "ROOT", "ToolError", "ToolTimeout", "rel", "tool_path", "run_tool", "tool_versions",
    "design_params", "Netlist", "name_pattern", "MARK_REGISTERS", "REGISTER_ATTR", "source_revision",
]

#: Wire attribute that marks the register wires of the RTL (see MARK_REGISTERS).
REGISTER_ATTR = "kvfabric_reg"
#: Yosys commands, to run after ``proc; flatten`` and before any optimisation,
#: that mark every wire driven by a flip-flop's Q output: at that point those
#: are exactly the registers the RTL declared.  The attribute survives
#: synthesis, so that a mapped flip-flop can be named after its RTL register
#: rather than after whichever port happens to alias it.
MARK_REGISTERS = [
    "select -set kvfabric_regs t:$*dff* t:$*dlatch* %u %x:+[Q] t:* %d",
    f"setattr -set {REGISTER_ATTR} 1 @kvfabric_regs",
]

#: The project root: the sandbox root of every YoWASP run.
ROOT = Path(__file__).resolve().parents[1]


class ToolError(RuntimeError):
    """A synthesis tool exited with an error; ``log`` names its full log."""

    def __init__(self, message, log=None):
        super().__init__(message)
        self.log = log


class ToolTimeout(ToolError):
    """A tool ran longer than its time limit and was stopped."""


def rel(path) -> str:
    """``path`` relative to the project root, as a POSIX string.

    Raises ``ValueError`` for a path outside the project: the YoWASP sandbox
    cannot see it.
    """
    p = Path(path)
    if not p.is_absolute():
        p = Path.cwd() / p
    p = p.resolve()
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        raise ValueError(f"{path} is outside the project directory {ROOT}; the YoWASP "
                         f"tools only see files under it (copy it into build/)") from None


def tool_path(name: str) -> str:
    """The executable ``name``, preferring the one next to this Python (the venv)."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise ToolError(f"{name} not found: run `make setup` (it installs the pinned "
                        f"YoWASP tools from pyproject.toml's [synth] extra)")
    return found


def run_tool(args, log_path, *, progress=None, tick=None, label="", tick_seconds=30.0,
             timeout=None):
    """Run a tool from the project root, teeing its output into ``log_path``.

    ``progress(line)`` is called with every output line and may print a
    summary of it (an exception it raises stops the tool and propagates);
    ``tick(elapsed_s)`` is called every ``tick_seconds`` while the tool runs so
    that long place-and-route runs show they are alive.  After ``timeout``
    seconds the tool is stopped and :class:`ToolTimeout` raised.  Returns the
    elapsed time in seconds; raises :class:`ToolError` on a non-zero exit,
    naming the log and quoting its last error lines.
    """
    args = [str(a) for a in args]
    log_path = ROOT / log_path
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    done = threading.Event()
    timed_out = threading.Event()

    def ticker(proc):
        while not done.wait(tick_seconds):
            elapsed = time.monotonic() - start
            if timeout is not None and elapsed > timeout:
                timed_out.set()
                proc.kill()
                return
            if tick is not None:
                tick(elapsed)

    # Line-buffered, so that the log can be followed while the tool runs.
    with open(log_path, "w", buffering=1) as log:
        log.write("# " + " ".join(args) + "\n")
        with subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace") as proc:
            thread = threading.Thread(target=ticker, args=(proc,), daemon=True)
            thread.start()
            try:
                for line in proc.stdout:
                    log.write(line)
                    if progress is not None:
                        progress(line.rstrip("\n"))
                rc = proc.wait()
            finally:
                done.set()
                if proc.poll() is None:
                    proc.kill()
    elapsed = time.monotonic() - start
    if timed_out.is_set():
        raise ToolTimeout(f"{label or Path(args[0]).name} stopped after its time limit of "
                          f"{timeout:.0f} s (log: {log_path.relative_to(ROOT)})", log=log_path)
    if rc != 0:
        tail = [l.rstrip() for l in log_path.read_text(errors="replace").splitlines()
                if l.startswith("ERROR") or "error" in l.lower()][-3:]
        raise ToolError(f"{label or Path(args[0]).name} exited with {rc} after {elapsed:.0f} s "
                        f"(log: {log_path.relative_to(ROOT)}): " + " | ".join(tail), log=log_path)
    return elapsed


def _first_line(args):
    try:
        out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    lines = [l.strip() for l in (out.stdout + out.stderr).splitlines()
             if l.strip() and not l.startswith("Preparing to run")]
    return lines[0] if lines else "unknown"


_VERSION_CACHE = {}


def tool_versions(*tools):
    """Version strings of the given YoWASP tools: the tool's own banner and the
    PyPI package version (the pin that matters, see docs/synthesis.md)."""
    result = {}
    for tool in tools:
        if tool not in _VERSION_CACHE:
            flag = "-V" if tool.endswith("yosys") else "--version"
            try:
                package = metadata.version(tool)
            except metadata.PackageNotFoundError:
                package = None
            _VERSION_CACHE[tool] = {"package": package,
                                    "banner": _first_line([tool_path(tool), flag])}
        result[tool] = _VERSION_CACHE[tool]
    return result


def source_revision():
    """The commit the RTL comes from, ``+dirty`` when ``hw/`` or ``scripts/``
    differ from it (a report then describes RTL that no commit holds)."""
    def git(*args):
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None
    head = git("rev-parse", "--short=12", "HEAD")
    if head is None:
        return "unknown"
    dirty = git("status", "--porcelain", "--", "hw", "kvfabric/spec.py")
    return head + ("+dirty" if dirty else "")


_PARAM_RE = re.compile(r"\b(tenants|channels)\s*[=:]\s*(\d+)")


_CHANNEL_MODULE_RE = re.compile(r"^module \\\S*\.channel_(\d+) ", re.M)
_FIFO_MODULE_RE = re.compile(r"^module \\\S*\.channel_0\.q_fifo_(\d+) ", re.M)


def design_params(verilog_path, tenants=None, channels=None):
    """Tenants and channels of a generated netlist, with where they came from.

    Amaranth's Verilog has no parameters, so the values come from, in order:
    the arguments; ``tenants=N``/``channels=N`` in the comment lines at the top
    of the file (a generator may write them); the module names
    Amaranth gives the instances (``kvfabric.channel_<c>`` and
    ``kvfabric.channel_0.q_fifo_<t>``); the defaults of
    :class:`kvfabric.spec.FabricParams`.
    """
    given = {"tenants": tenants, "channels": channels}
    text = Path(verilog_path).read_text(errors="replace")
    header = {}
    for line in text.splitlines()[:40]:
        s = line.strip()
        # Comments and attributes only: a port named "channels" must not count.
        if s.startswith(("//", "/*", "*", "(*")):
            for key, value in _PARAM_RE.findall(s):
                header.setdefault(key, int(value))
    inferred = {}
    channel_ids = set(_CHANNEL_MODULE_RE.findall(text))
    fifo_ids = set(_FIFO_MODULE_RE.findall(text))
    if channel_ids:
        inferred["channels"] = len(channel_ids)
    if fifo_ids:
        inferred["tenants"] = len(fifo_ids)
    sources = []
    values = {}
    for key in ("tenants", "channels"):
        for source, table in (("command line", given), ("verilog header", header),
                              ("module names", inferred)):
            if table.get(key) is not None:
                values[key] = table[key]
                sources.append(f"{key} from {source}")
                break
        else:
            from kvfabric.spec import FabricParams
            values[key] = getattr(FabricParams(), key)
            sources.append(f"{key} assumed (FabricParams default)")
    return values["tenants"], values["channels"], ", ".join(sources)


class Netlist:
    """One module of a Yosys ``write_json`` netlist, indexed by net bit.

    Attributes
    ----------
    cells : dict
        Cell name to the JSON cell record.
    names : dict
        Net bit to a list of ``(wire name, bit index)`` for every public wire
        (``hide_name == 0``) that carries it.
    attrs : dict
        Wire name to its attribute dict.
    widths : dict
        Wire name to its width.
    ports : dict
        Port name to the JSON port record.
    """

    def __init__(self, path, top):
        with open(ROOT / path) as f:
            data = json.load(f)
        module = data["modules"].get(top)
        if module is None:
            raise ToolError(f"module {top!r} not in {path} (found: {sorted(data['modules'])})")
        self.cells = module["cells"]
        self.ports = module["ports"]
        self.names = defaultdict(list)
        self.attrs = {}
        self.widths = {}
        for name, info in module["netnames"].items():
            self.widths[name] = len(info["bits"])
            self.attrs[name] = info.get("attributes", {})
            if info.get("hide_name"):
                continue
            for i, bit in enumerate(info["bits"]):
                if isinstance(bit, int):
                    self.names[bit].append((name, i))

    def bit_names(self, bit):
        """Public ``name[i]`` strings of a net bit, shortest first."""
        return sorted((f"{n}[{i}]" if self.widths[n] > 1 else n for n, i in self.names.get(bit, ())),
                      key=lambda s: (len(s), s))

    def best_name(self, bit):
        """The most readable public name of a net bit, or ``None``."""
        names = self.bit_names(bit)
        return names[0] if names else None

    def reg_name(self, bit):
        """The name of the RTL register a flip-flop output bit carries (wires
        marked by :data:`MARK_REGISTERS`), else :meth:`best_name`."""
        marked = sorted((f"{n}[{i}]" if self.widths[n] > 1 else n for n, i in self.names.get(bit, ())
                         if REGISTER_ATTR in self.attrs[n]), key=lambda s: (len(s), s))
        return marked[0] if marked else self.best_name(bit)


_DIGITS = re.compile(r"\d+")


def name_pattern(name: str) -> str:
    """A register name with its numbers replaced by ``*`` (``ch3.dyn_tag_5`` →
    ``ch*.dyn_tag_*``), so that per-tenant and per-channel copies group together."""
    return _DIGITS.sub("*", name)
