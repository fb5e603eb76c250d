"""LoopDetectionConfig: OpenClaw parsing (strict and lenient), agent ids, per-agent merging."""

from __future__ import annotations

import copy
import logging
import pickle
from typing import Any, Callable, Dict, List

import pytest

from doomloop import (
    ConfigError,
    LoopDetectionConfig,
    PostCompactionGuard,
    ToolLoopDetector,
    normalize_agent_id,
    resolve_openclaw_block,
)
from doomloop._core import MAX_GUARD_WINDOW, MAX_THRESHOLD


@pytest.mark.parametrize(
    "raw, normalised",
    [
        ("Safe Runner", "safe-runner"),
        ("  X  ", "x"),
        ("a__b-c", "a__b-c"),
        ("A..B", "a-b"),
        ("!!!", "main"),
        ("", "main"),
        (None, "main"),
        ("--x--", "x"),
    ],
)
def test_normalize_agent_id(raw: Any, normalised: str) -> None:
    assert normalize_agent_id(raw) == normalised


def test_normalize_agent_id_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="agent_id"):
        normalize_agent_id(3)  # type: ignore[arg-type]


WHOLE: Dict[str, Any] = {
    "tools": {"loopDetection": {"enabled": True, "warningThreshold": 5, "detectors": {"pingPong": False}}},
    "agents": {
        "list": [
            {"id": "Safe Runner", "tools": {"loopDetection": {"criticalThreshold": 16, "detectors": {"genericRepeat": False}}}},
            {"id": "plain"},
        ]
    },
}


def test_from_openclaw_merges_the_agent_block() -> None:
    config = LoopDetectionConfig.from_openclaw(WHOLE, agent_id="safe runner")
    assert config.enabled is True
    assert (config.warning_threshold, config.critical_threshold) == (5, 16)
    assert (config.generic_repeat, config.ping_pong, config.known_poll_no_progress) == (False, False, True)
    # An agent without a block gets the global one.
    assert LoopDetectionConfig.from_openclaw(WHOLE, agent_id="plain").critical_threshold == 20
    # Just the block works too.
    assert LoopDetectionConfig.from_openclaw({"enabled": True, "historySize": 12}).history_size == 12


# OpenClaw's rules only: doomloop's own switches off.
OPENCLAW_ONLY = {"cycle": False, "argument_churn": False, "hash_plain_results": False}


def test_openclaw_defaults() -> None:
    assert LoopDetectionConfig.from_openclaw(None) == LoopDetectionConfig(enabled=None, **OPENCLAW_ONLY)
    assert LoopDetectionConfig.from_openclaw({}) == LoopDetectionConfig(enabled=None, **OPENCLAW_ONLY)
    assert resolve_openclaw_block({}) is None
    assert LoopDetectionConfig().enabled is True


