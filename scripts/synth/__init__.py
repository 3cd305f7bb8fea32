"""Synthesise the generated Verilog for FPGA and generic targets (issue #6).

Usage::

    python -m kvfabric.scripts.synth [--targets ecp5,ice40,generic] [--verilog build/kvfabric.v]
                            [--top kvfabric] [--freq 100] [--ice40-device up5k]

Targets
    ``ecp5``     ``synth_ecp5`` then ``nextpnr-ecp5 --85k --package CABGA381
                 --speed 8``: Fmax, utilisation and critical path from
                 nextpnr's JSON report.  A design over the device's capacity
                 is reported as not fitting as soon as nextpnr has packed it.
    ``ecp5_1ch`` the same for the one-channel netlist (below): the
                 arbitration loop is per channel, so its Fmax and critical
                 path are the fabric's even when eight channels do not fit.
    ``ecp5_4ch`` (not run by default: about 45 min of place and route) the
                 same for a four-channel netlist, the largest that fits the
                 ECP5-85 since the selection keys are registers (spec §11).
    ``ice40``    ``synth_ice40`` then ``nextpnr-ice40 --up5k`` (or ``--hx8k``),
                 on the one-channel netlist.  A design that does not fit is
                 reported as such, with its utilisation, not as a failure.
    ``generic``  ``synth -flatten``, ``abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX`` and
                 ``ltp -noff``: logic depth in two-input gates, an ASIC-ish
                 proxy independent of any FPGA.
    ``breakdown`` (not run by default) ``synth_ecp5 -noflatten``: ECP5 cells
                 per module, instances of one module pattern added up (where
                 the LUTs go; no place and route).

``ecp5_1ch`` and ``ice40`` build ``build/kvfabric_1ch.v`` (``kvfabric verilog
--channels 1``) unless ``--verilog-1ch`` or ``--verilog`` names a netlist;
``ecp5_4ch`` builds ``build/kvfabric_4ch.v`` unless ``--verilog`` names one.

Place and route gets a harness (``--no-harness`` turns it off, see
:mod:`.harness`).  Results go to ``reports/synth.json`` (one entry per target,
merged with the entries of earlier runs of other targets, each naming the
SHA-256 of the netlist it synthesised) and ``reports/synth.md``.  Place and
route takes 45 s to 10 min: never call this from the tests.

One job per module:

``families``  the FPGA families and the targets, as tables
``harness``   the place-and-route harness and the net names it gives
``tools``     the one tool runner (sandbox paths, logs, time limits, versions)
``progress``  progress lines from a running tool; stops nextpnr on an overfull device
``parsers``   Yosys's and nextpnr's output, read into numbers
``flows``     each target's flow, place and route over seeds, the median seed
``report``    ``reports/synth.json`` and ``reports/synth.md``
``cli``       the command line

This file imports none of the modules: :mod:`kvfabric.scripts.yosys_util`
builds on :mod:`.tools` and the flows build on it, so importing the flows here
would make a cycle.  Run the package with ``python -m kvfabric.scripts.synth``
or call :func:`kvfabric.scripts.synth.cli.main`.
"""
