"""The experiment report's plots (PNG, matplotlib Agg)."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .metrics import NS_PER_CYCLE, us  # noqa: E402
from .scenarios import CHANNEL_GBPS  # noqa: E402

__all__ = ["plot_cdf", "plot_share", "plot_conflicts", "plot_power", "plot_frontier"]


def _save(fig, out_dir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


def plot_cdf(results, out_dir):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, group, title in ((axes[0], "A/", "Setup A (H200, 1 prefill + 3 decode)"),
                             (axes[1], "B/", "Setup B (GB200, 2 prefills + 6 decode, 50% CXL)")):
        for key, res in results.items():
            if not key.startswith(group) or not res["steps"] or "chunked" in key:
                continue
            lat = np.sort([lat for _, _, lat in res["steps"]]) * NS_PER_CYCLE
            ax.plot(lat, np.arange(1, len(lat) + 1) / len(lat), label=key[len(group):])
        ax.axhline(0.99, color="grey", lw=0.5, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("decode step latency (ns, memory time in one channel)")
        ax.set_ylabel("CDF")
        ax.set_title(title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    name = _save(fig, out_dir, "decode_latency_cdf.png")
    return name, "Decode-step latency CDF per policy (dotted line: p99)"


def plot_share(results, out_dir):
    keys = [k for k in ("A/FCFS", "A/Fabric") if k in results]
    if not keys:
        return None, ""
    fig, axes = plt.subplots(len(keys), 1, figsize=(11, 3.2 * len(keys)), sharex=True)
    axes = np.atleast_1d(axes)
    for ax, key in zip(axes, keys):
        res = results[key]
        win = res["timeline_window"]
        rows = res["timeline"]
        t = np.array([wi for wi, _ in rows]) * win * NS_PER_CYCLE / 1000
        data = np.array([r for _, r in rows], dtype=float).T * 1.6 / win  # GB/s
        names = [x["name"] for x in res["tenants"]]
        ax.stackplot(t, data, labels=names)
        ax.set_ylabel("GB/s")
        ax.set_ylim(0, float(CHANNEL_GBPS))
        ax.set_title(f"{key}: bandwidth per tenant, {win * NS_PER_CYCLE / 1000:.0f} µs windows")
        ax.legend(loc="upper right", fontsize=7)
    axes[-1].set_xlabel("simulated time (µs)")
    name = _save(fig, out_dir, "bandwidth_share.png")
    return name, "Bandwidth per tenant over time, setup A, FCFS vs fabric"


def plot_conflicts(by, out_dir):
    keys = [k for k in by if k.startswith(("A/", "B/")) and "chunked" not in k and "power" not in k]
    if not keys:
        return None, ""
    fig, ax = plt.subplots(figsize=(12, 4.5))
    x = np.arange(len(keys))
    ax.bar(x - 0.2, [by[k]["conflict"] * 100 for k in keys], 0.4, label="all row conflicts")
    ax.bar(x + 0.2, [by[k]["inter_conflict"] * 100 for k in keys], 0.4, label="closed another tenant's row")
    ax.set_xticks(x)
    ax.set_xticklabels(keys, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("% of accesses")
    ax.set_title("Bank-conflict rate per policy")
    ax.legend()
    name = _save(fig, out_dir, "bank_conflicts.png")
    return name, "Bank-conflict rate per policy (setups A and B)"


def plot_power(results, out_dir):
    res = results.get("A/Fabric, power cap")
    if not res or not res.get("power_trace"):
        return None, ""
    trace = res["power_trace"]
    fig, ax = plt.subplots(figsize=(10, 3.5))
    t = [us(c) for c, _, _ in trace]
    # Power is measured over the period that ends at each decision; the cap applies after it.
    ax.step(t, [wt for _, wt, _ in trace], where="pre", label="formula power over the past period (W)")
    ax.axhline(res["power_budget_w"], color="red", ls="--", label="budget")
    ax2 = ax.twinx()
    ax2.step(t, [min(c.values()) if c else np.nan for _, _, c in trace], where="post", color="green",
             label="prefill burst cap (GB/s per channel)")
    ax.set_xlabel("simulated time (µs)")
    ax.set_ylabel("W (GPU)")
    ax2.set_ylabel("GB/s per channel")
    ax.legend(loc="upper left", fontsize=7)
    ax2.legend(loc="upper right", fontsize=7)
    ax.set_title("Power-cap loop (§9), setup A with the fabric")
    name = _save(fig, out_dir, "power_cap.png")
    return name, "Power-cap control loop: formula power per 10 essay-ms period and the prefill burst cap"


def plot_frontier(by, out_dir):
    """Decode p99 against prefill bandwidth per policy: the trade-off frontier."""
    groups = [(g, t) for g, t in (("A/", "Setup A"), ("B/", "Setup B")) if any(k.startswith(g) for k in by)]
    if not groups:
        return None, ""
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.5))
    axes = np.atleast_1d(axes)
    for ax, (group, title) in zip(axes, groups):
        base = by.get(group + "decode only")
        for key, d in by.items():
            if not key.startswith(group) or key == group + "decode only" or np.isnan(d["p99"]):
                continue
            x, y = d["job_gbps"], d["p99"] * NS_PER_CYCLE
            ax.scatter([x], [y], marker="*" if "QoS" in key else "o", s=90 if "QoS" in key else 30)
            ax.annotate(key[len(group):], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        if base and not np.isnan(base["p99"]):
            ax.axhline(base["p99"] * NS_PER_CYCLE, color="grey", ls=":", label="decode only")
            ax.axhline(1.2 * base["p99"] * NS_PER_CYCLE, color="green", ls="--", label="1.2x decode only")
        fr = by.get(group + "FR-FCFS")
        if fr:
            ax.axvline(0.9 * fr["job_gbps"], color="orange", ls="--", label="90% of FR-FCFS prefill")
        ax.set_xlabel("prefill job bandwidth (GB/s, a job's bytes over its duration)")
        ax.set_ylabel("decode-step p99 (ns)")
        ax.set_title(title)
        ax.legend(fontsize=7)
    name = _save(fig, out_dir, "decode_p99_frontier.png")
    return name, "Decode-step p99 against prefill bandwidth per policy (target: below the green, right of the orange line)"


def plot_coordinator(results, out_dir):
    """Issue #27: the moving tenant's delivered rate through its move, coordinator off and on."""
    from .metrics import window_rates

    keys = [k for k in ("coordinator/shift, coordinator off", "coordinator/shift, coordinator on") if k in results]
    if not keys:
        return None, ""
    fig, ax = plt.subplots(figsize=(10, 3.8))
    res = results[keys[0]]
    for key in keys:
        rates = window_rates(results[key], 0)
        ax.step([us(s) for s, _ in rates], [r for _, r in rates], where="post", label=key.split("/", 1)[1])
    g = res["guaranteed_gbps"][0]
    ax.axhline(g, color="grey", ls=":", label=f"total guarantee {g:g} GB/s")
    ax.axhline(0.95 * g, color="green", ls="--", label="95 % of it")
    move = res["move_cycle"]
    settle = (2 * res["epoch_cycles"] + 1024) * res["memory_per_fabric"]
    ax.axvline(us(move), color="red", lw=0.8, label="move (channels 0-1 -> 4-5)")
    ax.axvline(us(move + settle), color="red", lw=0.8, ls="--", label="move + 2 epochs + latency")
    ax.set_xlabel("simulated time (µs)")
    ax.set_ylabel("GB/s over the 8 channels")
    ax.set_ylim(0, max(1.3 * g, ax.get_ylim()[1]))
    ax.set_title("A backlogged tenant moves its traffic half-way: delivered rate per 10 µs window")
    ax.legend(fontsize=7, loc="lower right")
    name = _save(fig, out_dir, "coordinator_shift.png")
    return name, "Issue #27: delivered rate of the moving tenant through its move, coordinator off and on"
