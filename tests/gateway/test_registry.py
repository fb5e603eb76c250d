"""SessionRegistry in one process: a Monitor per session created on first use, idle and LRU
eviction, thread safety, events with session keys, bad input."""

from __future__ import annotations

import gc
import inspect
import threading
import time
import weakref
from collections import Counter
from typing import Any, List

import pytest

from doomloop import (
    ChantConfig,
    ChantDetector,
    DoomLoopConfig,
    DoomLoopDetector,
    LoopDetectionConfig,
    LoopEvent,
    Monitor,
    Profile,
    ToolLoopDetector,
)
from doomloop._core import RegistryEngine, _monitor_parts, _pack_monitor
from doomloop.gateway import AsyncRedisStore, MemoryStore, SessionRegistry
from doomloop.monitor import _unpack
from support import FakeClock


def _repeat(registry: SessionRegistry, key: str, calls: int, *, run_id: str | None = None) -> List[bool]:
    blocked = []
    for _ in range(calls):
        decision = registry.before_tool_call(key, "exec", {"command": "ls"}, run_id=run_id)
        blocked.append(decision.blocked)
        result = decision.blocked_result if decision.blocked else "same"
        registry.after_tool_call(key, "exec", {"command": "ls"}, result=result, run_id=run_id)
    return blocked


def test_each_session_has_its_own_detectors_with_the_verdicts_of_a_bare_detector() -> None:
    registry = SessionRegistry()
    bare = ToolLoopDetector()
    expected = []
    for _ in range(25):
        decision = bare.before_tool_call("exec", {"command": "ls"})
        expected.append(decision.blocked)
        bare.after_tool_call("exec", {"command": "ls"}, result=decision.blocked_result if decision.blocked else "same")
    assert _repeat(registry, "a", 25) == expected
    # Another session is untouched by the first one's loop.
    assert _repeat(registry, "b", 1) == [False]
    assert len(registry) == 2
    assert registry.get("a").tool_loop.history_len == 20 and registry.get("b").tool_loop.history_len == 1
    assert registry.stats() == {"live": 2, "created": 2, "evicted": 0, "expired": 0}


def test_str_and_bytes_keys_name_one_session() -> None:
    registry = SessionRegistry()
    registry.before_tool_call("user-1", "read", {"p": 1})
    registry.before_tool_call(b"user-1", "read", {"p": 1})
    assert len(registry) == 1 and registry.get("user-1").tool_loop.history_len == 2


def test_idle_sessions_expire_after_the_ttl() -> None:
    clock = FakeClock(0.0)
    registry = SessionRegistry(ttl=60.0, clock=clock)
    registry.before_tool_call("old", "read", {"p": 1})
    clock.now += 30.0
    registry.before_tool_call("young", "read", {"p": 1})
    clock.now += 31.0
    assert "old" not in registry and "young" in registry
    registry.before_tool_call("new", "read", {"p": 1})  # a new session sweeps the idle ones
    assert len(registry) == 2 and registry.stats()["expired"] == 1
    # Coming back after the TTL starts afresh; a getter does not bring it back.
    clock.now += 61.0
    assert registry.get("young") is None
    registry.before_tool_call("young", "read", {"p": 1})
    assert registry.get("young").tool_loop.history_len == 1


def test_a_getter_never_creates_a_session() -> None:
    registry = SessionRegistry()
    assert registry.get("nobody") is None and "nobody" not in registry and registry.stats()["created"] == 0
    registry.record_action("somebody", "read", {"p": 1}, "ok", True)
    monitor = registry.get("somebody")
    assert isinstance(monitor, Monitor) and monitor.session_key == "somebody"
    assert monitor.doom_loop.get_stats()["total_actions"] == 1


def test_the_least_recently_used_session_is_evicted_past_the_maximum() -> None:
    registry = SessionRegistry(max_sessions=3)
    for key in "abc":
        registry.before_tool_call(key, "read", {"p": 1})
    registry.before_tool_call("a", "read", {"p": 2})  # a is now the most recently used
    registry.before_tool_call("d", "read", {"p": 1})
    assert "b" not in registry and {"a", "c", "d"} == {k for k in "abcd" if k in registry}
    assert registry.stats()["evicted"] == 1


