"""``Profile``: a named, frozen set of the three detectors' settings, what a
:class:`~doomloop.Monitor` (and so every gateway session, scan and guardrail) runs with.

A profile file is TOML (``.toml``) or JSON (``.json``) with this schema (docs/monitor.md)::

    name = "my-gateway"          # optional; the profile's name
    base = "recommended"         # optional: "recommended" (default) or "parity"
    escalate_after = 5           # optional: steps a warned loop may go on before it is stopped (0: never)
    ignore_argument_keys = ["request_id", "timestamp"]   # optional: left out of a call's identity
    [tool_policies]              # optional: a tool's name or glob -> "exempt" or its own thresholds
    "wait_*" = { max_identical_actions = 20, warning_threshold = 30, critical_threshold = 60 }
    "notify_user" = "exempt"
    [session]                    # DoomLoopConfig fields, each optional
    max_consecutive_failures = 5
    [tool_loop]                  # LoopDetectionConfig fields, each optional
    warning_threshold = 8
    [chant]                      # ChantConfig fields, each optional
    content_chunk_size = 40

Every key not given keeps the base profile's value; an unknown key, a value of the wrong type
or out of range is a :class:`~doomloop.ConfigError` naming the file and the key.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any, Dict, Mapping, Optional, Tuple, Type, Union

from ._settings import Settings
from .chant_config import ChantConfig
from .errors import ConfigError
from .session_config import DoomLoopConfig
from .tool_loop_config import LoopDetectionConfig
from .tool_policy import ToolPolicy, policies, table

__all__ = ["Profile"]

# The profile's parts: (attribute, config class); a file's sections are named the same.
_PARTS: Tuple[Tuple[str, Type[Settings]], ...] = (
    ("session", DoomLoopConfig),
    ("tool_loop", LoopDetectionConfig),
    ("chant", ChantConfig),
)
_BASES = ("recommended", "parity")

ESCALATE_AFTER = 5
"""The recommended profile's :attr:`Profile.escalate_after`: a loop still reported 5 steps after
its first warning is stopped (docs/monitor.md#warn-then-stop)."""
_MAX_ESCALATE_AFTER = 100_000

IGNORE_ARGUMENT_KEYS: Tuple[str, ...] = (
    "request_id",
    "requestId",
    "trace_id",
    "traceId",
    "span_id",
    "spanId",
    "timestamp",
    "task_progress",
    "idempotency_key",
    "nonce",
)
"""The recommended profile's :attr:`Profile.ignore_argument_keys`: argument keys whose value
changes from one call to the next by design (request and trace ids, a timestamp, Cline's task
progress), so a call repeated with a new one is the same call (docs/monitor.md)."""
_MAX_IGNORED_KEYS = 256

PathLike = Union[str, "os.PathLike[str]"]


class Profile:
    """The settings of one :class:`~doomloop.Monitor`'s detectors, with a name.

    Attributes:
        name: what to call it in reports and logs.
        session: the session detector's :class:`~doomloop.DoomLoopConfig`.
        tool_loop: the tool-loop detector's :class:`~doomloop.LoopDetectionConfig`.
        chant: the :class:`~doomloop.ChantConfig` of the detector that watches each answer.
        escalate_after: warn first, then stop: a loop a detector reports as a warning that is
            still reported this many steps after its first warning (or whose recovery ladder
            is used up) becomes critical in the :class:`~doomloop.Monitor` (0: never, the
            detectors' own levels, as upstream). :data:`ESCALATE_AFTER` in the recommended
            profile, 0 in parity.
        ignore_argument_keys: argument keys left out of a call's identity for both detectors
            (a top-level key of a call's arguments): :data:`IGNORE_ARGUMENT_KEYS` in the
            recommended profile, none in parity.
        tool_policies: ``(pattern, ToolPolicy)`` pairs in order: the first pattern (a tool's
            name or a glob) matching a tool's name gives its calls thresholds of their own, or
            exempts them from both detectors (:mod:`doomloop.tool_policy`). None in either
            named profile.

    Build one with :meth:`recommended` (the default everywhere a user does not choose),
    :meth:`parity`, :meth:`from_openclaw`, :meth:`load` or the constructor; change it with
    :meth:`replace`. Immutable; compares, hashes and pickles by value.
    """

    __slots__ = ("name", "session", "tool_loop", "chant", "escalate_after", "ignore_argument_keys", "tool_policies", "_json")

    name: str
    session: DoomLoopConfig
    tool_loop: LoopDetectionConfig
    chant: ChantConfig
    escalate_after: int
    ignore_argument_keys: Tuple[str, ...]
    tool_policies: Tuple[Tuple[str, ToolPolicy], ...]
    _json: Optional[bytes]

    def __init__(
        self,
        name: str = "custom",
        *,
        session: Optional[DoomLoopConfig] = None,
        tool_loop: Optional[LoopDetectionConfig] = None,
        chant: Optional[ChantConfig] = None,
        escalate_after: int = 0,
        ignore_argument_keys: Any = (),
        tool_policies: Any = (),
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Profile.name must be a non-empty str, got {name!r}")
        if isinstance(escalate_after, bool) or not isinstance(escalate_after, int):
            raise TypeError(f"Profile.escalate_after must be an int, got {type(escalate_after).__name__}")
        if not 0 <= escalate_after <= _MAX_ESCALATE_AFTER:
            raise ValueError(f"Profile.escalate_after must be in 0..{_MAX_ESCALATE_AFTER}, got {escalate_after}")
        object.__setattr__(self, "escalate_after", int(escalate_after))
        object.__setattr__(self, "ignore_argument_keys", _keys(ignore_argument_keys))
        values: Dict[str, Optional[Settings]] = {"session": session, "tool_loop": tool_loop, "chant": chant}
        object.__setattr__(self, "name", name)
        for part, kind in _PARTS:
            value = values[part]
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"Profile.{part} must be a {kind.__name__}, got {type(value).__name__}")
            object.__setattr__(self, part, kind() if value is None else value)
        rules = policies(tool_policies)
        # Checked against this profile's thresholds now (and the engine's table built once).
        table(rules, self.session, self.tool_loop)
        object.__setattr__(self, "tool_policies", rules)
        object.__setattr__(self, "_json", None)

    # --- the named profiles ------------------------------------------------------------------

    @classmethod
    def recommended(cls) -> Profile:
        """The profile measured on real agent runs (docs/quality.md): the session detector's
        :meth:`~doomloop.DoomLoopConfig.recommended` rules, the keyword tool-loop
        configuration (detection on, doomloop's cycle and argument-churn rules) and answers
        watched with a 32-character window repeated 6 times; a warned loop that goes on
        :data:`ESCALATE_AFTER` steps is stopped."""
        session = DoomLoopConfig.recommended()
        chant = ChantConfig(session.content_chunk_size, session.max_repeated_chunks)
        return cls(
            "recommended",
            session=session,
            tool_loop=LoopDetectionConfig(),
            chant=chant,
            escalate_after=ESCALATE_AFTER,
            ignore_argument_keys=IGNORE_ARGUMENT_KEYS,
        )

    @classmethod
    def parity(cls) -> Profile:
        """The upstream defaults exactly: PraisonAI's ``DoomLoopConfig()``, OpenClaw's
        ``tools.loopDetection`` with detection switched on (OpenClaw leaves it off) and the
        chant detector's defaults (a 50-character window repeated 8 times, PraisonAI's), and
        each detector's own levels (no escalation)."""
        tool_loop = LoopDetectionConfig.from_openclaw({"enabled": True}, strict=False)
        return cls("parity", session=DoomLoopConfig(), tool_loop=tool_loop, chant=ChantConfig())

    @classmethod
    def from_openclaw(cls, cfg: Optional[Mapping[str, Any]], agent_id: Optional[str] = None) -> Profile:
        """The recommended profile with its tool part read from an OpenClaw config (a whole
        config or its ``loopDetection`` block, read as
        :meth:`LoopDetectionConfig.from_openclaw` reads it: leniently, and detection stays
        off unless ``enabled: true``)."""
        tool_loop = LoopDetectionConfig.from_openclaw(cfg, agent_id, strict=False)
        return cls.recommended().replace(name="openclaw", tool_loop=tool_loop)

    # --- changing one ------------------------------------------------------------------------

    def replace(self, **overrides: Any) -> Profile:
        """A copy with ``overrides`` applied, checked like the constructors.

        ``name=``; ``escalate_after=``; ``session=``, ``tool_loop=``, ``chant=`` (a config, or
        a dict of its fields to change); or any field of the three by its own name. ``content_chunk_size`` and
        ``max_repeated_chunks`` name both the session detector's and the chant detector's
        window (the two stay one setting)."""
        name = overrides.pop("name", self.name)
        escalate_after = overrides.pop("escalate_after", self.escalate_after)
        ignore_argument_keys = overrides.pop("ignore_argument_keys", self.ignore_argument_keys)
        tool_policies = overrides.pop("tool_policies", self.tool_policies)
        changes: Dict[str, Dict[str, Any]] = {part: {} for part, _ in _PARTS}
        parts: Dict[str, Any] = {part: getattr(self, part) for part, _ in _PARTS}
        for part, kind in _PARTS:
            if part not in overrides:
                continue
            value = overrides.pop(part)
            if isinstance(value, Mapping):
                changes[part].update(value)
            elif isinstance(value, kind):
                parts[part] = value
            else:
                raise TypeError(f"Profile.{part} must be a {kind.__name__} or a dict of its fields, got {type(value).__name__}")
        for key, value in overrides.items():
            owners = [part for part, kind in _PARTS if key in kind.__slots__]
            if not owners:
                raise TypeError(f"Profile has no setting {key!r}")
            for part in owners:
                changes[part][key] = value
        for part, fields in changes.items():
            if fields:
                parts[part] = parts[part].replace(**fields)
        return Profile(
            name,
            **parts,
            escalate_after=escalate_after,
            ignore_argument_keys=ignore_argument_keys,
            tool_policies=tool_policies,
        )

    # --- files -------------------------------------------------------------------------------

    def to_dict(self) -> Dict[str, Any]:
        """``{"name", "escalate_after", "ignore_argument_keys", "tool_policies", "session",
        "tool_loop", "chant"}``, each part every field by name, each tool policy ``"exempt"``
        or the thresholds it sets."""
        parts = {part: getattr(self, part).as_dict() for part, _ in _PARTS}
        monitor = {
            "escalate_after": self.escalate_after,
            "ignore_argument_keys": list(self.ignore_argument_keys),
            "tool_policies": {pattern: policy.to_value() for pattern, policy in self.tool_policies},
        }
        return {"name": self.name, **monitor, **parts}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "profile") -> Profile:
        """The profile a file's decoded content describes (the schema in the module doc);
        ``source`` names it in errors."""
        if not isinstance(data, Mapping):
            raise ConfigError(source, f"a profile must be a table/object, got {type(data).__name__}")
        unknown = set(data) - {"name", "base", *_MONITOR_KEYS} - {part for part, _ in _PARTS}
        if unknown:
            expected = ", ".join(["name", "base", *_MONITOR_KEYS, *(part for part, _ in _PARTS)])
            raise ConfigError(source, f"unknown key {sorted(unknown)[0]!r} (expected {expected})")
        base = data.get("base", "recommended")
        if base not in _BASES:
            raise ConfigError(source, f"base must be one of {', '.join(_BASES)}, got {base!r}")
        profile = cls.recommended() if base == "recommended" else cls.parity()
        overrides: Dict[str, Any] = {}
        for key in _MONITOR_KEYS:
            if key in data:
                overrides[key] = data[key]
        for part, kind in _PARTS:
            fields = data.get(part, {})
            if not isinstance(fields, Mapping):
                raise ConfigError(source, f"[{part}] must be a table/object, got {type(fields).__name__}")
            bad = set(fields) - set(kind.__slots__)
            if bad:
                raise ConfigError(source, f"[{part}] has no setting {sorted(bad)[0]!r}")
            overrides[part] = dict(fields)
        # Unnamed: the file's stem ("gateway" for gateway.toml).
        name = data.get("name", os.path.splitext(os.path.basename(source))[0] or "custom")
        if not isinstance(name, str) or not name:
            raise ConfigError(source, f"name must be a non-empty string, got {name!r}")
        try:
            return profile.replace(name=name, **overrides)
        except (TypeError, ValueError) as error:
            raise ConfigError(source, str(error)) from None

    @classmethod
    def load(cls, path: PathLike) -> Profile:
        """The profile in a ``.toml`` or ``.json`` file (the schema in the module doc).
        Raises :class:`~doomloop.ConfigError` naming the file (and the key) for a file that
        cannot be read or parsed or holds a bad setting."""
        name = os.fspath(path)
        try:
            with open(name, "rb") as file:
                raw = file.read()
        except OSError as error:
            raise ConfigError(name, f"cannot read the profile ({error.strerror or error})") from None
        if name.endswith(".toml"):
            if sys.version_info >= (3, 11):
                import tomllib
            else:
                import tomli as tomllib
            try:
                data = tomllib.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
                raise ConfigError(name, f"not a TOML profile ({error})") from None
        elif name.endswith(".json"):
            try:
                data = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                raise ConfigError(name, f"not a JSON profile ({error})") from None
        else:
            raise ConfigError(name, "a profile file ends in .toml or .json")
        return cls.from_dict(data, source=name)

    def dump(self, path: PathLike) -> None:
        """Write the profile to a ``.toml`` or ``.json`` file that :meth:`load` reads back
        equal. Only the settings that differ from the base (recommended) are written."""
        name = os.fspath(path)
        data = self._file_data()
        if name.endswith(".toml"):
            text = _toml(data, name)
        elif name.endswith(".json"):
            text = json.dumps(data, indent=2) + "\n"
        else:
            raise ConfigError(name, "a profile file ends in .toml or .json")
        with open(name, "w", encoding="utf-8") as file:
            file.write(text)

    def _file_data(self) -> Dict[str, Any]:
        base = Profile.recommended()
        data: Dict[str, Any] = {"name": self.name, "base": "recommended"}
        mine = self.to_dict()
        for key in _MONITOR_KEYS:
            if getattr(self, key) != getattr(base, key):
                data[key] = mine[key]
        for part, _ in _PARTS:
            mine, theirs = getattr(self, part).as_dict(), getattr(base, part).as_dict()
            changed = {key: value for key, value in mine.items() if value != theirs[key]}
            if changed:
                data[part] = changed
        return data

    # --- value semantics ---------------------------------------------------------------------

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Profile is immutable; use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Profile is immutable")

    def _key(self) -> Tuple[Any, ...]:
        return (
            self.name,
            self.session,
            self.tool_loop,
            self.chant,
            self.escalate_after,
            self.ignore_argument_keys,
            self.tool_policies,
        )

    def _compact_json(self) -> bytes:
        """:meth:`to_dict` as compact JSON, computed once (a profile never changes): every
        monitor snapshot carries it, and encoding it each time cost most of a snapshot."""
        encoded: Optional[bytes] = self._json
        if encoded is None:
            encoded = json.dumps(self.to_dict(), separators=(",", ":")).encode()
            object.__setattr__(self, "_json", encoded)
        return encoded

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Profile):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_rebuilt, self._key())

    def __repr__(self) -> str:
        return (
            f"Profile({self.name!r}, session={self.session!r}, tool_loop={self.tool_loop!r}, chant={self.chant!r}, "
            f"escalate_after={self.escalate_after!r}, ignore_argument_keys={self.ignore_argument_keys!r}, "
            f"tool_policies={dict(self.tool_policies)!r})"
        )


