"""A pure-Python model of the session detector's checks, straight from doom_loop.md and the
rules of docs/session.md.

It keeps every action and response in a plain list and re-scans them each time: obviously
correct and slow, the opposite of the engine, which keeps running counters over a bounded ring
buffer and fixed-size sketches of the newest action and response only. Similarity is computed
from the feature sets as docs/session.md defines them (with ``canonical_model`` for the
digests of keys and leaves), not from the engine's sketches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Optional

from canonical_model import SEED, model as digest
from doomloop import DoomLoopConfig

MASK = (1 << 64) - 1
SKETCH_SIZE = 32
SKETCH_ROOT = SEED
NUMBER_FEATURE = 0x4E554D424552  # "NUMBER"
SKETCH_DEPTH = 8


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK
    return x ^ (x >> 33)


def feature(context: int, value: int) -> int:
    return fmix64((context ^ value) & MASK)


def _fold(byte: int) -> int:
    # 0 separates words; ASCII letters lowercased; digits, "_" and non-ASCII bytes as they are.
    if 65 <= byte <= 90:
        return byte + 32
    if 48 <= byte <= 57 or 97 <= byte <= 122 or byte == 95 or byte >= 128:
        return byte
    return 0


def words(text: str) -> list[bytes]:
    """The words of a text: runs of word bytes of its UTF-8, folded, each digit run one ``0``,
    except in a path component (a word with a non-digit after ``/`` or ``\\``, or before
    ``.``, ``/`` or ``\\``), which keeps its digits."""
    found: list[bytes] = []
    raw = bytearray()
    before = 0  # the separator byte before the current word
    for byte in text.encode("utf-8", "surrogatepass") + b" ":
        folded = _fold(byte)
        if folded:
            raw.append(byte if 48 <= byte <= 57 else folded)
            continue
        if raw:
            path = not raw.isdigit() and (before in b"/\\" or byte in b"./\\")
            found.append(bytes(raw) if path else re.sub(rb"[0-9]+", b"0", bytes(raw)))
            raw = bytearray()
        before = byte
    return found


def fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def text_features(text: str, context: int) -> set[int]:
    """A word of three bytes or more is one feature (the FNV-1a hash of its folded bytes), a
    shorter one gives each of its bytes."""
    found: set[int] = set()
    for word in words(text):
        if len(word) >= 3:
            found.add(feature(context, fnv1a(word)))
        else:
            found.update(feature(context, byte) for byte in word)
    return found


def argument_features(value: object, context: int = SKETCH_ROOT, depth: int = 0) -> set[int]:
    """A str: its text features; a number (not a bool): one feature whatever its value; a dict,
    list or tuple: its items' (a dict's under the digest of their key, down to
    ``SKETCH_DEPTH``); anything else: its digest."""
    if isinstance(value, str):
        return text_features(value, context)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {feature(context, NUMBER_FEATURE)}
    if isinstance(value, (dict, list, tuple)) and depth < SKETCH_DEPTH:
        found: set[int] = set()
        if isinstance(value, dict):
            for key, item in value.items():
                found |= argument_features(item, digest(key), depth + 1)
        else:
            for item in value:
                found |= argument_features(item, context, depth + 1)
        return found
    return {feature(context, digest(value))}


def similarity(a: set[int], b: set[int]) -> float:
    """Jaccard similarity, exact when both sets have at most SKETCH_SIZE features, else the
    share of the SKETCH_SIZE smallest hashes of both sketches that both sketches hold."""
    if not a and not b:
        return 1.0
    if len(a) <= SKETCH_SIZE and len(b) <= SKETCH_SIZE:
        return len(a & b) / len(a | b)
    kept_a, kept_b = set(sorted(a)[:SKETCH_SIZE]), set(sorted(b)[:SKETCH_SIZE])
    union = sorted(kept_a | kept_b)[:SKETCH_SIZE]
    return sum(1 for h in union if h in kept_a and h in kept_b) / len(union)


FAILURE_HEAD_BYTES = FAILURE_TAIL_BYTES = FAILURE_ARGUMENT_BYTES = 4096


def failure_words(data: bytes) -> list[bytes]:
    """The words of UTF-8 bytes as a failure is read: as :func:`words` reads them, except that
    every digit run is one ``0``, in paths too."""
    return [re.sub(rb"[0-9]+", b"0", word) for word in re.findall(rb"[0-9A-Za-z_\x80-\xff]+", data.lower())]


def failure_text_words(text: str) -> list[bytes]:
    """The words a failure digest reads of a result: all of its UTF-8 when it has at most
    ``FAILURE_HEAD_BYTES + FAILURE_TAIL_BYTES`` bytes, else the words of its first and of its
    last bytes, each part read on its own."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= FAILURE_HEAD_BYTES + FAILURE_TAIL_BYTES:
        return failure_words(data)
    return failure_words(data[:FAILURE_HEAD_BYTES]) + failure_words(data[-FAILURE_TAIL_BYTES:])


def first_string(value: object) -> Optional[str]:
    """The first string argument: a str itself; else the first str leaf of a dict, list or
    tuple in order, its nested containers visited after its own leaves, the last one met first."""
    nested = [value]
    while nested:
        item = nested.pop()
        if isinstance(item, str):
            return item
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else ()
        for child in children:
            if isinstance(child, str):
                return child
            if isinstance(child, (dict, list, tuple)):
                nested.append(child)
    return None