@pytest.mark.parametrize(
    "cfg, path",
    [
        ({"tools": {"loopDetection": {"bogus": 1}}}, "tools.loopDetection.bogus"),
        ({"warningThreshold": 0}, "tools.loopDetection.warningThreshold"),
        ({"warningThreshold": "5"}, "tools.loopDetection.warningThreshold"),
        ({"historySize": True}, "tools.loopDetection.historySize"),
        ({"historySize": 2.5}, "tools.loopDetection.historySize"),
        ({"historySize": 10**9}, "tools.loopDetection.historySize"),
        ({"enabled": "yes"}, "tools.loopDetection.enabled"),
        ({"warningThreshold": 20, "criticalThreshold": 20}, "tools.loopDetection.criticalThreshold"),
        ({"criticalThreshold": 30, "globalCircuitBreakerThreshold": 25}, "tools.loopDetection.globalCircuitBreakerThreshold"),
        ({"detectors": {"pingpong": True}}, "tools.loopDetection.detectors.pingpong"),
        ({"detectors": {"pingPong": "off"}}, "tools.loopDetection.detectors.pingPong"),
        ({"detectors": []}, "tools.loopDetection.detectors"),
        ({"postCompactionGuard": {"windowSize": 0}}, "tools.loopDetection.postCompactionGuard.windowSize"),
        ({"postCompactionGuard": {"size": 3}}, "tools.loopDetection.postCompactionGuard.size"),
        ({"tools": {"loopDetection": []}}, "tools.loopDetection"),
        (
            {"agents": {"list": [{"id": "a", "tools": {"loopDetection": {"unknownToolThreshold": -1}}}]}},
            "agents.list[0].tools.loopDetection.unknownToolThreshold",
        ),
        ({"agents": {"list": "x"}}, "agents.list"),
        ({"warningThreshold": 2**40}, "tools.loopDetection.warningThreshold"),
        ({"globalCircuitBreakerThreshold": 2**31}, "tools.loopDetection.globalCircuitBreakerThreshold"),
    ],
)
def test_strict_errors_name_the_key_path(cfg: Dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        LoopDetectionConfig.from_openclaw(cfg, strict=True)
    assert caught.value.path == path
    assert path in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_every_accepted_config_builds_a_detector(caplog: pytest.LogCaptureFixture) -> None:
    # The largest thresholds strict parsing accepts build a detector (the run-time ordering
    # raises critical and global above them); lenient parsing caps larger ones, logged.
    top = {"enabled": True, "warningThreshold": MAX_THRESHOLD, "criticalThreshold": 5, "globalCircuitBreakerThreshold": 2}
    ToolLoopDetector(LoopDetectionConfig.from_openclaw({"enabled": True, "warningThreshold": MAX_THRESHOLD}))
    ToolLoopDetector.from_openclaw(top)
    lenient = LoopDetectionConfig.from_openclaw({"warningThreshold": 2**40, "unknownToolThreshold": 2**64}, strict=False)
    assert (lenient.warning_threshold, lenient.unknown_tool_threshold) == (MAX_THRESHOLD, MAX_THRESHOLD)
    assert "capped" in caplog.text
    ToolLoopDetector.from_openclaw({"enabled": True, "warningThreshold": 2**40})


@pytest.mark.parametrize("strict", ["no", 0, None])
def test_strict_must_be_a_bool(strict: Any) -> None:
    with pytest.raises(TypeError, match="strict"):
        LoopDetectionConfig.from_openclaw({}, strict=strict)


@pytest.mark.parametrize(
    ("window", "error"),
    [(True, TypeError), ("3", TypeError), (2.0, TypeError), (0, ValueError), (MAX_GUARD_WINDOW + 1, ValueError)],
)
def test_post_compaction_guard_window_is_validated(window: Any, error: type) -> None:
    with pytest.raises(error, match=r"PostCompactionGuard\.window_size"):
        PostCompactionGuard(window)


def test_strict_accepts_integral_json_numbers() -> None:
    assert LoopDetectionConfig.from_openclaw({"historySize": 12.0}).history_size == 12


def test_lenient_falls_back_to_defaults_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    cfg = {
        "enabled": True,
        "warningThreshold": 0,
        "criticalThreshold": "x",
        "historySize": 10**9,
        "bogus": 1,
        "detectors": {"pingPong": "no"},
        "postCompactionGuard": {"windowSize": -2},
    }
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        config = LoopDetectionConfig.from_openclaw(cfg, strict=False)
    assert config.enabled is True
    assert (config.warning_threshold, config.critical_threshold) == (10, 20)
    assert config.ping_pong is True
    assert config.post_compaction_window_size == 3
    assert config.history_size == 10_000
    text = "\n".join(r.getMessage() for r in caplog.records)
    for key in ("warningThreshold", "criticalThreshold", "historySize", "bogus", "pingPong", "windowSize"):
        assert key in text


def test_lenient_enabled_that_is_not_a_bool_is_unset() -> None:
    config = LoopDetectionConfig.from_openclaw({"enabled": "yes"}, strict=False)
    assert config.enabled is None
    detector = ToolLoopDetector(config)
    assert detector.arm_post_compaction() == 3  # the guard stays on; detection stays off


UNORDERED = [
    (
        {"warning_threshold": 10, "critical_threshold": 5},
        "LoopDetectionConfig.critical_threshold: must be greater than warning_threshold (10), got 5",
    ),
    (
        {"warning_threshold": 7, "critical_threshold": 7},
        "LoopDetectionConfig.critical_threshold: must be greater than warning_threshold (7), got 7",
    ),
    (
        {"critical_threshold": 40},
        "LoopDetectionConfig.global_circuit_breaker_threshold: must be greater than critical_threshold (40), got 30",
    ),
    (
        {"warning_threshold": 3, "critical_threshold": 5, "global_circuit_breaker_threshold": 5},
        "LoopDetectionConfig.global_circuit_breaker_threshold: must be greater than critical_threshold (5), got 5",
    ),
]


@pytest.mark.parametrize("fields, message", UNORDERED)
def test_keyword_config_refuses_unordered_thresholds(fields: Dict[str, int], message: str) -> None:
    # The run time would raise them, blocking at another threshold than the config says.
    for build in (
        lambda: LoopDetectionConfig(**fields),
        lambda: ToolLoopDetector(**fields),
        lambda: ToolLoopDetector(LoopDetectionConfig(), **fields),
        lambda: LoopDetectionConfig().replace(**fields),
    ):
        with pytest.raises(ConfigError) as raised:
            build()
        assert str(raised.value) == message
        assert raised.value.path == message.split(":")[0]


def _blocked_at(detector: ToolLoopDetector, calls: int) -> list[bool]:
    decisions = []
    for _ in range(calls):
        decision = detector.before_tool_call("read", {"p": 1})
        decisions.append(decision.blocked)
        if not decision.blocked:
            detector.after_tool_call("read", {"p": 1}, result="same")
    return decisions


RAISED = [
    "loop detection: critical_threshold 4 <= warning_threshold 5; using 6",
    "loop detection: global_circuit_breaker_threshold 3 <= critical_threshold 6; using 7",
]


@pytest.mark.parametrize("strict", [False, True])
def test_openclaw_config_raises_unordered_thresholds_at_run_time(strict: bool, caplog: pytest.LogCaptureFixture) -> None:
    # OpenClaw's rule: the config keeps what was given, and the run time raises `critical`
    # to `warning + 1` and `global` to `critical + 1`, with a logged warning. Strict parsing
    # refuses thresholds unordered in one block, not ones ordered in each block of a merge.
    if strict:
        cfg: Dict[str, Any] = {
            "tools": {"loopDetection": {"enabled": True, "warningThreshold": 5, "globalCircuitBreakerThreshold": 3}},
            "agents": {"list": [{"id": "a", "tools": {"loopDetection": {"criticalThreshold": 4}}}]},
        }
        config = LoopDetectionConfig.from_openclaw(cfg, agent_id="a")
    else:
        cfg = {"enabled": True, "warningThreshold": 5, "criticalThreshold": 4, "globalCircuitBreakerThreshold": 3}
        config = LoopDetectionConfig.from_openclaw(cfg, strict=False)
    assert (config.warning_threshold, config.critical_threshold, config.global_circuit_breaker_threshold) == (5, 4, 3)
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        detector = ToolLoopDetector(config)
    assert [r.getMessage() for r in caplog.records] == RAISED
    assert _blocked_at(detector, 8) == [False] * 6 + [True, True]
    # The detector's snapshots, copies and pickles keep the config as given.
    for twin in (ToolLoopDetector.from_bytes(detector.to_bytes()), copy.copy(detector), pickle.loads(pickle.dumps(detector))):
        assert twin.config == config
        assert _blocked_at(twin, 1) == [True]
    assert pickle.loads(pickle.dumps(config)) == config


def test_detector_from_openclaw_raises_unordered_thresholds_at_run_time(caplog: pytest.LogCaptureFixture) -> None:
    cfg = {"enabled": True, "warningThreshold": 5, "criticalThreshold": 4, "globalCircuitBreakerThreshold": 3}
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        detector = ToolLoopDetector.from_openclaw(cfg)
    assert [r.getMessage() for r in caplog.records] == RAISED
    assert detector.config.critical_threshold == 4
    assert _blocked_at(detector, 8) == [False] * 6 + [True, True]


def test_openclaws_configuration_is_told_by_doomloops_switches() -> None:
    # A config with doomloop's three switches off is OpenClaw's, however it was built; one
    # switch on makes it doomloop's, whose thresholds must be ordered.
    lenient = LoopDetectionConfig(warning_threshold=10, critical_threshold=5, **OPENCLAW_ONLY)
    assert lenient == LoopDetectionConfig.from_openclaw({"warningThreshold": 10, "criticalThreshold": 5}, strict=False).replace(
        enabled=True
    )
    with pytest.raises(ConfigError, match=r"critical_threshold: must be greater than warning_threshold \(10\), got 5"):
        lenient.replace(cycle=True)


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("warning_threshold", 0, ValueError),
        ("history_size", "30", TypeError),
        ("history_size", 10**6, ValueError),
        ("ping_pong", 1, TypeError),
        ("enabled", "yes", TypeError),
        ("post_compaction_window_size", 10**6, ValueError),
        ("warning_threshold", 2**31, ValueError),
        ("global_circuit_breaker_threshold", 2**64, ValueError),
    ],
)
def test_native_config_validation(field: str, value: Any, error: type) -> None:
    with pytest.raises(error, match=field):
        LoopDetectionConfig(**{field: value})


