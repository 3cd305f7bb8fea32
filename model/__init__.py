"""kvfabric model package."""
