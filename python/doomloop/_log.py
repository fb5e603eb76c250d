"""The ``doomloop`` logger, imported on first use: ``logging`` costs more to import than
the rest of ``import doomloop`` together, and most processes never log a loop."""

from __future__ import annotations


def warning(message: str, *args: object) -> None:
    """Log a warning under the ``doomloop`` logger."""
    import logging

    logging.getLogger("doomloop").warning(message, *args)


def info(message: str, *args: object) -> None:
    """Log an info line under the ``doomloop`` logger."""
    import logging

    logging.getLogger("doomloop").info(message, *args)