def test_to_openclaw_round_trips() -> None:
    config = LoopDetectionConfig(warning_threshold=4, critical_threshold=9, ping_pong=False, **OPENCLAW_ONLY)
    assert LoopDetectionConfig.from_openclaw(config.to_openclaw()) == config
    unset = LoopDetectionConfig(enabled=None, **OPENCLAW_ONLY)
    assert "enabled" not in unset.to_openclaw()
    assert LoopDetectionConfig.from_openclaw(unset.to_openclaw()) == unset


def test_detector_from_whole_config_and_agent() -> None:
    detector = ToolLoopDetector.from_openclaw(WHOLE, agent_id="Safe Runner")
    assert detector.config.critical_threshold == 16
    assert detector.config.generic_repeat is False


class _LyingInt(int):
    """An int whose conversions and comparisons lie: configs must read the value itself."""

    def __int__(self) -> int:
        return 0

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return False


def test_int_subclasses_are_read_by_their_value() -> None:
    big, small = _LyingInt(2**40), _LyingInt(-5)
    lenient = LoopDetectionConfig.from_openclaw({"globalCircuitBreakerThreshold": _LyingInt(MAX_THRESHOLD)}, strict=False)
    assert lenient.global_circuit_breaker_threshold == MAX_THRESHOLD and type(lenient.global_circuit_breaker_threshold) is int
    with pytest.raises(ConfigError, match="at most"):
        LoopDetectionConfig.from_openclaw({"warningThreshold": big})
    with pytest.raises(ValueError, match="must be <="):
        LoopDetectionConfig(warning_threshold=big)
    with pytest.raises(ValueError, match="must be >= 1"):
        LoopDetectionConfig(warning_threshold=small)
    assert LoopDetectionConfig(warning_threshold=_LyingInt(7)).warning_threshold == 7


