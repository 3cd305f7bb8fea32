"""Liberty files for ``make asic`` (:mod:`kvfabric.scripts.asic`): read, merge, prune.

A Liberty file is nested groups, ``kind (name) { ... }``, holding attributes
``key : value;`` and ``key (values);``.  This module finds groups by matching
braces (comments and quoted strings skipped), which is all that merging and
pruning need; it does not interpret the tables.  Used:

* by ``python -m kvfabric.scripts.liberty merge``, which built
  ``third_party/asap7/asap7sc7p5t_RVT_TT_merged.lib.gz`` from
  OpenROAD-flow-scripts' ASAP7 AO, OA, SIMPLE, INVBUF and SEQ RVT TT files
  (third_party/asap7/README.md): one library (ABC fails on separate ones),
  the named cells only, and without the power groups;
* by :mod:`kvfabric.scripts.asic` and its test, to list a library's cells,
  their areas and whether they are sequential.
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import re
from pathlib import Path

__all__ = ["POWER_GROUPS", "read_text", "groups", "cells", "strip_groups", "merge", "main"]

#: Groups that only describe power: not needed for timing, and about half of the ASAP7 files.
POWER_GROUPS = ("internal_power", "leakage_power")

# A comment, a quoted string, a brace, or the head of a group ``kind (name) {``.
_TOKEN = re.compile(r'/\*.*?\*/|"(?:\\.|[^"\\])*"|[{}]|\b([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{', re.S)
_AREA = re.compile(r"\barea\s*:\s*([-+0-9.eE]+)")
_SEQUENTIAL = re.compile(r"\b(ff|latch|statetable)\s*\(")
_BANNER = re.compile(r"\A\s*/\*.*?\*/", re.S)


def read_text(path) -> str:
    """A Liberty file's text, gunzipped when its name ends in ``.gz``."""
    path = Path(path)
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


def _braces(text):
    """``(level, match, is_head)`` for every group head, bare ``{`` and ``}`` of ``text``, ``level`` the
    depth outside the brace (comments and strings skipped); unbalanced braces raise ``ValueError``."""
    level = 0
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        if token[0] in '/"':
            continue
        if token == "}":
            level -= 1
            yield level, m, False
        else:
            yield level, m, token != "{"
            level += 1
    if level != 0:
        raise ValueError(f"unbalanced braces in the Liberty text (depth {level} at the end)")


def groups(text, depth=1):
    """``[(kind, name, start, end)]`` of the groups at ``depth`` (1: inside the
    library group), in file order; ``text[start:end]`` is the whole group."""
    found, current = [], None
    for level, m, head in _braces(text):
        if m.group(0) == "}":
            if level == depth and current is not None:
                found.append((*current, m.end()))
                current = None
        elif head and level == depth:
            current = (m.group(1), m.group(2).strip().strip('"'), m.start())
    return found


def cells(text):
    """``{cell name: {"area": float or None, "sequential": bool}}`` of a library."""
    result = {}
    for kind, name, start, end in groups(text):
        if kind != "cell":
            continue
        body = text[start:end]
        area = _AREA.search(body)
        result[name] = {"area": float(area.group(1)) if area else None,
                        "sequential": bool(_SEQUENTIAL.search(body))}
    return result


def strip_groups(text, kinds=POWER_GROUPS):
    """``text`` without the groups of the given kinds, at any depth (and without the blank lines left)."""
    out, pos, skip_at = [], 0, None
    for level, m, head in _braces(text):
        if m.group(0) == "}":
            if skip_at is not None and level == skip_at:
                pos, skip_at = m.end(), None
        elif head and skip_at is None and m.group(1) in kinds:
            out.append(text[pos:m.start()])
            skip_at = level
    out.append(text[pos:])
    return re.sub(r"\n[ \t]*(?=\n)", "", "".join(out))


def merge(texts, keep, name, drop=POWER_GROUPS):
    """One library of the cells of ``texts`` whose name ``keep(name)`` accepts.

    The header (units, operating conditions, templates) is the first text's,
    plus every header group of the others whose kind and name it lacks
    (ASAP7's SEQ file names its templates apart from the combinational
    files').  The first text's leading comment (the licence) is kept;
    ``drop``'s groups are removed from the cells.
    """
    first = texts[0]
    lib_groups = groups(first, depth=0)
    if len(lib_groups) != 1 or lib_groups[0][0] != "library":
        raise ValueError("the first text is not one library group")
    head_end = first.index("{", lib_groups[0][2]) + 1
    # The first library's attributes and groups up to its first cell.
    first_cell = next(g[2] for g in groups(first) if g[0] == "cell")
    parts = [(_BANNER.match(first).group(0) + "\n") if _BANNER.match(first) else "",
             f"library ({name}) {{", first[head_end:first_cell].rstrip() + "\n"]
    seen = {(k, n) for k, n, s, e in groups(first) if k != "cell"}
    for text in texts[1:]:
        for kind, gname, start, end in groups(text):
            if kind != "cell" and (kind, gname) not in seen:
                seen.add((kind, gname))
                parts.append("  " + text[start:end] + "\n")
    kept = []
    for text in texts:
        for kind, cname, start, end in groups(text):
            if kind == "cell" and keep(cname) and cname not in kept:
                kept.append(cname)
                parts.append("  " + strip_groups(text[start:end], drop) + "\n")
    parts.append("}\n")
    return "".join(parts), kept


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.liberty",
                                 description="Merge Liberty files into one, keeping the cells named.")
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="merge Liberty files (.lib or .lib.gz) into one gzipped library")
    m.add_argument("inputs", nargs="+", help="Liberty files; the first gives the header and the licence")
    m.add_argument("--cells", required=True,
                   help="comma-separated cell names or glob patterns to keep (e.g. 'INVx1_*,DFFHQNx1_*')")
    m.add_argument("--exclude", default="", help="comma-separated cell names or glob patterns to leave out")
    m.add_argument("--name", required=True, help="the merged library's name")
    m.add_argument("--keep-power", action="store_true", help="keep internal_power and leakage_power groups")
    m.add_argument("--out", required=True, help="output file (.lib.gz gzips it)")
    c = sub.add_parser("cells", help="list a library's cells with their area")
    c.add_argument("library")
    args = ap.parse_args(argv)
    if args.command == "cells":
        for cname, info in cells(read_text(args.library)).items():
            print(f"{cname}\t{info['area']}\t{'seq' if info['sequential'] else 'comb'}")
        return 0
    patterns = [p.strip() for p in args.cells.split(",") if p.strip()]
    excluded = [p.strip() for p in args.exclude.split(",") if p.strip()]

    def keep(cname):
        return (any(fnmatch.fnmatchcase(cname, p) for p in patterns)
                and not any(fnmatch.fnmatchcase(cname, p) for p in excluded))
    text, kept = merge([read_text(p) for p in args.inputs], keep,
                       args.name, drop=() if args.keep_power else POWER_GROUPS)
    missing = [p for p in patterns if not any(fnmatch.fnmatchcase(k, p) for k in kept)]
    if missing:
        ap.error(f"no cell matches {', '.join(missing)}")
    out = Path(args.out)
    data = text.encode()
    # mtime=0: the same inputs give the same bytes.
    out.write_bytes(gzip.compress(data, 9, mtime=0) if out.suffix == ".gz" else data)
    print(f"wrote {out}: {len(kept)} cells, {len(data):,} bytes of Liberty, {out.stat().st_size:,} on disk")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
