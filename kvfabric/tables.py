"""Plain fixed-width tables for the command line (no dependency beyond the stdlib)."""

from __future__ import annotations

__all__ = ["format_table", "SUMMARY_COLUMNS"]


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """Right-aligned table; ``columns`` are ``(key, heading, format spec)``, ``None`` prints ``-``."""
    cells = [[h for _, h, _ in columns]]
    for r in rows:
        cells.append(["-" if r.get(k) is None else format(r[k], f) for k, _, f in columns])
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


#: Columns of :func:`kvfabric.model.replay.summarize`'s per-tenant rows.
SUMMARY_COLUMNS = [
    ("tenant", "tenant", "d"), ("name", "name", "s"), ("requests", "requests", "d"),
    ("dropped", "dropped", "d"), ("bytes", "bytes", "d"), ("gbps", "GB/s", ".1f"),
    ("guaranteed_gbps", "contract GB/s", ".1f"), ("share", "share", ".3f"),
    ("burst_grants", "burst", "d"), ("wait_p50", "wait p50", ".0f"),
    ("wait_p99", "wait p99", ".0f"), ("wait_max", "wait max", "d"),
]