def test_run_ids_keep_their_meaning_inside_a_session() -> None:
    registry = SessionRegistry(Profile.recommended().replace(warning_threshold=2, critical_threshold=3))
    assert _repeat(registry, "s", 3, run_id="r1") == [False] * 3
    assert _repeat(registry, "s", 1, run_id="r2") == [False]
    assert _repeat(registry, "s", 1, run_id="r1") == [True]


def test_events_carry_the_session_key() -> None:
    events: List[LoopEvent] = []
    registry = SessionRegistry(on_event=events.append)
    _repeat(registry, "tenant/42", 21, run_id="run-9")
    for _ in range(4):
        registry.record_action("tenant/42", "read", {"path": "a"}, "same", True)
    assert registry.is_doom_loop("tenant/42")
    blocked = [e for e in events if e.blocked]
    assert blocked and {(e.session_key, e.run_id) for e in blocked} == {("tenant/42", "run-9")}
    assert [e.detector for e in events if e.source == "session"] == ["repeated_action"]


def test_discard_and_streams() -> None:
    registry = SessionRegistry(Profile.recommended().replace(chant={"max_repeated_chunks": 4}))
    stream = registry.stream("s")
    assert registry.get("s").chant is stream and registry.stream("s") is not stream
    assert stream.config == ChantConfig(32, 4)
    registry.discard("s")
    assert "s" not in registry and len(registry) == 0
    registry.discard("never-seen")


def test_a_streams_chant_reaches_the_registrys_on_event_with_the_session_key() -> None:
    events: List[LoopEvent] = []
    registry = SessionRegistry(Profile.recommended().replace(chant={"max_repeated_chunks": 4}), on_event=events.append)
    stream = registry.stream(b"tenant/7")
    assert stream.feed("I will call the tool again. " * 40) is not None
    assert [(e.source, e.detector, e.count, e.session_key) for e in events] == [("chant", "chant", 4, "tenant/7")]


def test_streams_use_the_profiles_chant_settings() -> None:
    # The measured profile's window (32 x 6), not the detector's bare defaults (50 x 8).
    stream = SessionRegistry().stream("s")
    assert stream.config == ChantConfig(32, 6)
    parity = SessionRegistry(Profile.parity()).stream("s")
    assert parity.config == ChantConfig(50, 8)


def test_threads_sharing_a_registry_lose_no_call() -> None:
    registry = SessionRegistry(Profile.recommended().replace(history_size=10_000))

    def work(worker: int) -> None:
        for i in range(500):
            registry.before_tool_call(f"k{i % 7}", "read", {"worker": worker, "i": i})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(registry.get(f"k{k}").tool_loop.history_len for k in range(7)) == 2000
    assert registry.stats()["created"] == 7


class _Gateway:
    registry: SessionRegistry


def _registry_in_a_cycle() -> weakref.ref[SessionRegistry]:
    gateway = _Gateway()
    gateway.registry = SessionRegistry(on_event=lambda event: gateway.registry.stats())
    gateway.registry.before_tool_call("s", "read", {"p": 1})
    return weakref.ref(gateway.registry)


def test_a_registry_in_a_reference_cycle_is_collected() -> None:
    # The registry holds its sessions in Rust: the collector must still see through them
    # (registry -> session -> detector -> on_event -> the gateway holding the registry).
    gone = _registry_in_a_cycle()
    gc.collect()
    assert gone() is None


def test_a_clock_that_is_not_a_number_is_refused() -> None:
    registry = SessionRegistry(clock=lambda: "soon")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="clock"):
        registry.before_tool_call("s", "read", {})
    with pytest.raises(TypeError, match="clock"):
        SessionRegistry(clock=5)  # type: ignore[arg-type]


