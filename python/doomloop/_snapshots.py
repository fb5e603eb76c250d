"""Snapshot plumbing shared by the detectors: ``from_bytes``, and ``copy``, ``deepcopy`` and
``pickle`` through ``to_bytes``.

A detector class mixes :class:`Snapshots` in before its engine and supplies what differs:
``_SNAPSHOT_CONFIG``, the config class a snapshot carries the settings of (its name is the
kind ``snapshot_settings`` checks), or instead ``_SNAPSHOT_KIND`` and its own
``_from_settings`` for a detector whose settings are its keyword arguments;
``_SNAPSHOT_OPTIONS``, the keyword options a snapshot does not carry (runtime callables,
extension points), and ``_options()``, their current values. The engine supplies
``to_bytes()`` and ``_restore(data)``.
"""

from __future__ import annotations

from ._core import snapshot_settings

# Not `typing.TYPE_CHECKING`: importing typing would double the cost of `import doomloop`.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, ClassVar, Dict, FrozenSet, Tuple, TypeVar, Union

    _Detector = TypeVar("_Detector", bound="Snapshots")


class Snapshots:
    """``from_bytes``, ``__copy__``, ``__deepcopy__`` and ``__reduce__`` for a detector."""

    __slots__ = ()

    if TYPE_CHECKING:
        _SNAPSHOT_CONFIG: ClassVar[Any]
        _SNAPSHOT_OPTIONS: ClassVar[FrozenSet[str]]

        def to_bytes(self) -> bytes: ...
        def _restore(self, data: Union[bytes, bytearray, memoryview]) -> None: ...
        def _options(self) -> Dict[str, Any]: ...

    @classmethod
    def from_bytes(cls: type[_Detector], data: bytes, **options: Any) -> _Detector:
        """The detector a :meth:`to_bytes` snapshot saved: same config, same state, so it
        answers every continuation as the original would. ``options`` are the constructor's
        keyword options a snapshot does not carry (see the class). Raises
        :class:`~doomloop.SnapshotError` naming what is wrong with ``data``."""
        unknown = set(options) - cls._SNAPSHOT_OPTIONS
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
        self = cls._from_settings(snapshot_settings(cls._snapshot_kind(), data), options)
        self._restore(data)
        return self

    @classmethod
    def _snapshot_kind(cls) -> str:
        # The settings table a snapshot of this class carries (snapshot_settings checks it).
        return str(cls._SNAPSHOT_CONFIG.__name__)

    @classmethod
    def _from_settings(cls: type[_Detector], settings: Tuple[Any, ...], options: Dict[str, Any]) -> _Detector:
        # A detector built from a snapshot's settings, before its state is restored.
        return cls(cls._SNAPSHOT_CONFIG(*settings), **options)  # type: ignore[call-arg]

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_restored, (type(self), self.to_bytes(), self._options()))

    def __copy__(self: _Detector) -> _Detector:
        return _restored(type(self), self.to_bytes(), self._options())

    def __deepcopy__(self: _Detector, memo: Dict[int, Any]) -> _Detector:
        return self.__copy__()


def _restored(cls: type[_Detector], data: bytes, options: Dict[str, Any]) -> _Detector:
    # Module-level, so pickle can name it.
    return cls.from_bytes(data, **options)
