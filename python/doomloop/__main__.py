"""``python -m doomloop``: the ``doomloop`` command (see :mod:`doomloop.cli`)."""

from .cli import main

raise SystemExit(main())
