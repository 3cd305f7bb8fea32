"""Synthesise the generated Verilog for FPGA and generic targets (issue #6).

Usage::

    python -m kvfabric.scripts.synth [--targets ecp5,ecp5_area,generic,...] [--verilog build/kvfabric.v]
                            [--top kvfabric] [--freq 100] [--ice40-device up5k]

Targets (``make synth`` runs all but ``breakdown``, synthesis-only ones first)
    ``ecp5``     the 8 x 8 from synthesis alone: ``synth_ecp5``, then
                 ``nextpnr-ecp5 --pack-only`` (packing, no placement: a few
                 seconds) for the area against the ECP5-85, and the worst
                 register-to-register paths predicted by the delay model of
                 :mod:`kvfabric.scripts.netlist_paths`.  The 8 x 8 does not fit
                 the device, so it is never placed.
    ``ecp5_1ch`` ``synth_ecp5`` then ``nextpnr-ecp5 --85k --package CABGA381
                 --speed 8`` on the one-channel netlist (below): Fmax,
                 utilisation and critical path from nextpnr's JSON report.  The
                 arbitration loop is per channel, so its Fmax and critical path
                 are the fabric's.  A design over the device's capacity is
                 reported as not fitting as soon as nextpnr has packed it.
    ``ecp5_4ch`` the same for a four-channel netlist in the channels' FPGA
                 form (``kvfabric verilog --fpga``), the largest that fits
                 the ECP5-85 (the default form packs to 100.05 %, issue #42).
    ``ecp5_area`` ``TRELLIS_COMB`` (nextpnr's count after packing, no
                 placement) of the 1-, 2- and 4-channel netlists and the
                 least-squares line through them: the area per added channel
                 and the fixed part (issue #25).
    ``ice40``    ``synth_ice40`` then ``nextpnr-ice40 --up5k`` (or ``--hx8k``),
                 on the one-channel netlist.  A design that does not fit is
                 reported as such, with its utilisation, not as a failure.
    ``generic``  ``synth -flatten`` with Kogge-Stone adders, ``abc -g
                 AND,NAND,OR,NOR,XOR,XNOR,MUX`` with a script that balances for
                 depth, and ``ltp -noff``: logic depth in two-input gates, an
                 ASIC-ish proxy independent of any FPGA (``--generic-adders``,
                 ``--generic-mapping area`` for the mapping before issue #25).
    ``breakdown`` (not run by default) ``synth_ecp5 -noflatten``: ECP5 cells
                 per module, instances of one module pattern added up (where
                 the LUTs go; no place and route).

``ecp5_1ch`` and ``ice40`` build ``build/kvfabric_1ch.v`` (``kvfabric verilog
--channels 1``) unless ``--verilog-1ch`` or ``--verilog`` names a netlist;
``ecp5_4ch`` builds ``build/kvfabric_4ch_fpga.v`` (``--fpga``) unless ``--verilog`` names one;
``ecp5_area`` always builds its three.  Within one run a netlist is
synthesised once per family: ``ecp5_1ch`` and ``ecp5_4ch`` read the netlists
``ecp5_area`` synthesised.

Place and route gets a harness (``--no-harness`` turns it off, see
:mod:`.harness`).  Results go to ``reports/synth.json`` (one entry per target,
merged with the entries of earlier runs of other targets, each naming the
SHA-256 of the netlist it synthesised) and ``reports/synth.md``.  Place and
route takes minutes to most of an hour: never call this from the tests.  A run
of every default target records its wall-clock time (``default_run``).

One job per module:

``families``  the FPGA families and the targets, as tables
``harness``   the place-and-route harness and the net names it gives
``tools``     the one tool runner (sandbox paths, logs, time limits, versions)
``progress``  progress lines from a running tool; stops nextpnr on an overfull device
``parsers``   Yosys's and nextpnr's output, read into numbers
``flows``     each target's flow, place and route over seeds, the median seed,
              the area line
``report``    ``reports/synth.json`` and ``reports/synth.md``
``cli``       the command line

This file imports none of the modules: :mod:`kvfabric.scripts.yosys_util`
builds on :mod:`.tools` and the flows build on it, so importing the flows here
would make a cycle.  Run the package with ``python -m kvfabric.scripts.synth``
or call :func:`kvfabric.scripts.synth.cli.main`.
"""