def failure_key(result: object, args: object) -> object:
    """What retry_storm compares of a failure: the words of a str result with each word of the
    first string argument masked (as ``b""``); any other result (a str subclass too) as it is."""
    if type(result) is not str:
        return repr(result)
    argument = first_string(args) or ""
    masked = set(failure_words(argument.encode("utf-8", "surrogatepass")[:FAILURE_ARGUMENT_BYTES]))
    return tuple(b"" if word in masked else word for word in failure_text_words(result))


@dataclass
class Action:
    identity: object
    kind: str
    result: object
    failed: bool
    features: set[int]
    failure: object
    """What retry_storm compares: :func:`failure_key` of an unsuccessful action, else ``result``."""


@dataclass
class ModelDetector:
    config: DoomLoopConfig
    actions: list[Action] = field(default_factory=list)
    markers_at: list[int] = field(default_factory=list)  # actions recorded when each marker came
    plan_visits: list[tuple[object, int]] = field(default_factory=list)  # (state, markers so far)
    responses: list[tuple[set[int], int]] = field(default_factory=list)  # (features, actions so far)
    started_at: Optional[float] = None

    def record_action(self, kind: str, args: object, result: object, success: bool, duration: float) -> None:
        failed = not success or duration > self.config.max_time_per_action
        arguments = {} if args is None else args
        failure = failure_key(result, arguments) if not success else repr(result)
        self.actions.append(Action((kind, repr(arguments)), kind, repr(result), failed, argument_features(arguments), failure))

    def record_response(self, text: str) -> None:
        self.responses.append((text_features(text, SKETCH_ROOT), len(self.actions)))

    def mark_progress(self) -> None:
        self.markers_at.append(len(self.actions))

    def record_plan(self, state: object) -> None:
        self.plan_visits.append((repr(state), len(self.markers_at)))

    def _marker_since(self, boundary: int) -> bool:
        return any(at >= boundary for at in self.markers_at)

    def _alike(self, a: Action, b: Action) -> bool:
        return a.kind == b.kind and similarity(a.features, b.features) >= self.config.similarity_threshold

    def _alike_run(self, window: list[Action]) -> bool:
        """Each action of the window alike to the one before, all with one result."""
        return all(self._alike(x, y) for x, y in pairwise(window)) and len({x.result for x in window}) == 1

    def finding(self, now: float) -> Optional[str]:
        """The rule that fires (its ``metadata["rule"]`` name), in the documented precedence."""
        c, a, n = self.config, self.actions, len(self.actions)

        def last(k: int) -> list[Action]:
            return a[n - k :] if n >= k else []

        if n >= 2:
            window = last(c.max_identical_actions)
            if window and len({x.identity for x in window}) == 1:
                return "identical_actions"
            window = last(c.max_similar_actions)
            if c.similar_by_arguments:
                if window and self._alike_run(window):
                    return "similar_actions"
            elif window and len({x.kind for x in window}) == 1:
                return "same_action_type"
            window = last(c.max_consecutive_failures)
            if c.failures_by_arguments:
                alike = all(self._alike(x, y) for x, y in pairwise(window))
                if window and all(x.failed for x in window) and alike and len({x.failure for x in window}) == 1:
                    return "retry_storm"
            elif window and all(x.failed for x in window):
                return "consecutive_failures"
            k = c.max_no_progress_steps
            window = last(k)
            if window and not self._marker_since(n - k):
                if c.no_progress_by_arguments:
                    if self._alike_run(window):
                        return "alike_no_progress"
                elif len({x.result for x in window}) == 1:
                    return "no_progress"
            if c.detect_cycles and (self._action_cycle() or self._plan_cycle()):
                return "circular_plan"
        if self.started_at is not None and now - self.started_at > c.max_total_time:
            return "time_limit"
        if self._repeated_responses():
            return "repeated_response"
        return None

    def _repeated_responses(self) -> bool:
        k = self.config.max_repeated_responses
        window = self.responses[-k:]
        if len(window) < k:
            return False
        for (before, actions_before), (after, actions_after) in pairwise(window):
            if not before or not after:
                # No words: alike only to another such response with no action between.
                alike = not before and not after and actions_before == actions_after
            else:
                alike = similarity(before, after) >= self.config.similarity_threshold
            if not alike:
                return False
        return True

    def _action_cycle(self) -> bool:
        a, n, r = self.actions, len(self.actions), self.config.min_cycle_repeats
        for p in range(2, self.config.max_cycle_period + 1):
            span = p * r
            if n < span or self._marker_since(n - span):
                continue
            repeats = all(a[i].identity == a[i - p].identity and a[i].result == a[i - p].result for i in range(n - span + p, n))
            if repeats and len({x.identity for x in a[n - p :]}) >= 2:
                return True
        return False

    def _plan_cycle(self) -> bool:
        if not self.plan_visits:
            return False
        state = self.plan_visits[-1][0]
        epoch = len(self.markers_at)
        visits = sum(1 for s, e in self.plan_visits if s == state and e == epoch)
        return visits >= self.config.min_cycle_repeats