def _rebuilt(
    name: str,
    session: DoomLoopConfig,
    tool_loop: LoopDetectionConfig,
    chant: ChantConfig,
    escalate_after: int = 0,
    ignore_argument_keys: Tuple[str, ...] = (),
    tool_policies: Tuple[Tuple[str, ToolPolicy], ...] = (),
) -> Profile:
    # Module-level, so pickle can name it.
    return Profile(
        name,
        session=session,
        tool_loop=tool_loop,
        chant=chant,
        escalate_after=escalate_after,
        ignore_argument_keys=ignore_argument_keys,
        tool_policies=tool_policies,
    )


_MONITOR_KEYS = ("escalate_after", "ignore_argument_keys", "tool_policies")
# The profile's own settings (the monitor's, not a detector's): top-level keys of a file.


def _encodes(key: str) -> bool:
    # A key with a lone surrogate names no argument a decoder gives (and has no UTF-8).
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _keys(value: Any) -> Tuple[str, ...]:
    # ignore_argument_keys: strs, in a list or tuple (a lone str would read as its letters).
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"Profile.ignore_argument_keys must be a list of str, got {type(value).__name__}")
    if len(value) > _MAX_IGNORED_KEYS:
        raise ValueError(f"Profile.ignore_argument_keys holds at most {_MAX_IGNORED_KEYS} keys, got {len(value)}")
    for key in value:
        if not isinstance(key, str) or not key or (not key.isascii() and not _encodes(key)):
            raise TypeError(f"Profile.ignore_argument_keys must hold non-empty strs, got {key!r}")
    return tuple(dict.fromkeys(value))


