"""kvfabric hw package."""
