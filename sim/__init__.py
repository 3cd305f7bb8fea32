"""The HBM3 system model's engine: channel legality and timing (:mod:`.dram`,
:mod:`.hbm3`), controller policies (:mod:`.controller`), front ends
(:mod:`.policies`, :mod:`.fabric`), tenants and workloads. The essay's studies
on it live in :mod:`.studies`, which the engine never imports.
"""