def _toml(data: Dict[str, Any], where: str) -> str:
    # The profile schema is flat tables of scalars: a writer for just that (the standard
    # library reads TOML but does not write it).
    flat = ("name", "base", "escalate_after", "ignore_argument_keys")
    lines = [f"{key} = {_toml_value(data[key], key, where)}" for key in flat if key in data]
    if "tool_policies" in data:
        lines += ["", "[tool_policies]"]
        for pattern, policy in data["tool_policies"].items():
            if isinstance(policy, str):
                lines.append(f"{json.dumps(pattern)} = {json.dumps(policy)}")
            else:
                fields = ", ".join(f"{key} = {value}" for key, value in policy.items())
                lines.append(f"{json.dumps(pattern)} = {{ {fields} }}")
    for part, _ in _PARTS:
        if part in data:
            lines += ["", f"[{part}]"]
            lines += [f"{key} = {_toml_value(value, f'{part}.{key}', where)}" for key, value in data[part].items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any, key: str, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "[" + ", ".join(json.dumps(item) for item in value) + "]"
    if value is None:
        raise ConfigError(f"{where}: {key}", "is unset (None), which TOML cannot say; dump the profile to a .json file")
    raise ConfigError(f"{where}: {key}", f"cannot write a {type(value).__name__} to TOML")
