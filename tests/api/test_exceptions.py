"""The exceptions the engine raises are doomloop.errors' own classes, handed to the extension
once when doomloop is imported: no call into the engine imports a doomloop module."""

from __future__ import annotations

import subprocess
import sys

import pytest

from doomloop import _core
from doomloop.errors import ConfigError, SnapshotError

# Imports doomloop, then makes every later import of a doomloop module fail and forgets the
# modules that defined the exceptions and the registry's key rule: an engine that imported
# them at call time would raise ImportError instead of the classes it was handed.
_CALLS_WITHOUT_IMPORTS = """
import sys
import doomloop
from doomloop import DoomLoopConfig, DoomLoopDetector
from doomloop.errors import ConfigError, SnapshotError
from doomloop.gateway import SessionRegistry

registry = SessionRegistry()


class NoDoomloopImports:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("doomloop"):
            raise ImportError(f"imported {name} at call time")
        return None


sys.meta_path.insert(0, NoDoomloopImports())
for name in ("doomloop.errors", "doomloop.gateway.registry"):
    del sys.modules[name]

try:
    DoomLoopConfig(max_identical_actions=0)
except ConfigError as error:
    print("ConfigError", error.path)
try:
    DoomLoopDetector.from_bytes(b"not a snapshot")
except SnapshotError as error:
    print("SnapshotError", error)
registry.before_tool_call("k" * 300, "read", {})  # past the engine's short-key check
try:
    registry.before_tool_call(b"", "read", {})
except ValueError as error:
    print("ValueError", error)
"""


def test_no_engine_call_imports_a_doomloop_module() -> None:
    result = subprocess.run([sys.executable, "-c", _CALLS_WITHOUT_IMPORTS], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ConfigError DoomLoopConfig.max_identical_actions",
        "SnapshotError not a doomloop snapshot (no DLSN header)",
        "ValueError a session key must not be empty",
    ]


def test_only_value_errors_can_be_bound() -> None:
    with pytest.raises(TypeError, match="config_error must be a ValueError subclass, got KeyError"):
        _core._bind_errors(config_error=KeyError, snapshot_error=SnapshotError)  # type: ignore[arg-type]
    # The refused call bound nothing: the engine still raises doomloop.errors' classes.
    with pytest.raises(ConfigError):
        _core.check_settings("ChantDetector", (0, 6, False, None, None))
