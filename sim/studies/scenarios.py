"""The essay's workloads mapped onto one simulated HBM3 channel.

Scale (stated in the report)
----------------------------
* **Space.** One channel of the HBM3 preset (51.2 GB/s) stands for one of
  the GPU's channels; every tenant is assumed interleaved evenly over all of
  them, so the channel sees ``1/channels`` of every tenant's bytes.
* **Time.** Workload time is compressed by ``K``: an essay millisecond is
  ``1/K`` ms of simulated time.  Prefill jobs shrink by ``K`` in bytes (same
  bandwidth, ``K`` times shorter), decode steps keep their per-channel size
  but come ``K`` times more often, contract burst durations and the power
  controller's period shrink by ``K``.  DRAM timings, queue depths and the
  arbiter's hardware constants are physical and are not scaled.
* **Consequence.** Decode traffic is ``K`` times denser than the essay's
  (2.6% instead of 0.1% of the channel per stream at K = 25); everything
  else keeps the essay's ratios.  Decode step latencies are *not* scaled:
  they are the real memory time of a step's KV reads in one channel.
"""

import copy
from dataclasses import dataclass, replace
from fractions import Fraction

from ..fabric import FABRIC_MHZ, contract_doc
from ..front_ends import make_front_end
from ..hbm3 import CHANNEL_GBPS, HBM3_6400, MEMORY_MHZ, ns_to_cycles
from ..system import CxlLink
from ..tenants import DecodeTenant, PrefillTenant

__all__ = ["Gpu", "H100", "H200", "GB200", "Scale", "Essay", "setup_a", "setup_b", "on_channels", "make_policy",
           "REQUEST_BYTES",
           "CHANNEL_GBPS", "MEMORY_MHZ", "FABRIC_MHZ", "SEEDS", "UNTUNED", "HEADROOM", "BASELINE_OF"]

#: Seeds of the decode streams' random think times over which the experiments
#: report pools the runs that issue #14's targets are judged on (seed 1 is the
#: seed of every other run).
SEEDS = (1, 2, 3)

#: Setup A variants the QoS controller was not tuned for (issue #14).
UNTUNED = (("half steps", dict(step_scale=Fraction(1, 2))),
           ("double steps", dict(step_scale=2)),
           ("two prefills", dict(prefills=2)))

#: A knob row: double decode steps with the decodes guaranteed 1.5x their mean
#: demand; its decode-only and FR-FCFS baselines are double steps' (no contract).
HEADROOM = ("double steps, decode guarantee x1.5", dict(step_scale=2, decode_headroom=Fraction(3, 2)))
#: Workloads whose decode-only and FR-FCFS runs (which no contract changes) are another's.
BASELINE_OF = {HEADROOM[0]: "double steps"}


@dataclass(frozen=True)
class Gpu:
    """Public HBM figures of a GPU: stacks x 16 channels."""

    name: str
    channels: int
    tb_per_s: Fraction


H100 = Gpu("H100 SXM", 80, Fraction("3.35"))
H200 = Gpu("H200", 96, Fraction("4.8"))
GB200 = Gpu("GB200 (B200 GPU)", 128, Fraction(8))


class Essay:
    """Workload figures quoted by the essay (whole-GPU units)."""

    decode_step_bytes = 1_300_000          # §1: ~1.3 MB of KV per decode step
    decode_steps_per_s = 3800              # §1: 3,800 tokens/s per stream
    prefill_bytes = 42_000_000_000         # §1: a 32k-context prefill moves ~42 GB
    prefill_duty = Fraction(24, 100)       # §1: "24 percent of HBM"
    queued_requests = 1200                 # §1: decode queues behind 1,200 requests
    contract_burst_ms = Fraction(2)        # §4: burst_duration_ms = 2.0
    prefill_burst_ms = Fraction(1, 2)
    latency_slo_us = 25                    # §4
    cxl_latency_ns = 320                   # §10
    cxl_gb_per_s = 128                     # Figure 1: CXL 128 GB/s
    cxl_spill = Fraction(1, 2)             # §10: 50% of KV spilled to CXL
    admission_limit = Fraction(85, 100)    # §11
    power_w_per_gbps = Fraction(23, 1000)  # §9
    metrics_ms = 10                        # §9: export every 10 ms


