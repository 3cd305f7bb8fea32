"""kvfabric: a tenant-aware HBM bandwidth arbiter (token buckets + WF2Q+ per channel).

One import root for the whole project. The folders of the repository map onto
it (``pyproject.toml``'s ``package-dir``):

==========================  ================================================
``kvfabric.spec``           parameters, widths, formats, grant kinds (neutral)
``kvfabric.model``          the golden model, contracts, trace replay (a leaf)
``kvfabric.hw``             the Amaranth RTL and its Verilog generation
``kvfabric.tb``             cocotb co-simulation against the model
``kvfabric.sim``            the HBM3 system model
``kvfabric.scripts``        synthesis, benchmarks, state budget
``kvfabric.cli``            the ``kvfabric`` command (one subcommand per job)
==========================  ================================================
"""

__version__ = "0.2.0"
