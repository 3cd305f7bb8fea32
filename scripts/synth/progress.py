"""Watching a running tool: a few progress lines, a heartbeat, and an early stop.

Place and route takes minutes to most of an hour; :class:`Progress` turns the
tools' output into a handful of lines worth reading while it runs and keeps
what the flows need afterwards (nextpnr's post-placement Fmax estimates).  It
also stops nextpnr on a design too big for the device: nextpnr goes on
placing such a design and its analytic placer never converges.
"""

from __future__ import annotations

import re

from .parsers import FMAX_LINE, UTIL_ROW
from .tools import ToolError, fmt_elapsed, log

__all__ = ["DoesNotFit", "Progress"]


class DoesNotFit(ToolError):
    """Raised from the progress hook to stop nextpnr on a design too big for the device."""


class Progress:
    """Turns a tool's output into a few progress lines and a heartbeat."""

    _YOSYS_STEP = re.compile(r"^(\d+)\.(\d+)\. Executing (\S+)")
    _YOSYS_ANY = re.compile(r"^[\d.]+ Executing ")
    _YOSYS_KEEP = {"PROC", "FLATTEN", "FSM", "MEMORY", "ALUMACC", "TECHMAP", "ABC", "ABC9",
                   "DFFLEGALIZE", "JSON", "LTP"}
    _PNR_KEEP = ("Packing IOs", "Logic utilisation before packing", "Creating initial analytic",
                 "Running main analytical placer", "HeAP Placer Time", "Running simulated annealing",
                 "SA placement time", "Routing..", "Routing complete", "Max frequency for clock",
                 "ERROR", "Program finished")

    def __init__(self, target):
        self.target = target
        self.last = ""
        self.shown = set()
        self.util_rows = {}
        self.fmax_lines = []

    def yosys(self, line):
        if line.startswith(("ERROR", "Preparing to run")):
            log(self.target, line)
        if self._YOSYS_ANY.match(line):
            self.last = line.strip()
        m = self._YOSYS_STEP.match(line)
        if m:
            step = m.group(3)
            if step in self._YOSYS_KEEP and step not in self.shown:
                self.shown.add(step)
                log(self.target, f"yosys: {step.lower()}")

    def nextpnr(self, line):
        # Stop nextpnr once its utilisation table shows a resource over 100%.
        m = UTIL_ROW.match(line)
        if m:
            self.util_rows[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif self.util_rows and any(u > a for u, a in self.util_rows.values()):
            over = ", ".join(f"{k} {u}/{a}" for k, (u, a) in self.util_rows.items() if u > a)
            raise DoesNotFit(f"over capacity after packing: {over}")
        elif line.strip() in ("", "Info:"):
            self.util_rows = {}
        text = line[len("Info: "):] if line.startswith("Info: ") else line
        if text.strip():
            self.last = text.strip()
        m = FMAX_LINE.search(line)
        if m:
            self.fmax_lines.append(float(m.group(1)))
        if any(text.lstrip().startswith(k) for k in self._PNR_KEEP) or \
                line.startswith(("ERROR", "Preparing to run")):
            log(self.target, f"nextpnr: {text.strip()}")

    def tick(self, elapsed):
        log(self.target, f"... {fmt_elapsed(elapsed)} elapsed; last: {self.last[:100]}")
