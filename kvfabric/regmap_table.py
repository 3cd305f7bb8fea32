"""The register map compiled from kvfabric/hw/kvfabric.rdl by ``kvfabric regs --sync``.

Generated: do not edit (tests/test_regmap.py checks that it equals the description).
Plain data with no imports; read it through :mod:`kvfabric.regmap`.
"""

REGISTER_MAP = {
    'name': 'kvfabric',
    'desc': 'Tenant-aware HBM bandwidth arbiter: configuration and telemetry over AXI4-Lite (32-bit, byte addresses).',
    'blocks': [
        {'name': 'FABRIC', 'title': 'Fabric registers', 'base': 0x0000, 'stride': 0x0000, 'count': 1, 'per': None, 'registers': [
            {'name': 'ID', 'offset': 0x0000, 'title': 'Identification', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'id', 'lsb': 0, 'width': 32, 'sw': 'r', 'hw': 'na', 'reset': 0x4B564642, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': '"KVFB"'},
            ]},
            {'name': 'VERSION', 'offset': 0x0004, 'title': 'Version', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'version', 'lsb': 0, 'width': 32, 'sw': 'r', 'hw': 'na', 'reset': 0x0100, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': '0.1'},
            ]},
            {'name': 'PARAMS', 'offset': 0x0008, 'title': 'Elaboration parameters', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'tenants', 'lsb': 0, 'width': 8, 'sw': 'r', 'hw': 'w', 'reset': None, 'pulse': False, 'counter': False, 'param': True, 'value_lsb': 0, 'desc': 'N'},
                {'name': 'channels', 'lsb': 8, 'width': 8, 'sw': 'r', 'hw': 'w', 'reset': None, 'pulse': False, 'counter': False, 'param': True, 'value_lsb': 0, 'desc': 'C'},
                {'name': 'queue_depth', 'lsb': 16, 'width': 8, 'sw': 'r', 'hw': 'w', 'reset': None, 'pulse': False, 'counter': False, 'param': True, 'value_lsb': 0, 'desc': 'D'},
                {'name': 'tag_bits', 'lsb': 24, 'width': 8, 'sw': 'r', 'hw': 'w', 'reset': None, 'pulse': False, 'counter': False, 'param': True, 'value_lsb': 0, 'desc': 'T'},
            ]},
            {'name': 'CTRL', 'offset': 0x000C, 'title': 'Control', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'fcfs_bypass', 'lsb': 0, 'width': 1, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'FCFS bypass of the arbitration'},
                {'name': 'snapshot', 'lsb': 1, 'width': 1, 'sw': 'w', 'hw': 'r', 'reset': 0, 'pulse': True, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'write 1 = take a snapshot now (reads 0; needs WSTRB[0])'},
                {'name': 'bulk_run', 'lsb': 8, 'width': 8, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': "fabric grants in a row a bulk tenant keeps while other bulk tenants' non-urgent heads wait (the bulk run), 0 = off"},
            ]},
            {'name': 'EPOCH_CYCLES', 'offset': 0x0010, 'title': 'Snapshot period', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'epoch_cycles', 'lsb': 0, 'width': 32, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'snapshot period in cycles, 0 = off'},
            ]},
            {'name': 'STARVE_LIMIT', 'offset': 0x0014, 'title': 'Starvation limit', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'starve_limit', 'lsb': 0, 'width': 23, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'cycles'},
            ]},
            {'name': 'EPOCH_COUNT', 'offset': 0x0018, 'title': 'Snapshot count', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'epoch_count', 'lsb': 0, 'width': 32, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': True, 'param': False, 'value_lsb': 0, 'desc': 'snapshots taken'},
            ]},
            {'name': 'CREDITS', 'offset': 0x001C, 'title': 'Per-class credit limits', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'credit_urgent', 'lsb': 0, 'width': 8, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'urgent class credit limit'},
                {'name': 'credit_guaranteed', 'lsb': 8, 'width': 8, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'guaranteed class credit limit'},
                {'name': 'credit_burst', 'lsb': 16, 'width': 8, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'burst class credit limit'},
                {'name': 'bulk_prio', 'lsb': 24, 'width': 4, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': "bit p: guaranteed grants at priority p take the burst class's credits"},
                {'name': 'arrival_prio', 'lsb': 28, 'width': 4, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': "bit p: conforming heads at priority p are served oldest first instead of in WF2Q+ order, and burst grants at priority p (not marked bulk) take the guaranteed class's credits"},
            ]},
            {'name': 'COORD', 'offset': 0x0020, 'title': 'Coordination across channels', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'coord_enable', 'lsb': 0, 'width': 1, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'the coordinator rewrites per-channel rates every epoch'},
                {'name': 'coord_floor', 'lsb': 8, 'width': 8, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'UQ0.8: fraction of its even share a tenant keeps on every channel'},
            ]},
            {'name': 'COORD_EPOCH', 'offset': 0x0024, 'title': 'Coordination epoch', 'staged': False, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'coord_epoch_cycles', 'lsb': 0, 'width': 24, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'coordinator epoch in cycles (at least COORD_MIN_EPOCH is used)'},
            ]},
        ]},
        {'name': 'TENANT', 'title': 'Tenant configuration', 'base': 0x0100, 'stride': 0x0020, 'count': 16, 'per': 'tenants', 'registers': [
            {'name': 'RATE', 'offset': 0x0000, 'title': 'Guaranteed rate', 'staged': True, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'rate', 'lsb': 0, 'width': 16, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'UQ13.3 bytes/cycle; 0 = no guarantee: never a guaranteed grant'},
            ]},
            {'name': 'CAPACITY', 'offset': 0x0004, 'title': 'Bucket capacity', 'staged': True, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'capacity', 'lsb': 0, 'width': 28, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'UQ25.3 bytes'},
            ]},
            {'name': 'PEAK_RATE', 'offset': 0x0008, 'title': 'Peak rate', 'staged': True, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'peak_rate', 'lsb': 0, 'width': 16, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'UQ13.3 bytes/cycle'},
            ]},
            {'name': 'INV_WEIGHT', 'offset': 0x000C, 'title': 'Inverse weight', 'staged': True, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'inv_weight', 'lsb': 0, 'width': 16, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'UQ8.8'},
            ]},
            {'name': 'PRIO_EN', 'offset': 0x0010, 'title': 'Priority and enable', 'staged': True, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'priority', 'lsb': 0, 'width': 2, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': '0 highest .. 3'},
                {'name': 'enable', 'lsb': 8, 'width': 1, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'tenant enabled'},
            ]},
            {'name': 'SLO_CYCLES', 'offset': 0x0014, 'title': 'Latency SLO', 'staged': True, 'commit': False, 'snapshot': False, 'fields': [
                {'name': 'slo_cycles', 'lsb': 0, 'width': 24, 'sw': 'rw', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'cycles'},
            ]},
            {'name': 'COMMIT', 'offset': 0x0018, 'title': 'Commit', 'staged': False, 'commit': True, 'snapshot': False, 'fields': [
                {'name': 'commit', 'lsb': 0, 'width': 32, 'sw': 'w', 'hw': 'r', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'any write commits tenant i'},
            ]},
        ]},
        {'name': 'TEL', 'title': 'Tenant telemetry', 'base': 0x1000, 'stride': 0x0020, 'count': 16, 'per': 'tenants', 'registers': [
            {'name': 'BYTES_LO', 'offset': 0x0000, 'title': 'Bytes, low word', 'staged': False, 'commit': False, 'snapshot': True, 'fields': [
                {'name': 'bytes', 'lsb': 0, 'width': 32, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'bytes granted to tenant i, bits [31:0]'},
            ]},
            {'name': 'BYTES_HI', 'offset': 0x0004, 'title': 'Bytes, high word', 'staged': False, 'commit': False, 'snapshot': True, 'fields': [
                {'name': 'bytes', 'lsb': 0, 'width': 16, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 32, 'desc': 'bits [47:32]'},
            ]},
            {'name': 'GRANTS', 'offset': 0x0008, 'title': 'Grants', 'staged': False, 'commit': False, 'snapshot': True, 'fields': [
                {'name': 'grants', 'lsb': 0, 'width': 32, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'grants transferred'},
            ]},
            {'name': 'BURST_GRANTS', 'offset': 0x000C, 'title': 'Burst grants', 'staged': False, 'commit': False, 'snapshot': True, 'fields': [
                {'name': 'burst_grants', 'lsb': 0, 'width': 32, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'grants of kind burst'},
            ]},
            {'name': 'SLO_VIOLATIONS', 'offset': 0x0010, 'title': 'SLO violations', 'staged': False, 'commit': False, 'snapshot': True, 'fields': [
                {'name': 'slo_violations', 'lsb': 0, 'width': 32, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'grants whose wait exceeded slo_cycles'},
            ]},
            {'name': 'QUEUE_HWM', 'offset': 0x0014, 'title': 'Queue high-water mark', 'staged': False, 'commit': False, 'snapshot': True, 'fields': [
                {'name': 'queue_hwm', 'lsb': 0, 'width': 8, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'highest occupancy on any channel'},
            ]},
            {'name': 'AXI_ERRORS', 'offset': 0x0018, 'title': 'AXI4 front end errors', 'staged': False, 'commit': False, 'snapshot': True, 'fields': [
                {'name': 'axi_unsupported', 'lsb': 0, 'width': 16, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'bursts of tenant i answered SLVERR because the AXI4 front end does not carry them (spec 14.6); 0 without the front end'},
                {'name': 'axi_wlast_errors', 'lsb': 16, 'width': 16, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'W beats of tenant i whose WLAST disagreed with the burst length (spec 14.6); 0 without the front end'},
            ]},
        ]},
        {'name': 'DROPPED', 'title': 'Dropped requests', 'base': 0x1800, 'stride': 0x0004, 'count': 16, 'per': 'channels', 'registers': [
            {'name': 'DROPPED', 'offset': 0x0000, 'title': 'Dropped requests', 'staged': False, 'commit': False, 'snapshot': True, 'fields': [
                {'name': 'dropped', 'lsb': 0, 'width': 32, 'sw': 'r', 'hw': 'w', 'reset': 0, 'pulse': False, 'counter': False, 'param': False, 'value_lsb': 0, 'desc': 'invalid requests dropped on channel c'},
            ]},
        ]},
    ],
}
