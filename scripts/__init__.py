"""kvfabric scripts package."""
