"""kvfabric sim package."""
