"""The essay's studies on the system model: its setups and workloads
(:mod:`.scenarios`), the experiment runner (:mod:`.experiments`), the focused
studies (:mod:`.focused`), the derived metrics, claims, plots and report.

The engine (:mod:`kvfabric.sim`: channel, controller, policies, tenants,
workloads) never imports from here; ``kvfabric system`` runs a user's workload
on the engine alone.
"""
