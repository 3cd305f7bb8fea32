"""The AXI4 front end of kvfabric (spec §14): one module a job.

* :mod:`.bus` - the AXI4 signature of the tenant and manager ports.
* :mod:`.splitter` - cuts a tenant burst into per-channel sub-bursts.
* :mod:`.round_robin` - the fair one-hot pick every multiplexer here uses.
* :mod:`.read_tracker` - a tenant's read entries and reorder buffer.
* :mod:`.write_tracker` - a tenant's write entries, write buffer and B merge.
* :mod:`.request_mux` - one channel's request port, fed by every tenant.
* :mod:`.issue` - one channel's manager port: grants out, R and B back, credits.
* :mod:`.top` - :class:`KvFabricAxi`, the whole of it around :class:`kvfabric.hw.top.KvFabric`.
"""
