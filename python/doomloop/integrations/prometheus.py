"""Prometheus metrics for loop events and gateway sessions.

Needs prometheus-client: ``pip install "prometheus-client>=0.20"``, or the ``prometheus``
extra from a clone (``pip install ".[prometheus]"``). It is imported when an exporter is
made, not when this module is.

Metrics (``doomloop`` is the default namespace):

- ``doomloop_loop_events_total{source, detector, level, blocked}``: a counter of the events a
  detector reported to :meth:`PrometheusExporter.on_event`. ``blocked`` is ``"true"`` or
  ``"false"``.
- ``doomloop_sessions_live``: a gauge, and ``doomloop_sessions_created_total``,
  ``doomloop_sessions_evicted_total``, ``doomloop_sessions_expired_total``: counters, read from
  the ``stats()`` of the session registries passed to :meth:`PrometheusExporter.watch` (summed
  when there are several) at each scrape; absent until one is watched.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Iterable, List, Mapping, Optional, Protocol

from .._extras import install_hint
from ..events import LoopEvent

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector as _CollectorBase
else:
    # prometheus-client is optional: the collector only has to quack like one at run time.
    _CollectorBase = object

__all__ = ["INSTALL_HINT", "PrometheusExporter", "SessionStats"]

INSTALL_HINT = install_hint("prometheus")
"""How to get prometheus-client; named in the ImportError when it is missing."""

# The keys of a session registry's stats() and whether each is a gauge (else a counter).
_SESSION_STATS = {"live": True, "created": False, "evicted": False, "expired": False}
_SESSION_HELP = {
    "live": "Sessions held by the watched session registries.",
    "created": "Sessions created by the watched session registries.",
    "evicted": "Sessions evicted from the watched session registries to stay within their capacity.",
    "expired": "Sessions removed from the watched session registries after their idle timeout.",
}
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


class SessionStats(Protocol):
    """What :meth:`PrometheusExporter.watch` reads: a ``doomloop.gateway.SessionRegistry``, or
    anything else whose ``stats()`` maps ``"live"``, ``"created"``, ``"evicted"`` and
    ``"expired"`` to integers."""

    def stats(self) -> Mapping[str, int]: ...


class PrometheusExporter:
    """Counts loop events and exposes session registries' stats as Prometheus metrics.

    Pass ``on_event=exporter.on_event`` to any detector or session registry, and
    ``exporter.watch(session_registry)`` to export a registry's sessions. Serve the metrics the
    usual prometheus-client way (``prometheus_client.start_http_server(port)``, or
    ``generate_latest(exporter.registry)``).

    Session keys and run ids are never labels: there is one per session, so they would create a
    time series per session without bound. The labels (source, detector, level, blocked) take
    a few dozen values in all; the logs carry the session key of each event.

    Thread-safe: prometheus-client metrics are, and the list of watched registries is guarded
    by a lock; ``on_event`` may be called from any number of threads at once.

    Args:
        registry: where the metrics are registered; prometheus-client's default ``REGISTRY``
            when None. One exporter per namespace and registry: a second one raises
            prometheus-client's ``ValueError`` (duplicated time series).
        namespace: the prefix of every metric name.

    Raises:
        ImportError: prometheus-client is not installed (the message says how to install it).
        TypeError: ``registry`` is not a ``CollectorRegistry`` or ``namespace`` not a string.
        ValueError: ``namespace`` is not a valid metric name prefix.
    """

    __slots__ = ("_registry", "_events", "_sessions")

    def __init__(self, registry: Optional[CollectorRegistry] = None, *, namespace: str = "doomloop") -> None:
        try:
            # Imported here: prometheus-client is an optional extra.
            import prometheus_client
        except ImportError as error:
            raise ImportError(f"the Prometheus exporter needs prometheus-client: {INSTALL_HINT}") from error

        if registry is None:
            registry = prometheus_client.REGISTRY
        elif not isinstance(registry, prometheus_client.CollectorRegistry):
            raise TypeError(f"registry must be a prometheus_client.CollectorRegistry or None, got {type(registry).__name__}")
        if not isinstance(namespace, str):
            raise TypeError(f"namespace must be a str, got {type(namespace).__name__}")
        if not _METRIC_NAME.fullmatch(namespace):
            raise ValueError(f"namespace must be a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), got {namespace!r}")

        self._registry = registry
        self._events: Counter = prometheus_client.Counter(
            "loop_events",
            "Loop events reported by doomloop detectors: warnings, blocked calls, guard aborts, loop episodes, chants.",
            labelnames=("source", "detector", "level", "blocked"),
            namespace=namespace,
            registry=registry,
        )
        self._sessions = _SessionsCollector(namespace)
        registry.register(self._sessions)

    @property
    def registry(self) -> CollectorRegistry:
        """The registry the metrics are registered in."""
        return self._registry

    def on_event(self, event: LoopEvent) -> None:
        """Count ``event``: the ``on_event`` callback of a detector or session registry.

        Raises:
            TypeError: ``event`` is not a :class:`~doomloop.LoopEvent`.
        """
        if not isinstance(event, LoopEvent):
            raise TypeError(f"on_event expects a doomloop.LoopEvent, got {type(event).__name__}")
        blocked = "true" if event.blocked else "false"
        self._events.labels(event.source, event.detector, event.level, blocked).inc()

    def watch(self, session_registry: SessionStats) -> None:
        """Export ``session_registry.stats()`` at every scrape, added to those already watched.

        ``stats()`` is called once here to check its shape, then on every scrape (from the
        scraping thread).

        Raises:
            TypeError: ``session_registry`` has no ``stats()`` method, or its ``stats()`` does
                not map each of ``live``, ``created``, ``evicted`` and ``expired`` to an int.
            ValueError: ``session_registry`` is already watched (it would count twice).
        """
        stats = getattr(session_registry, "stats", None)
        if not callable(stats):
            raise TypeError(f"watch expects an object with a stats() method, got {type(session_registry).__name__}")
        _check_stats(stats())
        self._sessions.add(session_registry)


def _check_stats(stats: object) -> None:
    if not isinstance(stats, Mapping):
        raise TypeError(f"stats() must return a mapping, got {type(stats).__name__}")
    for key in _SESSION_STATS:
        value = stats.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"stats()[{key!r}] must be an int, got {type(value).__name__}")


class _SessionsCollector(_CollectorBase):
    """The session metrics, summed over the watched registries, read at each scrape."""

    def __init__(self, namespace: str) -> None:
        self._names = {key: f"{namespace}_sessions_{key}" for key in _SESSION_STATS}
        self._watched: List[SessionStats] = []
        self._lock = threading.Lock()

    def add(self, session_registry: SessionStats) -> None:
        with self._lock:
            if any(watched is session_registry for watched in self._watched):
                raise ValueError("this session registry is already watched by this exporter")
            self._watched.append(session_registry)

    def describe(self) -> Iterable[Metric]:
        # Lets the registry check the names for clashes without reading any stats.
        return self._families(None)

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            watched = list(self._watched)
        if not watched:
            # No sessions to speak of: a zero gauge would claim an empty gateway.
            return []
        totals = dict.fromkeys(_SESSION_STATS, 0)
        # stats() is called outside the lock: a slow registry never holds up watch().
        for session_registry in watched:
            stats = session_registry.stats()
            for key in totals:
                totals[key] += stats[key]
        return self._families(totals)

    def _families(self, totals: Optional[Mapping[str, int]]) -> List[Metric]:
        from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily

        families: List[Metric] = []
        for key, is_gauge in _SESSION_STATS.items():
            family = GaugeMetricFamily if is_gauge else CounterMetricFamily
            value = None if totals is None else totals[key]
            families.append(family(self._names[key], _SESSION_HELP[key], value=value))
        return families
