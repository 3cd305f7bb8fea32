"""kvfabric tb package."""