@dataclass(frozen=True)
class Scale:
    """Mapping of essay time onto simulated cycles (see module docstring)."""

    compression: int = 25

    def cycles(self, essay_ms):
        """Simulated cycles of an essay duration in ms (rounded up)."""
        return ns_to_cycles(Fraction(essay_ms) * 10**6 / self.compression)

    def essay_ms(self, cycles):
        """The essay duration a simulated cycle count stands for."""
        return Fraction(cycles * HBM3_6400.tck_ps, 10**9) * self.compression

    def per_channel_bytes(self, gpu_bytes, gpu, block=256):
        """A GPU-wide byte count's share in one channel, in whole blocks."""
        return max(block, round(Fraction(gpu_bytes, gpu.channels) / block) * block)


def _gbps(nbytes, cycles):
    return Fraction(nbytes) * MEMORY_MHZ * 10**6 / cycles / 10**9


@dataclass
class Workload:
    """Tenant factories plus the contract that goes with them."""

    make_tenants: object       # callable(policy_name) -> list of tenants
    contract: dict             # contract document for the fabric
    cxl: object = None         # callable() -> CxlLink or None
    horizon: int = 0           # cycles to simulate
    description: str = ""
    channels: int = 1          # channels every tenant is spread over (see :func:`on_channels`)


def _decode_contract(tid, step_hbm_bytes, think, scale, *, priority, weight=None, headroom=1):
    t = dict(id=tid, name=f"decode{tid}",
             guaranteed_gbps=round(_gbps(step_hbm_bytes, think) * Fraction(headroom), 3),
             burst_gbps=CHANNEL_GBPS,
             burst_duration_ms=Essay.contract_burst_ms / scale.compression,
             priority=priority, latency_slo_us=Essay.latency_slo_us)
    if weight is not None:
        t["weight"] = weight
    return t


def _prefill_contract(tid, scale, *, priority, guaranteed, weight=None):
    t = dict(id=tid, name=f"prefill{tid}", guaranteed_gbps=round(guaranteed, 3),
             burst_gbps=CHANNEL_GBPS,
             burst_duration_ms=Essay.prefill_burst_ms / scale.compression,
             priority=priority, latency_slo_us=1000)
    if weight is not None:
        t["weight"] = weight
    return t


