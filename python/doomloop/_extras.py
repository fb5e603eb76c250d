"""How an error that needs an optional dependency says to install it. doomloop is installed
from a clone of its repository (it is on no package index yet), so a hint gives both ways:
the dependency itself, into the environment doomloop is installed in, or the extra from the
clone's root."""

from __future__ import annotations

# Extra -> its requirement, as pyproject.toml's [project.optional-dependencies] pins it (a
# test keeps the two equal).
REQUIREMENTS = {
    "numpy": "numpy>=1.24",
    "rich": "rich>=13",
    "plot": "matplotlib>=3.7",
    "redis": "redis>=5.0.1",
    "prometheus": "prometheus-client>=0.20",
}


def install_hint(extra: str) -> str:
    """``pip install "<requirement>"``, and the ``extra`` installed from a clone."""
    return f'pip install "{REQUIREMENTS[extra]}" (or, in a clone of doomloop: pip install ".[{extra}]")'
