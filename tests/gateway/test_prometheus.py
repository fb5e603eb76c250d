"""The Prometheus exporter: loop events counted by source, detector, level and blocked, session
registries' stats exposed at each scrape, and its arguments checked."""

from __future__ import annotations

import sys
import threading
from typing import Dict, List, Tuple

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from doomloop import ChantDetector, LoopEvent, ToolLoopDetector
from doomloop.integrations.prometheus import INSTALL_HINT, PrometheusExporter

Labels = Tuple[Tuple[str, str], ...]


def _exposition(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode("utf-8")


def _samples(registry: CollectorRegistry, name: str) -> Dict[Labels, float]:
    """The samples called ``name`` in the exposition text, by their sorted labels."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(_exposition(registry))
        for sample in family.samples
        if sample.name == name
    }


def _event_labels(source: str, detector: str, level: str, blocked: str) -> Labels:
    return tuple(sorted({"source": source, "detector": detector, "level": level, "blocked": blocked}.items()))


class StubSessions:
    """Stands in for a gateway SessionRegistry: only stats() is read."""

    def __init__(self, live: int = 0, created: int = 0, evicted: int = 0, expired: int = 0) -> None:
        self.counts = {"live": live, "created": created, "evicted": evicted, "expired": expired}
        self.calls = 0

    def stats(self) -> Dict[str, int]:
        self.calls += 1
        return dict(self.counts)


def test_events_are_counted_by_source_detector_level_and_blocked() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    for _ in range(3):
        exporter.on_event(LoopEvent("tool_loop", "generic_repeat", "warning", 10, "m", session_key="s1"))
    exporter.on_event(LoopEvent("tool_loop", "generic_repeat", "critical", 20, "m", blocked=True, session_key="s2"))
    exporter.on_event(LoopEvent("session", "repeated_action", "critical", 3, "m", session_key="s1", run_id="r"))

    text = _exposition(registry)
    assert "# TYPE doomloop_loop_events_total counter" in text
    # The exposition format sorts the labels by name.
    assert 'doomloop_loop_events_total{blocked="false",detector="generic_repeat",level="warning",source="tool_loop"} 3.0' in text
    assert 'doomloop_loop_events_total{blocked="true",detector="generic_repeat",level="critical",source="tool_loop"} 1.0' in text
    assert 'doomloop_loop_events_total{blocked="false",detector="repeated_action",level="critical",source="session"} 1.0' in text
    assert _samples(registry, "doomloop_loop_events_total") == {
        _event_labels("tool_loop", "generic_repeat", "warning", "false"): 3.0,
        _event_labels("tool_loop", "generic_repeat", "critical", "true"): 1.0,
        _event_labels("session", "repeated_action", "critical", "false"): 1.0,
    }
    # Session keys and run ids never become labels.
    assert "s1" not in text and "s2" not in text and "session_key" not in text and "run_id" not in text


def test_no_event_no_sample() -> None:
    registry = CollectorRegistry()
    PrometheusExporter(registry)
    assert _samples(registry, "doomloop_loop_events_total") == {}
    assert "# TYPE doomloop_loop_events_total counter" in _exposition(registry)


def test_a_blocked_tool_loop_is_counted_as_the_detector_reports_it() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    detector = ToolLoopDetector(on_event=exporter.on_event, session_key="sess-7")
    params = {"command": "ls"}
    for _ in range(40):
        decision = detector.before_tool_call("exec", params, run_id="run-1")
        result = decision.blocked_result if decision.blocked else "same"
        detector.after_tool_call("exec", params, result=result, run_id="run-1")

    stats = detector.get_stats()
    samples = _samples(registry, "doomloop_loop_events_total")
    # Calls 21..40 reach the critical threshold of 20 identical calls and are blocked.
    assert stats["blocks"] == 20
    assert samples[_event_labels("tool_loop", "generic_repeat", "critical", "true")] == 20.0
    blocked = sum(value for labels, value in samples.items() if ("blocked", "true") in labels)
    warnings = sum(value for labels, value in samples.items() if ("blocked", "false") in labels)
    assert blocked == stats["blocks"]
    assert warnings == stats["warnings"] > 0
    assert {dict(labels)["source"] for labels in samples} == {"tool_loop"}


def test_a_guard_abort_is_counted_as_blocked() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    detector = ToolLoopDetector(on_event=exporter.on_event)
    detector.arm_post_compaction()
    for _ in range(3):
        detector.before_tool_call("read", {"p": 1})
        detector.after_tool_call("read", {"p": 1}, result="same", run_id=None)
    samples = _samples(registry, "doomloop_loop_events_total")
    aborts = {labels: value for labels, value in samples.items() if ("detector", "compaction_loop_persisted") in labels}
    assert list(aborts.values()) == [1.0] and ("blocked", "true") in next(iter(aborts))


def test_a_chant_is_counted_once_as_the_detector_reports_it() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    detector = ChantDetector(on_event=exporter.on_event, session_key="sess-9")
    chant = "I will call the tool again. " * 40
    found = [detector.feed(chant[at : at + 30]) for at in range(0, len(chant), 30)]
    assert sum(event is not None for event in found) == 1
    detector.feed(chant)  # latched: nothing more to report
    assert _samples(registry, "doomloop_loop_events_total") == {_event_labels("chant", "chant", "critical", "false"): 1.0}


def test_watched_session_stats_are_read_at_each_scrape() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    sessions = StubSessions(live=3, created=10, evicted=2, expired=5)
    exporter.watch(sessions)

    text = _exposition(registry)
    assert "# TYPE doomloop_sessions_live gauge" in text
    assert "doomloop_sessions_live 3.0" in text
    assert "# TYPE doomloop_sessions_created_total counter" in text
    assert "doomloop_sessions_created_total 10.0" in text
    assert "doomloop_sessions_evicted_total 2.0" in text
    assert "doomloop_sessions_expired_total 5.0" in text

    sessions.counts.update(live=1, created=12, expired=8)
    assert _samples(registry, "doomloop_sessions_live") == {(): 1.0}
    assert _samples(registry, "doomloop_sessions_created_total") == {(): 12.0}
    assert _samples(registry, "doomloop_sessions_evicted_total") == {(): 2.0}
    assert _samples(registry, "doomloop_sessions_expired_total") == {(): 8.0}


def test_several_watched_registries_are_summed() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    exporter.watch(StubSessions(live=3, created=10, evicted=2, expired=5))
    exporter.watch(StubSessions(live=1, created=4, evicted=0, expired=1))
    assert _samples(registry, "doomloop_sessions_live") == {(): 4.0}
    assert _samples(registry, "doomloop_sessions_created_total") == {(): 14.0}
    assert _samples(registry, "doomloop_sessions_evicted_total") == {(): 2.0}
    assert _samples(registry, "doomloop_sessions_expired_total") == {(): 6.0}


def test_watching_the_same_registry_twice_is_refused() -> None:
    exporter = PrometheusExporter(CollectorRegistry())
    sessions = StubSessions(live=1)
    exporter.watch(sessions)
    with pytest.raises(ValueError, match="already watched"):
        exporter.watch(sessions)
    assert _samples(exporter.registry, "doomloop_sessions_live") == {(): 1.0}


def test_no_session_metrics_until_a_registry_is_watched() -> None:
    registry = CollectorRegistry()
    PrometheusExporter(registry)
    assert "doomloop_sessions" not in _exposition(registry)


def test_the_namespace_prefixes_every_metric() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry, namespace="gateway")
    exporter.on_event(LoopEvent("chant", "chant", "critical", 8, "m"))
    exporter.watch(StubSessions(live=2))
    text = _exposition(registry)
    assert 'gateway_loop_events_total{blocked="false",detector="chant",level="critical",source="chant"} 1.0' in text
    assert "gateway_sessions_live 2.0" in text
    assert "doomloop_" not in text


def test_two_exporters_in_one_registry_need_two_namespaces() -> None:
    registry = CollectorRegistry()
    PrometheusExporter(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        PrometheusExporter(registry)
    PrometheusExporter(registry, namespace="other")


def test_the_default_registry_is_prometheus_clients() -> None:
    import prometheus_client

    exporter = PrometheusExporter(namespace="doomloop_default_registry_test")
    try:
        assert exporter.registry is prometheus_client.REGISTRY
        exporter.on_event(LoopEvent("session", "no_progress", "critical", 4, "m"))
        assert "doomloop_default_registry_test_loop_events_total" in _exposition(prometheus_client.REGISTRY)
    finally:
        prometheus_client.REGISTRY.unregister(exporter._events)
        prometheus_client.REGISTRY.unregister(exporter._sessions)


def test_bad_arguments_raise_type_error() -> None:
    with pytest.raises(TypeError, match=r"registry must be a prometheus_client\.CollectorRegistry"):
        PrometheusExporter("default")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="namespace must be a str"):
        PrometheusExporter(CollectorRegistry(), namespace=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PrometheusExporter(CollectorRegistry(), "doomloop")  # type: ignore[call-arg]

    exporter = PrometheusExporter(CollectorRegistry())
    with pytest.raises(TypeError, match=r"doomloop\.LoopEvent"):
        exporter.on_event({"source": "tool_loop"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"stats\(\) method"):
        exporter.watch(object())  # type: ignore[arg-type]

    class NotAMapping:
        def stats(self) -> List[int]:
            return [1, 2, 3, 4]

    class MissingKey:
        def stats(self) -> Dict[str, int]:
            return {"live": 1, "created": 1, "evicted": 0}

    class NotAnInt:
        def stats(self) -> Dict[str, object]:
            return {"live": "1", "created": 1, "evicted": 0, "expired": 0}

    with pytest.raises(TypeError, match="must return a mapping"):
        exporter.watch(NotAMapping())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"stats\(\)\['expired'\] must be an int"):
        exporter.watch(MissingKey())
    with pytest.raises(TypeError, match=r"stats\(\)\['live'\] must be an int"):
        exporter.watch(NotAnInt())  # type: ignore[arg-type]
    # Nothing refused was watched.
    assert "doomloop_sessions" not in _exposition(exporter.registry)


def test_an_invalid_namespace_raises_value_error() -> None:
    for namespace in ("", "9lives", "has-dash", "with space"):
        with pytest.raises(ValueError, match="namespace"):
            PrometheusExporter(CollectorRegistry(), namespace=namespace)


def test_missing_prometheus_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # makes `import prometheus_client` fail
    with pytest.raises(ImportError) as error:
        PrometheusExporter()
    assert str(error.value) == (
        "the Prometheus exporter needs prometheus-client: "
        'pip install "prometheus-client>=0.20" (or, in a clone of doomloop: pip install ".[prometheus]")'
    )
    assert INSTALL_HINT in str(error.value)


def test_threads_lose_no_increment() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    event = LoopEvent("tool_loop", "ping_pong", "warning", 10, "m")

    def report() -> None:
        for _ in range(2000):
            exporter.on_event(event)

    threads = [threading.Thread(target=report) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {_event_labels("tool_loop", "ping_pong", "warning", "false"): 16000.0}
    assert _samples(registry, "doomloop_loop_events_total") == expected
