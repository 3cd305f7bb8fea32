"""The tier model's parameters and its request record.

Every time is in integer nanoseconds and every size in pages or bytes, so a
run is exact and repeatable; the defaults describe one decode GPU of an
8 B-parameter model with grouped-query attention (Llama-3-8B's shape: 32
layers x 8 KV heads x 128 dimensions x 2 (K and V) x 2 bytes = 128 KiB of KV
per token) on H100-class HBM, with a CXL x16 memory expander as the slow
tier.  :class:`TierConfig` checks its fields the way the rest of the system
model does: a wrong value is named with its allowed range.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TierConfig", "Request", "GIB", "MIB"]

MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class TierConfig:
    """One decode instance: its fast tier, slow tier, step cost and batch.

    Parameters
    ----------
    page_tokens
        Tokens per KV page (vLLM's block size is 16).
    kv_bytes_per_token
        KV bytes one token holds over all layers.
    hbm_pages
        Fast-tier capacity for KV, in pages.
    hbm_bytes_per_ns
        Fast-tier read bandwidth (3350 = 3.35 TB/s).
    slow_bytes_per_ns
        Slow-tier bandwidth for promotions, shared by all of them (64 = 64 GB/s).
    slow_latency_ns
        Fixed latency of a step's promotions (one transfer set-up per step).
    step_fixed_ns
        A decode step's cost without KV: reading the weights (16 GB at 3.35 TB/s).
    max_batch
        Batch budget: running requests at most.
    page_budget
        Page budget of admission: the running requests' pages, in both tiers,
        at most this after an admission (``None``: ``hbm_pages``, no
        over-commitment at admission).
    read_cap_pages
        Per-request read meter: a request reads at most this many pages in a
        step, so a longer one's token takes several steps (split-KV attention
        whose partial softmax carries over, as flash-decoding's splits do
        within a step); ``None``: every request reads all its pages each step.
    """

    page_tokens: int = 16
    kv_bytes_per_token: int = 128 * 1024
    hbm_pages: int = 10_240
    hbm_bytes_per_ns: int = 3350
    slow_bytes_per_ns: int = 64
    slow_latency_ns: int = 2_000
    step_fixed_ns: int = 4_800_000
    max_batch: int = 256
    page_budget: int | None = None
    read_cap_pages: int | None = None

    def __post_init__(self):
        for name in ("page_tokens", "kv_bytes_per_token", "hbm_pages", "hbm_bytes_per_ns", "slow_bytes_per_ns",
                     "max_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TierConfig.{name} must be a positive integer, not {value!r}")
        for name in ("slow_latency_ns", "step_fixed_ns"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"TierConfig.{name} must be a non-negative integer, not {value!r}")
        if self.page_budget is not None and (not isinstance(self.page_budget, int)
                                             or self.page_budget < self.hbm_pages):
            raise ValueError(f"TierConfig.page_budget must be an integer >= hbm_pages ({self.hbm_pages}) "
                             f"or None, not {self.page_budget!r}")

        if self.read_cap_pages is not None and (not isinstance(self.read_cap_pages, int) or self.read_cap_pages < 1):
            raise ValueError(f"TierConfig.read_cap_pages must be a positive integer or None, not {self.read_cap_pages!r}")

    @property
    def page_bytes(self) -> int:
        return self.page_tokens * self.kv_bytes_per_token

    @property
    def budget(self) -> int:
        """The admission page budget in effect (derived)."""
        return self.hbm_pages if self.page_budget is None else self.page_budget

    def pages_for(self, tokens: int) -> int:
        """Pages holding ``tokens`` tokens of KV (a partly filled last page is a page)."""
        return -(-tokens // self.page_tokens)

    def read_ns(self, pages: int) -> int:
        """Time to read ``pages`` pages from the fast tier (rounded up)."""
        return -(-pages * self.page_bytes // self.hbm_bytes_per_ns)

    def promote_ns(self, pages: int) -> int:
        """Time to promote ``pages`` pages over the slow tier in one step (0 for none)."""
        if pages == 0:
            return 0
        return self.slow_latency_ns + -(-pages * self.page_bytes // self.slow_bytes_per_ns)


@dataclass(eq=False)
class Request:
    """One request: what the workload says and what the run did to it.

    ``prompt`` tokens arrive with the request (its prefill ran elsewhere, as in
    a prefill/decode-split deployment: the KV lands in the fast tier at
    admission and the first output token comes with it); each decode step it
    runs in adds one token, until ``generated`` tokens exist.
    """

    rid: int
    arrival_ns: int
    prompt: int
    generated: int
    tenant: str = "default"
    whale: bool = False
    # -- run state (the engine writes these) --
    tokens: int = 0           # output tokens so far
    pages: int = 0            # pages its KV holds, both tiers
    resident: int = 0         # of those, in the fast tier
    last_run: int = -1        # the last step it ran in
    seq: int = -1             # admission order
    admitted_ns: int = -1
    finished_ns: int = -1
    rejected: bool = False
    #: Per output token after the prefill's: (gap ns, sat-out ns, promotion ns,
    #: compute ns, steps it ran in); the three times add up to the gap.
    gaps: list = field(default_factory=list)
    #: Since its last token: [sat-out ns, promotion ns, compute ns, steps, pages read].
    acc: list = field(default_factory=lambda: [0, 0, 0, 0, 0])
    evictions: int = 0        # times it lost pages while fully resident
    evicted_pages: int = 0
    promoted_pages: int = 0
    last_token_ns: int = 0