def test_bad_input_is_refused_clearly() -> None:
    registry = SessionRegistry()
    with pytest.raises(ValueError, match="1024"):
        registry.before_tool_call("x" * 2000, "read", {})
    with pytest.raises(TypeError, match="str or bytes"):
        registry.before_tool_call(7, "read", {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="profile"):
        SessionRegistry(LoopDetectionConfig())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_sessions"):
        SessionRegistry(max_sessions=0)
    with pytest.raises(ValueError, match="ttl"):
        SessionRegistry(ttl=-1)
    with pytest.raises(TypeError, match="on_event"):
        SessionRegistry(on_event=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown option"):
        SessionRegistry(tool_aliasez={})
    with pytest.raises(TypeError, match="bogus"):
        Profile.recommended().replace(chant={"bogus": 1})
    assert SessionRegistry(Profile.parity()).profile.session == DoomLoopConfig()


def test_the_hook_list_is_written_once() -> None:
    # HOOKS is the list; the sync registry, the asyncio registry and the Rust engine's fast
    # path (the tool-call hooks) must offer exactly it, each taking the session key first.
    from doomloop.gateway import HOOKS, AsyncSessionRegistry

    # Besides the hooks: the lookups, the stream and the counters, none of them hooks on a monitor.
    not_hooks = {"get", "discard", "stream", "stats"}
    for registry in (SessionRegistry, AsyncSessionRegistry):
        public = {name for name in dir(registry) if not name.startswith("_") and inspect.isroutine(getattr(registry, name))}
        assert public - not_hooks == set(HOOKS), registry.__name__
        for name in HOOKS:
            signature = inspect.signature(getattr(registry, name))
            assert list(signature.parameters)[:2] == ["self", "key"], (registry.__name__, name)
    assert all(inspect.iscoroutinefunction(getattr(AsyncSessionRegistry, name)) for name in HOOKS)
    fast = {name for name in ("before_tool_call", "after_tool_call") if name in vars(RegistryEngine)}
    assert fast == set(HOOKS[:2])


@pytest.mark.parametrize("store", [None, MemoryStore()], ids=["no store", "memory store"])
def test_an_empty_session_key_is_refused_with_or_without_a_store(store: MemoryStore | None) -> None:
    registry = SessionRegistry(store=store)
    hooks = [
        lambda key: registry.before_tool_call(key, "read", {}),
        lambda key: registry.after_tool_call(key, "read", {}, result="ok"),
        lambda key: registry.record_action(key, "read", {}, "ok", True),
        lambda key: registry.mark_progress(key, "m"),
        lambda key: registry.record_response(key, "text"),
        lambda key: registry.is_doom_loop(key),
        lambda key: registry.arm_post_compaction(key),
        registry.stream,
        registry.get,
        registry.discard,
    ]
    for hook in hooks:
        for key in ("", b""):
            with pytest.raises(ValueError, match="a session key must not be empty"):
                hook(key)
    assert len(registry) == 0 and registry.stats()["created"] == 0
    registry.before_tool_call("a", "read", {})  # the shortest key there is
    assert "a" in registry


def test_the_engine_is_built_whole_by_its_constructor() -> None:
    # No half-built table: the settings are the constructor's, required, and there is no
    # later configuration step.
    with pytest.raises(TypeError, match="ttl"):
        RegistryEngine()  # type: ignore[call-arg]
    assert not hasattr(RegistryEngine, "_configure")
    registry = SessionRegistry(ttl=5.0, max_sessions=7)
    assert (registry.ttl, registry.max_sessions) == (5.0, 7)
    # A key too long for the engine's own check goes through the normaliser it was built with.
    registry.before_tool_call("é" * 300, "read", {})
    assert registry.get("é" * 300).tool_loop.history_len == 1


def test_an_asyncio_store_is_refused_at_construction() -> None:
    # Its update() is a coroutine no hook would await: refused here, naming the registry it needs.
    with pytest.raises(TypeError, match="got AsyncRedisStore: an asyncio store needs AsyncSessionRegistry"):
        SessionRegistry(store=AsyncRedisStore("redis://127.0.0.1:1"))  # type: ignore[arg-type]


class _Counting(Monitor):
    """A monitor with state of its own, as an integration keeps: it travels in the snapshot."""

    __slots__ = ("messages",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.messages = 0

    def _extra_state(self) -> Any:
        return {"messages": self.messages}

    def _restore_extra(self, extra: Any) -> None:
        self.messages = int(extra["messages"])


@pytest.mark.parametrize("store", [None, MemoryStore()], ids=["no store", "memory store"])
def test_sessions_may_be_a_monitor_subclass_with_state_of_its_own(store: MemoryStore | None) -> None:
    registry = SessionRegistry(store=store, monitor_class=_Counting)
    other = SessionRegistry(store=store, monitor_class=_Counting)  # a second replica on the same store

    def count(monitor: Monitor) -> int:
        assert isinstance(monitor, _Counting)
        monitor.messages += 1
        return monitor.messages

    assert [registry.apply("s", count) for _ in range(3)] == [1, 2, 3]
    if store is not None:
        assert other.apply("s", count) == 4 and registry.apply("s", count) == 5
    with pytest.raises(TypeError, match="monitor_class"):
        SessionRegistry(monitor_class=dict)  # type: ignore[arg-type]


def _same_state(blob: bytes, monitor: Monitor) -> bool:
    # The blob holds the monitor's state: the same header, tool-loop and chant parts, and a
    # session part with the same state (its snapshot reads the clock, so its bytes move on).
    header, tool, session, chant = _unpack(blob)
    now = _unpack(monitor.to_bytes())

    def stats(data: bytes) -> dict[str, Any]:
        found = DoomLoopDetector.from_bytes(data).get_stats()
        return {key: value for key, value in found.items() if key != "elapsed_time"}

    return (header, tool, chant) == (now[0], now[1], now[3]) and stats(session) == stats(now[2])


def test_a_stored_blob_is_always_the_whole_monitors_state() -> None:
    # A detector's own hook reuses the last snapshot's header; the blob stored must still hold
    # the monitor's whole state, a stream's chant (fed outside any hook) included.
    store = MemoryStore()
    registry = SessionRegistry(store=store)
    entry = registry._session("s")
    for n in range(12):
        if n == 3:
            # A chanting answer through the monitor: its header says the answer was reported.
            registry.apply("s", lambda monitor: monitor.record_response("the same line again. " * 40))
            assert entry._answered
        if n == 5:
            registry.apply("s", lambda monitor: monitor.record_user_message("try again"))
            # A stream starts, and is fed, outside any hook: the next hook's blob carries both.
            registry.stream("s").feed("the same line again. " * 30)
        registry.before_tool_call("s", "read", {"path": f"f{n % 3}"})
        registry.after_tool_call("s", "read", {"path": f"f{n % 3}"}, result="same")
        if n % 4 == 0:
            registry.record_action("s", "read", {"path": "f"}, "same", True)
            registry.is_doom_loop("s")
        stored = store.load("s")
        assert stored is not None and stored.data == entry._saved and _same_state(stored.data, entry), n
    assert entry.turn == 1 and entry.chant is not None
    # Another writer's blob is restored whole, and the next hook starts from it.
    other = Monitor(registry.profile)
    other.before_tool_call("read", {"path": "elsewhere"})
    current = store.load("s")
    assert current is not None and store.compare_and_set("s", current.version, other.to_bytes(), 60) is not None
    registry.after_tool_call("s", "read", {"path": "elsewhere"}, result="r")
    stored = store.load("s")
    assert stored is not None and _same_state(stored.data, entry)
    assert (entry.step, entry.turn, entry.chant) == (other.step, 0, None)


def _replicas_take_turns(store: MemoryStore) -> tuple[list[Any], bytes]:
    # Two replicas on one store serve one session in turns of five calls, so each turn's
    # first hook restores what the other wrote; a user message (the monitor's own state) and
    # a stream fed outside any hook come in between. Every call is a tool call and, every
    # other call, the session detector's hooks too. What the hooks returned, and the blob.
    replicas = [SessionRegistry(store=store), SessionRegistry(store=store)]
    seen: list[Any] = []
    for n in range(60):
        registry = replicas[(n // 5) % 2]
        if n == 22:
            registry.apply("s", lambda monitor: monitor.record_user_message("try again"))
        if n == 31:
            registry.stream("s").feed("the same line again. " * 30)
        params = {"path": f"f{n % 4}", "n": n // 12} if n < 30 else {"path": "same"}
        decision = registry.before_tool_call("s", "read", params, tool_call_id=f"c{n}")
        seen.append((decision.blocked, decision.emit_warning, decision.verdict.to_dict()))
        result = decision.blocked_result if decision.blocked else f"body {n % 3 if n < 30 else 0}"
        outcome = registry.after_tool_call("s", "read", params, result=result, tool_call_id=f"c{n}")
        seen.append((outcome.args_hash, outcome.result_hash, outcome.is_error, outcome.guard))
        if n % 2:
            registry.record_action("s", "read", params, result, n % 7 != 0, 0.5 if n % 3 else None, {"n": n})
            if n % 10 == 1:
                registry.mark_progress("s", f"milestone {n}")
            if n % 6 == 1:
                registry.record_response("s", "Let me read that file again. " * (1 + n % 3))
            seen.append(registry.is_doom_loop("s"))
    stored = store.load("s")
    assert stored is not None
    return seen, stored.data


def test_a_detector_hooks_one_extension_call_stores_what_the_python_path_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    # A detector's own hook's update restores, decides and snapshots in one extension call
    # when only detectors' state changed; elsewhere the Python path runs. Both must store the
    # same state and answer the same, replica by replica, call by call.
    taken: dict[str, Counter[str]] = {"unchanged": Counter(), "restored": Counter(), "python": Counter()}
    hook_update = Monitor._hook_update

    def counted(monitor: Monitor, data: bytes, saved: bytes | None, header: bytes, chant: Any, hook: str, args: Any) -> Any:
        done = hook_update(monitor, data, saved, header, chant, hook, args)
        taken["python" if done is None else "unchanged" if data == saved else "restored"][hook] += 1
        return done

    monkeypatch.setattr(Monitor, "_hook_update", counted)
    fast, fast_blob = _replicas_take_turns(MemoryStore())
    # Most updates take one call, the restores after each change of replica included; the
    # call hands over to the Python path when the other replica's user message changed the
    # header, and when its stream changed the chant part (a replica's first hook, and its
    # first after a stream of its own, go to the Python path without asking).
    assert sum(taken["unchanged"].values()) >= 150 and sum(taken["python"].values()) == 2, taken
    # Every hook took the one call, on this process's own blob and on the other replica's.
    hooks = {"before_tool_call", "after_tool_call", "record_action", "mark_progress", "record_response", "is_doom_loop"}
    assert set(taken["unchanged"]) == hooks and {"before_tool_call"} <= set(taken["restored"]), taken
    monkeypatch.setattr(Monitor, "_hook_update", lambda *args: None)
    slow, slow_blob = _replicas_take_turns(MemoryStore())
    assert fast == slow
    decisions = [seen for seen in fast if isinstance(seen, tuple) and len(seen) == 3]
    assert any(blocked for blocked, _, _ in decisions) and any(warned for _, warned, _ in decisions)
    loops = [seen for seen in fast if isinstance(seen, bool)]
    assert True in loops and False in loops
    # The same state. The session part's bytes hold the clock and the chant's its stream's
    # random hash key: their states are compared.
    fast_parts, slow_parts = _unpack(fast_blob), _unpack(slow_blob)
    assert (fast_parts[0], fast_parts[1]) == (slow_parts[0], slow_parts[1])
    fast_chant, slow_chant = ChantDetector.from_bytes(fast_parts[3]), ChantDetector.from_bytes(slow_parts[3])
    assert fast_chant.event is not None and slow_chant.event is not None  # the stream's chant travels too
    # Where a chant is caught depends on the key (its anchors are sampled by hash).
    assert {key: value for key, value in fast_chant.event.to_dict().items() if key not in ("end", "window")} == {
        key: value for key, value in slow_chant.event.to_dict().items() if key not in ("end", "window")
    }

    def stats(data: bytes) -> dict[str, Any]:
        found = DoomLoopDetector.from_bytes(data).get_stats()
        return {key: value for key, value in found.items() if key != "elapsed_time"}

    assert stats(fast_parts[2]) == stats(slow_parts[2])
    assert stats(fast_parts[2])["progress_markers"] > 0 and stats(fast_parts[2])["failed_actions"] > 0


def test_a_detector_hooks_update_checks_its_hook_and_arguments() -> None:
    monitor = Monitor()
    blob = monitor.to_bytes()
    header = _monitor_parts(blob)[0]
    with pytest.raises(ValueError, match="no detector hook named record_plan"):
        monitor._hook_update(blob, blob, header, None, "record_plan", ("s",))
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        monitor._hook_update(blob, blob, header, None, "mark_progress", ("a", "b"))
    # The hook's own check of its argument, after the update's.
    with pytest.raises(TypeError, match="marker must be a str"):
        monitor._hook_update(blob, blob, header, None, "mark_progress", (3,))
    # Bytes that are not a Monitor snapshot are the Python path's to report.
    assert monitor._hook_update(b"not a blob", blob, header, None, "is_doom_loop", ()) is None


def test_the_detector_a_hook_left_alone_keeps_its_bytes_and_its_clock_moves_on() -> None:
    # A tool hook writes the tool-loop part anew and keeps the session part but for its
    # clock; a session hook keeps the tool-loop part's bytes as they were.
    store = MemoryStore()
    registry = SessionRegistry(store=store)
    registry.before_tool_call("s", "read", {"path": "a"})
    registry.record_action("s", "read", {"path": "a"}, "ok", True)

    def parts() -> list[bytes]:
        stored = store.load("s")
        assert stored is not None
        return list(_monitor_parts(stored.data))

    def elapsed(part: bytes) -> float:
        return float(DoomLoopDetector.from_bytes(part).get_stats()["elapsed_time"])

    before = parts()
    time.sleep(0.05)
    registry.after_tool_call("s", "read", {"path": "a"}, result="ok")
    after = parts()
    assert after[1] != before[1]  # the tool-loop detector changed
    assert after[2] != before[2] and len(after[2]) == len(before[2])
    assert elapsed(after[2]) >= elapsed(before[2]) + 0.05  # the clock moved on, nothing else
    session_stats = DoomLoopDetector.from_bytes(after[2]).get_stats()
    assert session_stats["total_actions"] == 1
    registry.record_action("s", "read", {"path": "b"}, "ok", True)
    last = parts()
    assert last[1] == after[1] and last[2] != after[2]
    assert DoomLoopDetector.from_bytes(last[2]).get_stats()["total_actions"] == 2
    # Another replica restores the kept bytes to the same state.
    other = SessionRegistry(store=store)
    assert other.get("s") is not None and other.get("s").tool_loop.get_stats() == registry.get("s").tool_loop.get_stats()


def test_a_damaged_detector_part_under_an_unchanged_header_is_the_python_paths_to_report(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The header matches, so the one extension call would restore; the tool-loop part is
    # damaged, so it leaves the update, untouched, to the Python path, which logs the blob and
    # starts the session afresh.
    store = MemoryStore()
    registry = SessionRegistry(store=store)
    entry = registry._session("s")
    for n in range(3):
        registry.before_tool_call("s", "read", {"path": f"f{n}"})
    current = store.load("s")
    assert current is not None
    header, tool, session, chant = _monitor_parts(current.data)
    damaged = _pack_monitor(header, tool[:-1] + bytes([tool[-1] ^ 1]), session, chant)
    assert store.compare_and_set("s", current.version, damaged, 60) is not None
    with caplog.at_level("WARNING", logger="doomloop"):
        registry.before_tool_call("s", "read", {"path": "g"})
    assert "cannot be read" in caplog.text
    assert entry.tool_loop.get_stats()["calls"] == 1  # afresh, then the call


class _BytearrayStore(MemoryStore):
    """A store of its own that hands its updates a bytearray."""

    def update(self, key: Any, fn: Any, ttl_seconds: float) -> bytes:
        return super().update(key, lambda data: fn(None if data is None else bytearray(data)), ttl_seconds)


def test_a_store_handing_over_other_bytes_like_blobs_takes_the_python_path() -> None:
    store = _BytearrayStore()
    registry = SessionRegistry(store=store)
    blocked = _repeat(registry, "s", 25)
    assert blocked == [False] * 20 + [True] * 5


def test_a_blob_of_other_settings_is_restored_with_its_own_settings() -> None:
    # Detectors are restored in place when the blob has their settings; a replica running
    # other settings gets detectors built from the blob's, as from_bytes builds them.
    store = MemoryStore()
    registry = SessionRegistry(store=store)
    entry = registry._session("s")
    registry.before_tool_call("s", "read", {"path": "a"})
    other = Monitor(Profile.recommended().replace(tool_loop=LoopDetectionConfig(warning_threshold=4)))
    other.before_tool_call("read", {"path": "b"})
    current = store.load("s")
    assert current is not None and store.compare_and_set("s", current.version, other.to_bytes(), 60) is not None
    tool_loop = entry.tool_loop
    registry.after_tool_call("s", "read", {"path": "b"}, result="r")
    assert entry.tool_loop is not tool_loop and entry.tool_loop.config.warning_threshold == 4
    # The same settings again: restored in place.
    same = Monitor(other.profile)
    current = store.load("s")
    assert current is not None and store.compare_and_set("s", current.version, same.to_bytes(), 60) is not None
    tool_loop = entry.tool_loop
    registry.before_tool_call("s", "read", {"path": "c"})
    assert entry.tool_loop is tool_loop and entry.tool_loop.get_stats()["calls"] == 1
