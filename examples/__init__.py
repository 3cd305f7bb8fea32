"""Contracts and workloads shipped with kvfabric, installed as package data.

``kvfabric demo`` uses ``essay.toml``; from a wheel the files are found here
rather than relative to a checkout.
"""

from importlib import resources
from pathlib import Path

__all__ = ["example_path"]


def example_path(name: str) -> Path:
    """Path of the shipped example file ``name`` (e.g. ``"essay.toml"``)."""
    path = Path(str(resources.files(__name__) / name))
    if not path.is_file():
        raise FileNotFoundError(f"kvfabric ships no example named {name!r} (looked in {path.parent})")
    return path