def setup_a(scale, *, periods=2, window=None, chunks=1, yield_gap=0, prefill=True, seed=1,
            step_scale=1, prefills=1, decode_headroom=1, channels=1, coordinator=False):
    """Figure 3: simulated H200, 4 tenants, 1 prefill + 3 decode.

    The prefill arrives once per period, 10% into it; a period is the
    prefill's time at channel peak divided by its 24% duty.  Contract:
    decode guaranteed its mean demand at priority 1, prefill its mean
    demand at priority 2, both may burst to the whole channel (§4, §6).

    Variants not tuned for (issue #14): ``step_scale`` multiplies the decode
    step and think time (same mean demand, other step sizes); ``prefills = 2``
    adds a second, identical prefill half a period later (ids 0..prefills-1,
    decode ids follow).  ``decode_headroom`` multiplies the decodes'
    guaranteed rate (and so their bucket): a contract knob, 1 = the mean demand.
    ``channels`` > 1: the same tenants on that many channels (:func:`on_channels`).
    """
    gpu = H200
    window = window or Essay.queued_requests // 4
    step = scale.per_channel_bytes(Essay.decode_step_bytes * Fraction(step_scale), gpu)
    think = int(scale.cycles(Fraction(1000, Essay.decode_steps_per_s)) * Fraction(step_scale))
    job = scale.per_channel_bytes(Essay.prefill_bytes // scale.compression, gpu, block=1024 * chunks)
    period = ns_to_cycles(Fraction(job, CHANNEL_GBPS) / Essay.prefill_duty)

    decodes = [prefills + i for i in range(3)]

    def make_tenants(policy_name=None):
        tenants = []
        for p in range(prefills):
            if prefill:
                tenants.append(PrefillTenant(p, job_bytes=job * channels, period=period,
                                             phase=period // 10 + p * period // 2,
                                             window=window * channels, chunks=chunks, yield_gap=yield_gap,
                                             priority=2, name=f"prefill{p or ''}"))
            else:
                tenants.append(PrefillTenant(p, job_bytes=job * channels, period=period,
                                             phase=10 * period * periods, window=window * channels, priority=2,
                                             name="prefill (off)"))
        tenants += [DecodeTenant(i, step_bytes=step * channels, think=think, seed=seed, priority=1,
                                 name=f"decode{i}") for i in decodes]
        return tenants

    contract = contract_doc(
        [_prefill_contract(p, scale, priority=2, guaranteed=CHANNEL_GBPS * Essay.prefill_duty)
         for p in range(prefills)]
        + [_decode_contract(i, step, think, scale, priority=1, headroom=decode_headroom) for i in decodes],
        channel_gbps=CHANNEL_GBPS, clock_mhz=FABRIC_MHZ, admission_limit=Essay.admission_limit)
    return on_channels(Workload(make_tenants, contract, horizon=periods * period,
                                description=(f"{gpu.name}: 1/{gpu.channels} per channel; prefill "
                                             f"{job / 1e6:.2f} MB per job every {period} cycles, window "
                                             f"{window} x 128 B; decode {step} B per step, think {think} cycles")),
                       channels, coordinator)


def setup_b(scale, *, periods=2, window=None, cxl=True, seed=1, prefill=True, channels=1, coordinator=False):
    """§10: GB200, 8 tenants, all decode but 2 periodic prefills, 50% KV
    spill to CXL (320 ns), WFQ weights equal (one priority).  ``channels`` > 1:
    the same tenants on that many channels (:func:`on_channels`), each with
    its own CXL link of one channel's share."""
    gpu = GB200
    window = window or Essay.queued_requests // 4
    step = scale.per_channel_bytes(Essay.decode_step_bytes, gpu)
    think = scale.cycles(Fraction(1000, Essay.decode_steps_per_s))
    job = scale.per_channel_bytes(Essay.prefill_bytes // scale.compression, gpu, block=1024)
    period = ns_to_cycles(Fraction(job, CHANNEL_GBPS) / Essay.prefill_duty)
    spill = Essay.cxl_spill if cxl else 0

    def make_tenants(policy_name=None):
        off = 10 * period * periods
        tenants = [PrefillTenant(i, job_bytes=job * channels, period=period,
                                 phase=period // 10 + i * period // 2 if prefill else off,
                                 window=window * channels, name=f"prefill{i}") for i in (0, 1)]
        tenants += [DecodeTenant(i, step_bytes=step * channels, think=think, seed=seed, cxl_fraction=float(spill),
                                 name=f"decode{i}") for i in range(2, 8)]
        return tenants

    def make_cxl():
        # The CXL link keeps its utilisation under time compression: K times
        # faster, since decode traffic is K times denser.
        per_channel = Fraction(Essay.cxl_gb_per_s, gpu.channels) * scale.compression
        links = [CxlLink(latency=ns_to_cycles(Essay.cxl_latency_ns),
                         cycles_per_access=ns_to_cycles(Fraction(32, per_channel))) for _ in range(channels)]
        return links if channels > 1 else links[0]

    hbm_step = int(step * (1 - spill))
    contract = contract_doc(
        [_prefill_contract(i, scale, priority=1, guaranteed=CHANNEL_GBPS * Essay.prefill_duty, weight=1)
         for i in (0, 1)]
        + [_decode_contract(i, hbm_step, think, scale, priority=1, weight=1) for i in range(2, 8)],
        channel_gbps=CHANNEL_GBPS, clock_mhz=FABRIC_MHZ, admission_limit=Essay.admission_limit)
    return on_channels(Workload(make_tenants, contract, cxl=make_cxl if cxl else None,
                                horizon=periods * period,
                                description=(f"{gpu.name}: 1/{gpu.channels} per channel; 2 prefills of "
                                             f"{job / 1e6:.2f} MB every {period} cycles (half a period apart); "
                                             f"6 decode streams of {step} B per step, {float(spill):.0%} to CXL")),
                       channels, coordinator)


#: Bytes a fabric request carries in the studies' runs: two contiguous 128 B
#: transactions of a tenant, as kvfabric's AXI front end cuts bursts into
#: pieces of ``frag_beats`` x 32 B = 256 B by default (spec §14.2;
#: :class:`~sim.fabric.FabricPolicy`'s ``request_bytes``).  The workload
#: family's the same (issue #41: one transaction a request left a 400 MHz
#: fabric granting exactly the channel's peak, reports/grant_rate.md).
REQUEST_BYTES = 256

#: Report names of the front ends: (name for make_front_end, its options).
_FRONT_END_OF = {
    "FCFS": ("fcfs", {}),
    "FR-FCFS": ("frfcfs", {}),
    "FR-FCFS + coloring": ("frfcfs", dict(coloring=True)),
    "SW throttle": ("throttle", {}),
    "Static partition": ("partition", {}),
    "Fabric": ("fabric", {}),
    "Fabric, kind-aware": ("fabric", dict(kind_aware=True)),
    "Fabric-QoS": ("fabric-qos", {}),
    "Fabric + coloring": ("fabric", dict(coloring=True)),
}


def make_policy(name, workload, scale):
    """Policy objects by report name (the engine's :func:`make_front_end`); the
    software throttle decides once per essay millisecond at ``scale``."""
    try:
        front_end, options = _FRONT_END_OF[name]
    except KeyError:
        raise ValueError(f"Unknown policy {name!r}") from None
    if front_end == "throttle":
        options = dict(throttle_period=scale.cycles(1))
    contract = workload.contract if front_end.startswith("fabric") else None
    if contract is not None:
        options = dict(options, request_bytes=REQUEST_BYTES)
    return make_front_end(front_end, contract, label=name, **options)


#: Issue #27's fabric: setup A's H200 channels, eight of them simulated.
ACROSS_CHANNELS = 8
#: The coordinator's epoch in the issue #27 runs, fabric cycles (20.48 us at 400 MHz,
#: ``coordinator_epoch_us = 20.48`` in the contract).  Why: a moved tenant is back
#: within 2E + COORD_LATENCY (spec §13.7), 43.5 us here, while an epoch holds about
#: two steps of each decode stream (think time 16,843 memory cycles = 4,211 fabric
#: cycles), so its demand measures a decode's spread over the channels to about 9 %
#: (a step is 424 random 256 B blocks, 53 per channel with a standard deviation of
#: 7).  The shortest epoch (2,048 cycles) holds half a step on average: epochs
#: without a step give the even split, the others one step's 13 % spread, which the
#: next step does not repeat; a longer one reacts later and needs longer runs.
COORD_EPOCH_CYCLES = 8192


def on_channels(workload, channels, coordinator, epoch_cycles=COORD_EPOCH_CYCLES):
    """Setup A's or B's ``workload`` on ``channels`` channels.  Why: issue #27's
    latency-isolation targets, setups A and B judged with the coordinator
    splitting each tenant's rate per epoch.  The setup makes every decode step,
    prefill job and prefill window ``channels`` times its one-channel size and
    the system spreads every tenant over every channel (its default channel
    map), so each channel sees the one-channel load (a decode step's random
    blocks: on average), as :func:`across_channels` spreads its decodes.  Here
    the contract: each tenant's GB/s ``channels`` times the one-channel figure
    in total (spec §12: every channel enforces 1/``channels`` of it, so each
    keeps the one-channel registers), the coordinator on or off at issue #27's
    epoch, floor 0.  One channel: ``workload`` as it is."""
    if channels == 1:
        if coordinator:
            raise ValueError("The coordinator needs a contract of more than one channel")
        return workload
    doc = copy.deepcopy(workload.contract)
    for t in doc["tenant"]:
        t["guaranteed_gbps"] *= channels
        t["burst_gbps"] *= channels
    doc["fabric"].update(channels=channels, coordinator=coordinator, coordinator_epoch_us=epoch_cycles / FABRIC_MHZ)
    return replace(workload, contract=doc, channels=channels,
                   description=(f"{workload.description}; on {channels} channels, every step and job x{channels} "
                                f"and spread over them; coordinator (when on): epoch {epoch_cycles} fabric cycles "
                                f"({epoch_cycles / FABRIC_MHZ:g} µs), floor 0"))


@dataclass
class AcrossChannels:
    """One issue #27 run's workload (see :func:`across_channels`)."""

    make_tenants: object       # callable() -> list of tenants
    contract: dict             # the 8-channel contract document
    channel_sets: list         # per tenant: its channels
    moves: list                # per tenant: ((memory cycle, channels, None), ...)
    horizon: int               # memory cycles
    move_cycle: int            # the moving tenant's move (None: no move)
    description: str = ""


def across_channels(scale, *, mapping, coordinator, epoch_cycles=COORD_EPOCH_CYCLES, epochs=20, prefill=True,
                    seed=1):
    """Issue #27's workload on :data:`ACROSS_CHANNELS` channels: two backlogged
    prefills (priority 2) and setup A's three decode streams (priority 1),
    every stream of a decode spread over the channels (a step is setup A's
    per-channel step on each channel).

    Tenant 0 ("prefill-moving") is guaranteed 40 GB/s in total: with
    ``mapping`` "skewed" its addresses are on channels 0-1 (20 GB/s on each of
    them when the coordinator moves its rate there, 5 GB/s with the even
    split); "shift" starts it there and moves it to channels 4-5 half-way
    through the run, in the middle of an epoch (the slowest reaction, spec
    §13.7); "even" spreads it like the others.  Tenant 1 ("prefill-spread")
    is guaranteed 96 GB/s, spread.  The decodes are guaranteed 1.5x their mean
    demand (the report's "decode guarantee x1.5" knob: an epoch's demand
    spreads a decode's rate unevenly, see :data:`COORD_EPOCH_CYCLES`), their
    priority 1 arrival-ordered (so never levelled by the coordinator).  The
    run lasts ``epochs`` epochs of ``epoch_cycles`` fabric cycles (at
    :data:`FABRIC_MHZ`); the contract sets ``coordinator`` and its epoch,
    with floor 0 (a floor would take its share on the six channels tenant 0
    does not use off its total, spec §13.7).  ``prefill`` False: both
    prefills idle (the decode-only baseline).
    """
    if mapping not in ("skewed", "shift", "even"):
        raise ValueError(f"mapping must be 'skewed', 'shift' or 'even', not {mapping!r}")
    n = ACROSS_CHANNELS
    step = scale.per_channel_bytes(Essay.decode_step_bytes, H200)
    think = scale.cycles(Fraction(1000, Essay.decode_steps_per_s))
    period = MEMORY_MHZ // FABRIC_MHZ
    horizon = epochs * epoch_cycles * period
    every = tuple(range(n))
    skewed = (0, 1) if mapping != "even" else every
    move_cycle = None
    moves = [()] * 5
    if mapping == "shift":
        move_cycle = (epochs * epoch_cycles // 2 + epoch_cycles // 2) * period
        moves[0] = ((move_cycle, (4, 5), None),)
    big = 1 << 40

    def make_tenants():
        tenants = []
        for tid, name, window in ((0, "prefill-moving", 600), (1, "prefill-spread", 2400)):
            if prefill:
                tenants.append(PrefillTenant(tid, job_bytes=big // 128 * 128, period=big, phase=0, window=window,
                                             priority=2, name=name))
            else:
                tenants.append(PrefillTenant(tid, job_bytes=1 << 20, period=big, phase=big, window=window,
                                             priority=2, name=f"{name} (off)"))
        tenants += [DecodeTenant(i, step_bytes=step * n, think=think, seed=seed, priority=1, name=f"decode{i}")
                    for i in (2, 3, 4)]
        return tenants

    decode = _decode_contract(0, step * n, think, scale, priority=1, headroom=Fraction(3, 2))
    tenants = [_prefill_contract(0, scale, priority=2, guaranteed=40),
               _prefill_contract(1, scale, priority=2, guaranteed=96)]
    tenants += [dict(decode, id=i, name=f"decode{i}") for i in (2, 3, 4)]
    for t in tenants:
        t["burst_gbps"] = CHANNEL_GBPS * n
        t["name"] = {0: "prefill-moving", 1: "prefill-spread"}.get(t["id"], t["name"])
    doc = contract_doc(tenants, channel_gbps=CHANNEL_GBPS, clock_mhz=FABRIC_MHZ,
                       admission_limit=Essay.admission_limit)
    # The decodes' priority arrival-ordered, as the README advises for a
    # latency-bound tenant (spec §6.2): the coordinator never levels them
    # (§13.4), though a step of 256 B requests fills their queues.
    doc["fabric"].update(channels=n, coordinator=coordinator,
                         coordinator_epoch_us=epoch_cycles / FABRIC_MHZ, arrival_priorities=[1])
    doc["tenant"] = [{k: (float(v) if isinstance(v, Fraction) else v) for k, v in t.items()} for t in doc["tenant"]]
    sets = [skewed, every, every, every, every]
    what = {"skewed": "on channels 0-1", "shift": f"on channels 0-1, moving to 4-5 at cycle {move_cycle}",
            "even": "spread"}[mapping]
    return AcrossChannels(make_tenants, doc, sets, moves, horizon, move_cycle,
                          description=(f"{n} x {float(CHANNEL_GBPS):g} GB/s channels, arbiter at {FABRIC_MHZ} MHz, "
                                       f"coordinator {'on' if coordinator else 'off'} (epoch {epoch_cycles} "
                                       f"cycles); prefill-moving (40 GB/s) {what}, prefill-spread (96 GB/s) and "
                                       f"3 decodes of {step * n} B steps spread"))
