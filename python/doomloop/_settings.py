"""The base of the config classes: immutable value objects whose fields, defaults and checks
are the engine's (``doomloop._core.settings_of``, ``check_settings``); nothing here restates
a default or a range."""

from __future__ import annotations

from ._core import check_settings, settings_of

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`
# (type checkers treat any constant of this name the same way).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Dict, Tuple, TypeVar

    _S = TypeVar("_S", bound="Settings")


def defaults(owner: str) -> Dict[str, Any]:
    """``{setting: default}`` of the engine's settings of ``owner``, in constructor order."""
    return {name: default for name, default, _, _ in settings_of(owner)}


class Settings:
    """A config class's shared behaviour. A subclass names its ``_OWNER`` (the engine's
    settings table), lists the table's names as ``__slots__`` and passes every value, in
    that order, to :meth:`_set_all` from its ``__init__``."""

    __slots__ = ("_values",)

    _OWNER = ""
    _values: Tuple[Any, ...]

    def _set_all(self, *values: Any) -> None:
        # One engine call checks them all: TypeError or ConfigError naming the setting.
        checked = check_settings(self._OWNER, values)
        object.__setattr__(self, "_values", checked)
        for name, value in zip(type(self).__slots__, checked, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{self._OWNER} is immutable; use .replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self._OWNER} is immutable")

    def replace(self: _S, **changes: Any) -> _S:
        """A copy with ``changes`` applied (checked like the constructor)."""
        unknown = set(changes) - set(type(self).__slots__)
        if unknown:
            raise TypeError(f"{self._OWNER} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{**self.as_dict(), **changes})

    def as_dict(self) -> Dict[str, Any]:
        """Every field by name, in declaration order."""
        return dict(zip(type(self).__slots__, self._values, strict=True))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values == other._values

    def __hash__(self) -> int:
        return hash(self._values)

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        # Pickle and copy rebuild through the constructor, which checks the values again.
        return (type(self), self._values)

    def __repr__(self) -> str:
        pairs = zip(defaults(self._OWNER).items(), self._values, strict=True)
        changed = ", ".join(f"{name}={value!r}" for (name, default), value in pairs if value != default)
        return f"{self._OWNER}({changed})"
