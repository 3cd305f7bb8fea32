"""Round-robin pick among requesters, one-hot.

Every multiplexer of the front end that shares one resource among many
(a channel's request port among tenants' read and write sides, a tenant's
reorder buffer write port among channels) uses it, so no requester waits
behind more than ``n - 1`` others. The pointer is the index last served; the
search starts one past it. Written as one fixed-priority encoder per pointer
value (a case), which is what a rotation followed by an encoder and a rotation
back would synthesise to, without the barrel shifters.
"""

from amaranth.hdl import Module, Signal, Cat

__all__ = ["round_robin"]


def round_robin(m: Module, requests, advance, *, name: str):
    """One-hot grant among ``requests`` (a list of 1-bit values).

    ``advance`` (a 1-bit value, usually "the granted requester was served")
    moves the pointer to the granted index. Returns ``(grant, any)``: a list
    of 1-bit signals, at most one of them set, and their OR.
    """
    n = len(requests)
    grant = [Signal(name=f"{name}_grant_{i}") for i in range(n)]
    any_req = Signal(name=f"{name}_any")
    m.d.comb += any_req.eq(Cat(*requests).any())
    if n == 1:
        m.d.comb += grant[0].eq(requests[0])
        return grant, any_req
    last = Signal(range(n), name=f"{name}_last", init=n - 1)
    with m.Switch(last):
        for p in range(n):
            with m.Case(p):
                taken = None
                for k in range(1, n + 1):
                    i = (p + k) % n
                    if taken is None:
                        m.d.comb += grant[i].eq(requests[i])
                        taken = requests[i]
                    else:
                        m.d.comb += grant[i].eq(requests[i] & ~taken)
                        taken = taken | requests[i]
    with m.If(advance & any_req):
        for i in range(n):
            with m.If(grant[i]):
                m.d.sync += last.eq(i)
    return grant, any_req
