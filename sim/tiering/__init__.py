"""KV tiering under whales and minnows (issue #44): a paged fast tier, a slow tier, eviction policies.

=====================  ===========================================================
``config``             :class:`TierConfig` (pages, tiers, step cost, budgets), :class:`Request`
``policies``           eviction policies behind one interface (``victim``), and
                       batchers behind the same (``reads``, ``admits``): ``ReadBudget``,
                       ``SloBudget`` (its budget derived at run time from the targets)
``bound``              a feasibility bound on issue #44's targets from the cost model
``engine``             the step loop: finish, grow, admit, select, promote, run
``workloads``          the Azure 2023 trace's copy and drawn whale/minnow mixes
``metrics``            eviction rates, inter-token percentiles, p99 attribution, byte streams
=====================  ===========================================================

``make tiering`` (:mod:`kvfabric.sim.studies.tiering`) measures the companion
essay's claims with it.
"""

from .config import GIB, MIB, Request, TierConfig
from .engine import Result, fresh, simulate
from .policies import POLICIES, make_policy

__all__ = ["GIB", "MIB", "Request", "TierConfig", "Result", "fresh", "simulate", "POLICIES", "make_policy"]
