"""The revision a report comes from, for the reports' writers (``reports/*.json``).

A figure in a report is only as good as the code that produced it: every
writer records the commit (``git rev-parse --short HEAD``) and whether the
source it ran differed from that commit, so a reader can tell a figure of a
committed revision from one of uncommitted code, and the README's generated
figures table can name it (``kvfabric.scripts.readme_figures``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["SOURCE", "describe", "dirty_files", "revision"]

ROOT = Path(__file__).resolve().parents[1]

#: The folders whose code produces a report's figures; changes elsewhere
#: (documents, other reports) do not make a report's revision dirty.
SOURCE = ("hw", "model", "sim", "tb", "scripts", "kvfabric", "examples", "pyproject.toml")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def revision(paths=SOURCE) -> dict:
    """``{"revision": short HEAD, "dirty": bool}``; ``dirty`` is true when a
    tracked file under ``paths`` differs from HEAD.  Outside a git checkout
    of this repository (an installed wheel) both are ``None``: the report then says it has no
    revision rather than a wrong one."""
    top = _git("rev-parse", "--show-toplevel")
    head = _git("rev-parse", "--short", "HEAD") if top and Path(top).resolve() == ROOT else None
    if not head:
        return {"revision": None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no", "--", *paths)
    return {"revision": head, "dirty": None if status is None else bool(status)}


def dirty_files(paths=SOURCE) -> list[str]:
    """The tracked files under ``paths`` that differ from HEAD (what makes :func:`revision` dirty), or
    an empty list outside a git checkout."""
    status = _git("status", "--porcelain", "--untracked-files=no", "--", *paths)
    # _git strips the output, so the first line may have lost its leading status column.
    return sorted(line.split(maxsplit=1)[1] for line in status.splitlines() if line.strip()) if status else []


def describe(report: dict) -> str:
    """A report's revision for Markdown: "`abc1234`", with "+ uncommitted
    changes" when it was dirty (a ``dirty`` flag, or the synthesis reports'
    ``+dirty`` suffix), or ``not recorded`` for a report written before its
    writer recorded one."""
    rev = report.get("revision")
    if not rev or rev == "unknown":
        return "not recorded"
    dirty = report.get("dirty") or rev.endswith("+dirty")
    return f"`{rev.removesuffix('+dirty')[:7]}`" + (" + uncommitted changes" if dirty else "")
