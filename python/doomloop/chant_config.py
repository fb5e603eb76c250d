"""Settings of content chanting: :class:`ChantConfig`, the options of a
:class:`~doomloop.ChantDetector` as one immutable value (a :class:`~doomloop.Profile`'s
``chant`` part)."""

from __future__ import annotations

from typing import Optional

from ._settings import Settings, defaults

__all__ = ["ChantConfig"]

_D = defaults("ChantDetector")


class ChantConfig(Settings):
    """The options of :class:`~doomloop.ChantDetector` (its docstring says what each means);
    ``ChantDetector(**config.as_dict())`` builds a detector with them.

    Immutable, compared, hashed, pickled and copied by value. A value of the wrong type raises
    ``TypeError`` and one out of range :class:`~doomloop.ConfigError`, naming the option and
    its range; the defaults and ranges are the engine's (docs/chanting.md lists them).
    """

    _OWNER = "ChantDetector"
    __slots__ = tuple(_D)

    content_chunk_size: int
    max_repeated_chunks: int
    ignore_whitespace: bool
    max_period: int
    seed: Optional[int]

    def __init__(
        self,
        content_chunk_size: int = _D["content_chunk_size"],
        max_repeated_chunks: int = _D["max_repeated_chunks"],
        ignore_whitespace: bool = _D["ignore_whitespace"],
        max_period: int = _D["max_period"],
        seed: Optional[int] = _D["seed"],
    ) -> None:
        self._set_all(content_chunk_size, max_repeated_chunks, ignore_whitespace, max_period, seed)

    def __repr__(self) -> str:
        return "ChantConfig" + super().__repr__()[len(self._OWNER) :]
