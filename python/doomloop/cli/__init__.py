"""The ``doomloop`` command: ``doomloop scan`` finds the loops in recorded agent runs
(:mod:`doomloop.cli.scan`), ``doomloop demo`` runs a scripted session through the session
detector (:mod:`doomloop.cli.demo`). ``python -m doomloop`` is the same command.

Exit codes: 0 when no finding reached ``--fail-on``, 1 when one did, 2 for a usage or input
error (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

__all__ = ["EXIT_FINDINGS", "EXIT_OK", "EXIT_USAGE", "main", "parser"]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def parser() -> argparse.ArgumentParser:
    from .. import __version__
    from . import demo, scan

    top = argparse.ArgumentParser(
        prog="doomloop",
        description="Catch LLM agents stuck in loops. `doomloop scan --demo` shows what it finds in sample traces.",
    )
    top.add_argument("--version", action="version", version=f"doomloop {__version__}")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (scan, demo):
        module.add_parser(commands)
    return top


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command with ``argv`` (default: the process's arguments); returns the exit
    code."""
    arguments = parser().parse_args(argv)
    try:
        return int(arguments.run(arguments))
    except KeyboardInterrupt:
        sys.stderr.write("doomloop: interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`doomloop scan ... | head`): nothing left to say.
        sys.stderr.close()
        return EXIT_OK
