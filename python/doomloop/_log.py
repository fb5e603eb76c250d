"""The ``doomloop`` logger, imported on first use: ``logging`` costs more to import than
the rest of ``import doomloop`` together, and most processes never log a loop.

As the logging guide asks of libraries, the logger gets a ``NullHandler``: records reach
whatever handlers the application configures, and nothing is printed otherwise.
"""

from __future__ import annotations

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`
# (type checkers treat any constant of this name the same way).
TYPE_CHECKING = False

if TYPE_CHECKING:
    import logging
    from typing import Any, Dict, Optional


def _logger() -> logging.Logger:
    import logging

    logger = logging.getLogger("doomloop")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


def warning(message: str, *args: object, extra: Optional[Dict[str, Any]] = None) -> None:
    """Log a warning under the ``doomloop`` logger (``extra``: structured fields of the record)."""
    _logger().warning(message, *args, extra=extra)


def info(message: str, *args: object, extra: Optional[Dict[str, Any]] = None) -> None:
    """Log an info line under the ``doomloop`` logger (``extra``: structured fields of the record)."""
    _logger().info(message, *args, extra=extra)


def error(message: str, *args: object, extra: Optional[Dict[str, Any]] = None) -> None:
    """Log an error under the ``doomloop`` logger (``extra``: structured fields of the record)."""
    _logger().error(message, *args, extra=extra)