def test_config_copies_pickles_and_compares_by_value() -> None:
    import copy
    import pickle

    config = LoopDetectionConfig(enabled=None, warning_threshold=4)
    for twin in (copy.copy(config), copy.deepcopy(config), pickle.loads(pickle.dumps(config))):
        assert twin == config and hash(twin) == hash(config)
    assert config != LoopDetectionConfig(warning_threshold=4)
    assert repr(config) == "LoopDetectionConfig(enabled=None, warning_threshold=4)"
    with pytest.raises(AttributeError, match="immutable"):
        config.history_size = 3  # type: ignore[misc]


DETECTION_OFF = (
    "loop-detection config: tools.loopDetection.enabled is not true, so no loop is detected"
    ' (OpenClaw\'s default); set "enabled": true in the block to turn detection on'
)


def _doomloop_messages(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.name == "doomloop" and r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    "build",
    [
        lambda cfg: ToolLoopDetector.from_openclaw(cfg),
        lambda cfg: LoopDetectionConfig.from_openclaw(cfg),
        lambda cfg: LoopDetectionConfig.from_openclaw(cfg, strict=False),
    ],
    ids=["detector", "config", "lenient config"],
)
@pytest.mark.parametrize("cfg", [None, {}, {"warningThreshold": 3}, {"tools": {"loopDetection": {"historySize": 50}}}])
def test_an_openclaw_config_without_enabled_logs_once_that_detection_is_off(
    caplog: pytest.LogCaptureFixture, build: Callable[[Any], object], cfg: Any
) -> None:
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        built = build(cfg)
    assert _doomloop_messages(caplog) == [DETECTION_OFF]
    if isinstance(built, ToolLoopDetector):
        caplog.clear()
        for _ in range(30):
            assert not built.before_tool_call("read", {"p": 1}).blocked  # what the warning says
        assert _doomloop_messages(caplog) == []  # once, at construction, not per call


@pytest.mark.parametrize("enabled", [True, False])
def test_an_openclaw_config_that_sets_enabled_logs_nothing(caplog: pytest.LogCaptureFixture, enabled: bool) -> None:
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        ToolLoopDetector.from_openclaw({"enabled": enabled})
        LoopDetectionConfig.from_openclaw({"tools": {"loopDetection": {"enabled": enabled}}})
    assert _doomloop_messages(caplog) == []


def test_lenient_parsing_logs_unknown_keys_of_detectors_and_the_guard(caplog: pytest.LogCaptureFixture) -> None:
    cfg = {"enabled": True, "detectors": {"pingPonk": False, "genericRepeat": False}, "postCompactionGuard": {"size": 9}}
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        config = LoopDetectionConfig.from_openclaw(cfg, strict=False)
    assert (config.ping_pong, config.generic_repeat, config.post_compaction_window_size) == (True, False, 3)
    assert _doomloop_messages(caplog) == [
        "loop-detection config: tools.loopDetection.detectors.pingPonk is not a known key; ignored",
        "loop-detection config: tools.loopDetection.postCompactionGuard.size is not a known key; ignored",
    ]
