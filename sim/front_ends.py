"""Front ends by name: the one factory ``kvfabric system`` and the essay's
studies build the memory system's policy with.

A front end decides what reaches the controller (the FCFS and FR-FCFS
baselines, FR-FCFS with strict tenant priorities, software throttling,
static partitioning, the fabric's arbiter with or without the QoS
controller) and which controller policies it needs.
"""

from fractions import Fraction

from .fabric import FabricPolicy, FabricQosPolicy
from .hbm3 import MEMORY_MHZ
from .mapping import TRANSACTION_BYTES
from .policies import FcfsPolicy, FrFcfsPolicy, PriorityFrFcfsPolicy, StaticPartitionPolicy, ThrottlePolicy

__all__ = ["FRONT_ENDS", "THROTTLE_PERIOD", "make_front_end"]

FRONT_ENDS = ("fcfs", "frfcfs", "prio-frfcfs", "throttle", "partition", "fabric", "fabric-qos")

#: How often the software throttle decides: one essay millisecond at the
#: system model's time compression (K = 25), 40 us of memory cycles.
THROTTLE_PERIOD = 64_000


def make_front_end(name, contract_doc=None, *, throttle_period=THROTTLE_PERIOD, coloring=False,
                   kind_aware=False, label=None, request_bytes=TRANSACTION_BYTES):
    """The front end ``name`` (one of :data:`FRONT_ENDS`); the fabric ones
    run ``contract_doc``. ``coloring`` turns on page coloring (FR-FCFS and
    fabric), ``kind_aware`` the fabric's kind-aware controller ranks;
    ``label`` names it in reports (default: the front end's own name);
    ``request_bytes`` is the fabric's largest request (the others take
    transactions one by one whatever it is)."""
    if name not in FRONT_ENDS:
        raise ValueError(f"policy must be one of {', '.join(FRONT_ENDS)}, not {name!r}")
    if coloring and name not in ("frfcfs", "fabric"):
        raise ValueError(f"page coloring is an option of frfcfs and fabric, not {name!r}")
    if name.startswith("fabric"):
        if contract_doc is None:
            raise ValueError(f"policy {name!r} needs a contract")
        cls = FabricQosPolicy if name == "fabric-qos" else FabricPolicy
        kw = dict(memory_mhz=MEMORY_MHZ, coloring=coloring, kind_aware=kind_aware, request_bytes=request_bytes)
        return cls(contract_doc, **kw, **({"name": label} if label else {}))
    if name == "prio-frfcfs":
        if contract_doc is None:
            raise ValueError(f"policy {name!r} needs a contract (its tenants' priorities)")
        policy = PriorityFrFcfsPolicy({t["id"]: t["priority"] for t in contract_doc.get("tenant", [])})
    elif name == "throttle":
        # The prefill sleeps to average half the channel, deciding once per
        # throttle period (a kernel-launch granularity).
        policy = ThrottlePolicy(share=Fraction(1, 2), period=throttle_period, scheduler="fcfs")
    else:
        policy = {"fcfs": FcfsPolicy, "frfcfs": FrFcfsPolicy, "partition": StaticPartitionPolicy}[name]()
    if coloring:
        policy.coloring = True
    if label:
        policy.name = label
    return policy
