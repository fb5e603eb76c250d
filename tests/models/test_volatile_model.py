"""The engine's volatile-token masks against the Python model (tests/models/volatile_model.py):
two text results hash alike for the tool-loop detector's keyword configuration exactly when the
model masks them alike, and never alike under OpenClaw's rules unless they are equal."""

from __future__ import annotations

from hypothesis import assume, example, given, settings, strategies as st

from doomloop import fingerprint, tool_result_hash
from volatile_model import mask, masked_value

# Text built from pieces the rules read, so that tokens (and near misses) are common.
PIECES = st.sampled_from(
    [
        "pid",
        "PID=",
        "pid 4",
        "0x",
        "0x7ffd5e8c",
        "/tmp/",
        "/var/folders/x y",
        "tmp",
        "tmpa1b2c3",
        "2026-12-02",
        "T",
        " ",
        "05:31:44",
        ":",
        "5",
        "12",
        ".",
        ".25",
        "Z",
        "+01:00",
        "-0130",
        "1764590400",
        "1764590400123",
        "s",
        "ms",
        "sec",
        "seconds",
        "min",
        "MS",
        "3f2a9c1e-0b7d-4e8a-9f00-1c2d3e4f5a6b",
        "abc",
        "_",
        "(",
        ")",
        ",",
        "\n",
        "\x0b",
        "é",
        "x",
        "f",
        '"',
        '"pid"',
        '"elapsed_ms": ',
        '"updatedAt":"',
        '"startTime"',
        '"state": ',
        "\t",
        "-",
        "\\",
    ]
)
TEXTS = st.lists(PIECES, max_size=12).map("".join) | st.text(max_size=40)


def digest(text: str, keyword: bool = True) -> object:
    return tool_result_hash("exec", {"command": "check"}, result=text, hash_plain_results=keyword)


def model(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    masked = mask(raw)
    return raw if masked is None else masked


@settings(max_examples=1500, deadline=None)
@given(TEXTS, TEXTS)
@example("started (pid 91822)", "started (pid 91823)")
@example("at 2026-12-02T05:31:44Z: running", "at 2026-12-03T00:00:00Z: running")
@example("took 12.3s", "took 850 ms")
@example("step 3/5", "step 4/5")
@example('{"state": "running", "pid": 811, "elapsed_ms": 1200}', '{"state": "running", "pid": 812, "elapsed_ms": 6.5}')
@example('{"updatedAt": "05:31:44", "n": 1}', '{"updatedAt": "x", "n": 1}')
def test_results_hash_alike_exactly_when_the_model_masks_them_alike(one: str, two: str) -> None:
    assert (digest(one) == digest(two)) == (model(one) == model(two)), (one, two, model(one), model(two))


@settings(max_examples=300, deadline=None)
@given(TEXTS, TEXTS)
def test_openclaws_rules_mask_nothing(one: str, two: str) -> None:
    assert (digest(one, keyword=False) == digest(two, keyword=False)) == (one == two)


def test_a_text_without_volatile_tokens_keeps_its_digest() -> None:
    for text in ("step 3/5: pushing image", "12 passed, 1 failed", "version 1.2.3"):
        assert mask(text.encode()) is None and digest(text) == digest(text, keyword=False)


def test_a_text_past_the_limit_is_compared_as_it_is() -> None:
    from volatile_model import MASK_LIMIT

    long_one, long_two = ("x" * MASK_LIMIT) + " pid 1", ("x" * MASK_LIMIT) + " pid 2"
    assert digest(long_one) != digest(long_two) and model(long_one) != model(long_two)
    at_limit = "x" * (MASK_LIMIT - len(" pid 1")) + " pid {}"
    assert digest(at_limit.format(1)) == digest(at_limit.format(3))


# --- plain values: texts at every depth, and values under keys naming a volatile quantity ----

KEYS = st.sampled_from(
    ["state", "pid", "elapsed_ms", "elapsedMs", "updatedAt", "startTime", "progress", "timeout", "ts", "at_risk"]
) | st.text(max_size=8)
SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.5, 1.0, 2.0]) | TEXTS
PLAIN = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


def value_digest(value: object, keyword: bool = True) -> object:
    return tool_result_hash("exec", {"command": "check"}, result=value, hash_plain_results=keyword)


@settings(max_examples=1500, deadline=None)
@given(PLAIN, PLAIN)
@example(
    {"state": "running", "pid": 811, "log": "at 05:31:44"},
    {"state": "running", "pid": 812, "log": "at 05:31:49"},
)
@example({"progress": 3, "elapsed_ms": 10}, {"progress": 4, "elapsed_ms": 10})
@example([{"startTime": "x"}], [{"startTime": "y"}])
@example({"pid_\udc80": 1}, {"pid_\udc80": 2})
def test_plain_values_hash_alike_exactly_when_the_model_masks_them_alike(one: object, two: object) -> None:
    assume(not isinstance(one, str) and not isinstance(two, str))  # text results: the test above
    assume(one is not None and two is not None)  # a None result records nothing
    assert (value_digest(one) == value_digest(two)) == (masked_value(one) == masked_value(two)), (
        one,
        two,
        masked_value(one),
        masked_value(two),
    )


QUIET_KEYS = st.sampled_from(["state", "progress", "timeout", "at_risk", "step", "output"])
QUIET_TEXTS = st.sampled_from(["running", "step 3/5", "12 passed", "", "version 1.2.3"])
QUIET = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | QUIET_TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(QUIET_KEYS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(QUIET)
def test_a_plain_value_with_nothing_to_mask_keeps_its_canonical_digest(value: object) -> None:
    # (A None result records nothing: it has no digest.)
    assert value_digest(value) == (None if value is None else fingerprint(value))
