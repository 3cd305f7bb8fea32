"""Payload layouts and stream signatures shared by the channel core and the top.

Every factory takes a :class:`hw.params.FabricParams` so that the widths follow
the elaboration parameters (spec §2, §3, §5).
"""

from amaranth.lib import data, enum, stream

from kvfabric import spec
from kvfabric.spec import check_params

__all__ = [
    "Kind",
    "request_layout", "grant_layout", "tenant_config_layout", "queue_entry_layout", "acceptance_layout",
    "request_signature", "grant_signature",
]


class Kind(enum.Enum, shape=2):
    """Grant kind (spec §2, §6.2)."""
    GUARANTEED = spec.GUARANTEED
    BURST      = spec.BURST
    FCFS       = spec.FCFS
    URGENT     = spec.URGENT


def request_layout(params):
    """Payload of the request stream ``req[c]``: ``tenant``, ``bytes``, ``id``."""
    check_params(params)
    return data.StructLayout({
        "tenant": params.tenant_bits,
        "bytes":  params.bytes_bits,
        "id":     params.id_width,
    })


def grant_layout(params):
    """Payload of the grant stream ``grant[c]``: ``tenant``, ``bytes``, ``id``, ``kind``.

    The arrival timestamp of the granted request (needed by telemetry for SLO
    accounting) is not part of the external payload; :class:`hw.channel.ChannelArbiter`
    exposes it on a separate ``grant_ts`` port.
    """
    check_params(params)
    return data.StructLayout({
        "tenant": params.tenant_bits,
        "bytes":  params.bytes_bits,
        "id":     params.id_width,
        "kind":   Kind,
    })


def tenant_config_layout(params):
    """Active per-tenant configuration (spec §3, §5; all fields reset to 0)."""
    check_params(params)
    return data.StructLayout({
        "rate":       params.rate_bits,        # UQ13.3 bytes/cycle
        "capacity":   params.capacity_bits,    # UQ25.3 bytes
        "peak_rate":  params.peak_rate_bits,   # UQ13.3 bytes/cycle
        "inv_weight": params.inv_weight_bits,  # UQ8.8
        "priority":   params.priority_bits,    # 0 is highest
        "enable":     1,
        "slo_cycles": params.slo_bits,
    })


def queue_entry_layout(params):
    """One entry of a per-tenant queue (spec §4): ``bytes``, ``id``, ``ts``, ``cost``."""
    check_params(params)
    return data.StructLayout({
        "bytes": params.bytes_bits,
        "id":    params.id_width,
        "ts":    params.ts_bits,
        "cost":  params.cost_bits,
    })


def acceptance_layout(params):
    """A channel's ingress register as the coordinator reads it (spec §13's
    demand): ``valid`` (a valid request was accepted in the previous cycle),
    its ``tenant`` and ``bytes``."""
    check_params(params)
    return data.StructLayout({
        "valid":  1,
        "tenant": params.tenant_bits,
        "bytes":  params.bytes_bits,
    })


def request_signature(params):
    """Stream signature (``valid``, ``ready``, ``payload``) of a request port, source view."""
    return stream.Signature(request_layout(params))


def grant_signature(params):
    """Stream signature (``valid``, ``ready``, ``payload``) of a grant port, source view."""
    return stream.Signature(grant_layout(params))
