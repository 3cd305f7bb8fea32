"""Shared helpers of the Amaranth-simulator tests: one AXI4-Lite manager, one register mirror."""
