"""A small pure-Python model of the chant rule (see ``doomloop.chant``), written from the
rule's statement for the property tests: exact window and span comparisons, no table."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

M32 = (1 << 32) - 1


def anchor_span(window: int, repeats: int) -> int:
    """Previous windows an anchor is compared with: the largest power of two <= 32 and
    <= window + repeats."""
    limit = min(32, window + repeats)
    return 1 << (limit.bit_length() - 1)


# Unicode White_Space (Python's str.isspace also accepts U+001C..U+001F, which it excludes).
WHITE_SPACE = frozenset(
    [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000] + list(range(0x2000, 0x200B))
)

Event = Tuple[int, int, Optional[int], int, Tuple[int, ...]]
"""(start, end, period, count, window symbols)."""


def never_blank(_: int) -> bool:
    return False


def token_key(token: int) -> int:
    """What the window hash takes of a token id (as an unsigned 64-bit value): its low half
    with a multiplicative mix of its high half folded in, so ids that differ only in their
    top bits still hash apart (ids below 2**32 are unchanged)."""
    mixed = ((token >> 32) * 0x9E3779B97F4A7C15 >> 32) & M32
    return (token & M32) ^ mixed


def is_blank(code_point: int) -> bool:
    return code_point in WHITE_SPACE


def model(
    symbols: Sequence[int],
    window: int,
    repeats: int,
    max_period: int,
    ignore_whitespace: bool,
    hash_key: Tuple[int, int],
    blank: Callable[[int], bool] = is_blank,
    symbol_key: Callable[[int], int] = lambda symbol: symbol,
) -> Optional[Event]:
    base, salt = hash_key[0] | 1, hash_key[1]
    max_distance = max_period + window - 1
    history = (repeats + 1) * max_distance + window
    prefix = [0]
    for x in symbols:
        prefix.append((prefix[-1] * base + symbol_key(x) + salt) & M32)
    base_w = pow(base, window, 1 << 32)
    span = anchor_span(window, repeats)
    keys: List[Optional[int]] = []
    chains: Dict[Tuple[int, ...], List[int]] = {}  # window -> [last counted, gap, count]
    for i in range(window - 1, len(symbols)):
        w = tuple(symbols[i - window + 1 : i + 1])
        if ignore_whitespace and all(blank(c) for c in w):
            key = None
        else:
            # A window's rank: the top 30 bits of its hash mod 2^32.
            key = ((prefix[i + 1] - prefix[i + 1 - window] * base_w) & M32) >> 2
        earlier = [k for k in keys[-span:] if k is not None]
        keys.append(key)
        if key is None or any(key > k for k in earlier):
            continue
        chain = chains.get(w)
        if chain is None or i - chain[0] > max_distance:
            chain = chains[w] = [i, 0, 1]
        elif i - chain[0] < window:
            continue
        else:
            gap = chain[1]
            length = gap + window
            extends = (
                chain[2] >= 2
                and i - chain[0] == gap
                and i + 1 >= gap + length
                and symbols[i - gap - length + 1 : i - gap + 1] == symbols[i - length + 1 : i + 1]
            )
            if extends:
                chain[:] = [i, gap, chain[2] + 1]
            else:
                chain[:] = [i, *restart(symbols, i, window, repeats, max_distance)]
        if chain[2] >= repeats:
            return _event(symbols, i, window, chain[1], chain[2], history)
    return None


def occurrences(symbols: Sequence[int], i: int, q: int, window: int, most: int) -> int:
    """How many times the window ending at ``i`` occurs at ``i``, ``i - q``, ``i - 2q``, ...
    with the same text between each two (the symbols from the first one's start to ``i``
    repeat with period ``q``), at most ``most``."""
    count = 1
    while count < most:
        first = i + 1 - window - count * q
        if first < 0 or not _periodic(symbols, first, i, q):
            break
        count += 1
    return count


def restart(symbols: Sequence[int], i: int, window: int, repeats: int, max_distance: int) -> Tuple[int, int]:
    """(gap, count) of the chain a counted occurrence starts when it does not extend its own:
    the gap from ``window`` to ``max_distance`` with the most occurrences, the smallest on a
    tie; (0, 1) when no gap gives two."""
    best = (0, 1)
    for q in range(window, max_distance + 1):
        count = occurrences(symbols, i, q, window, repeats)
        if count > best[1]:
            best = (q, count)
    return best


def _periodic(symbols: Sequence[int], first: int, last: int, q: int) -> bool:
    return all(symbols[p] == symbols[p - q] for p in range(first + q, last + 1))


def _event(symbols: Sequence[int], i: int, window: int, gap: int, count: int, history: int) -> Event:
    first = i + 1 - window - (count - 1) * gap
    period = None
    if count >= 2:
        period = next(q for q in range(1, gap + 1) if gap % q == 0 and _periodic(symbols, first, i, q))
    start = first
    floor = max(0, i + 1 - history)
    if period is not None:
        while start > floor and symbols[start - 1] == symbols[start - 1 + period]:
            start -= 1
    return (start, i + 1, period, count, tuple(symbols[i + 1 - window : i + 1]))
