"""cocotb test modules (run inside the simulator by tests/test_cosim.py)."""
