"""Unit tests of ToolLoopDetector: each detector, result normalisation, the guard, warning
emission, extension points, thread safety and bad input."""

from __future__ import annotations

import logging
import math
import sys
import threading
from typing import Any, Dict, List, Optional

import pytest

import doomloop
from doomloop import (
    CompactionLoopPersisted,
    GuardVerdict,
    LoopDetectionConfig,
    PostCompactionGuard,
    ToolLoopDetector,
    ToolOutcome,
    tool_result_hash,
)
from support import shared_argument_dicts


def text_result(text: str, details: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details if details is not None else {}}


def run(
    detector: ToolLoopDetector,
    tool: str,
    params: Dict[str, Any],
    result: Any = None,
    *,
    error: Any = None,
    run_id: Optional[str] = None,
) -> Any:
    """One wired call; returns the decision."""
    decision = detector.before_tool_call(tool, params, run_id=run_id)
    if decision.blocked:
        detector.after_tool_call(tool, params, result=decision.blocked_result, run_id=run_id)
    else:
        detector.after_tool_call(tool, params, result=result, error=error, run_id=run_id)
    return decision


def guard_of(outcome: ToolOutcome) -> GuardVerdict:
    assert outcome.guard is not None
    return outcome.guard


def small(**options: Any) -> ToolLoopDetector:
    return ToolLoopDetector(warning_threshold=3, critical_threshold=5, global_circuit_breaker_threshold=8, **options)


# --- detectors --------------------------------------------------------------------------


def test_generic_repeat_warns_then_blocks_and_stays_blocked() -> None:
    detector = small()
    seen = [run(detector, "read", {"path": "a"}, text_result("same")) for _ in range(8)]
    levels = [(d.verdict.level, d.verdict.count, d.blocked) for d in seen]
    assert levels == [
        (None, 0, False),
        (None, 0, False),
        (None, 0, False),
        ("warning", 3, False),
        ("warning", 4, False),
        ("critical", 5, True),
        ("critical", 5, True),
        ("critical", 5, True),
    ]
    assert seen[3].verdict.detector == "generic_repeat"
    # Vetoes are not recorded: five calls in the history.
    assert detector.history_len == 5


def test_blocked_result_is_shaped_like_openclaws_veto() -> None:
    detector = small()
    decision = None
    for _ in range(6):
        decision = run(detector, "read", {"path": "a"}, text_result("same"))
    assert decision is not None and decision.blocked
    message = decision.verdict.message
    assert decision.blocked_result == {
        "content": [{"type": "text", "text": message}],
        "details": {"status": "blocked", "deniedReason": "tool-loop", "reason": message},
    }
    assert "read" in message and "5" in message


def test_progress_keeps_generic_repeat_at_warning() -> None:
    detector = small()
    for i in range(10):
        decision = run(detector, "read", {"path": "a"}, text_result(f"v{i}"))
        assert not decision.blocked
    assert detector.check("read", {"path": "a"}).level == "warning"


def test_check_has_no_side_effects() -> None:
    detector = small()
    for _ in range(4):
        run(detector, "read", {"path": "a"}, text_result("x"))
    before = detector.history_len
    first = detector.check("read", {"path": "a"})
    second = detector.check("read", {"path": "a"})
    assert (first.level, first.count) == (second.level, second.count) == ("warning", 4)
    assert detector.history_len == before


def test_known_poll_tools() -> None:
    detector = small()
    poll = {"action": "poll", "sessionId": "s1"}
    result = text_result("(no new output)", {"status": "running", "aggregated": "x"})
    verdicts = [run(detector, "process", poll, result).verdict for _ in range(6)]
    assert [(v.detector, v.level) for v in verdicts[3:]] == [
        ("known_poll_no_progress", "warning"),
        ("known_poll_no_progress", "warning"),
        ("known_poll_no_progress", "critical"),
    ]
    # A process call that is not a poll is a generic repeat.
    other = small()
    verdicts = [run(other, "process", {"action": "kill"}, text_result("ok")).verdict for _ in range(4)]
    assert verdicts[3].detector == "generic_repeat"
    # Extra known-poll tools.
    custom = small(known_poll_tools={"job_status"})
    verdicts = [run(custom, "job_status", {"id": 1}, text_result("running")).verdict for _ in range(4)]
    assert verdicts[3].detector == "known_poll_no_progress"


def test_command_status_is_a_known_poll() -> None:
    detector = small()
    verdicts = [run(detector, "command_status", {"id": "j"}, text_result("running")).verdict for _ in range(4)]
    assert verdicts[3].detector == "known_poll_no_progress"


def test_ping_pong_warning_critical_and_pairing() -> None:
    detector = ToolLoopDetector(warning_threshold=4, critical_threshold=7, global_circuit_breaker_threshold=30)
    calls = [("read", {"path": "a"}, text_result("A")), ("list", {"dir": "/"}, text_result("B"))] * 4
    verdicts = [run(detector, *call).verdict for call in calls]
    assert [v.count for v in verdicts] == [0, 0, 0, 4, 5, 6, 7, 0]
    assert [v.level for v in verdicts[3:]] == ["warning", "warning", "warning", "critical", None]
    # The blocked read was not recorded, so calling list again repeats the newest call.
    assert verdicts[3].paired_tool_name == "read"  # calling list, the newest record is read
    assert verdicts[4].paired_tool_name == "list"
    assert verdicts[6].detector == "ping_pong"
    # Either side of the pair has the same warning key.
    assert verdicts[3].warning_key == verdicts[4].warning_key


def test_ping_pong_with_progress_never_blocks() -> None:
    detector = ToolLoopDetector(warning_threshold=4, critical_threshold=6, global_circuit_breaker_threshold=30)
    for i in range(10):
        decision = run(detector, "read", {"path": "a"}, text_result(f"A{i}"))
        assert not decision.blocked
        decision = run(detector, "list", {"dir": "/"}, text_result("B"))
        assert not decision.blocked
    assert detector.check("read", {"path": "a"}).detector == "ping_pong"


def test_unknown_tool_repeat() -> None:
    detector = ToolLoopDetector(unknown_tool_threshold=3)
    texts = ["Unknown tool: browser", "tool 'browser' is not available", "Tool browser not found"]
    for i, text in enumerate(texts):
        assert not run(detector, "browser", {"url": i}, error=RuntimeError(text)).blocked
    decision = run(detector, "browser", {"url": 9}, error=RuntimeError("Unknown tool: browser"))
    assert decision.blocked
    assert (decision.verdict.detector, decision.verdict.count) == ("unknown_tool_repeat", 3)
    assert decision.verdict.warning_key == "unknown-tool:browser:browser"


def test_a_success_breaks_the_unknown_tool_run() -> None:
    detector = ToolLoopDetector(unknown_tool_threshold=2)
    run(detector, "browser", {"u": 1}, error="Unknown tool: browser")
    run(detector, "browser", {"u": 2}, text_result("fine"))
    assert not run(detector, "browser", {"u": 3}, error="Unknown tool: browser").blocked


@pytest.mark.parametrize(
    "text, name",
    [
        ("Unknown tool: browser", "browser"),
        ("unknown tool   'Web.Fetch-2'", "web.fetch-2"),
        ('UNKNOWN TOOL:"x_y"', "x_y"),
        ("tool 'deploy' is not available", "deploy"),
        ("Tool Deploy not found", "deploy"),
        ('error: tool "a.b" is not available here', "a.b"),
        ("tools deploy not found", None),
        ("Unknown toolbox: x", None),
        ("tool deploy was not found", None),
        ("boom", None),
    ],
)
def test_unknown_tool_name_extraction(text: str, name: Optional[str]) -> None:
    outcome = ToolLoopDetector().record_outcome("t", {}, error=text)
    assert outcome.unknown_tool_name == name
    assert outcome.is_error


def test_global_breaker_is_not_gated_by_detectors() -> None:
    detector = ToolLoopDetector(
        warning_threshold=2,
        critical_threshold=3,
        global_circuit_breaker_threshold=4,
        generic_repeat=False,
        known_poll_no_progress=False,
        ping_pong=False,
    )
    verdicts = [run(detector, "read", {"p": 1}, "same").verdict for _ in range(5)]
    assert [v.detector for v in verdicts] == [None, None, None, None, "global_circuit_breaker"]
    assert verdicts[4].count == 4


def test_runs_are_scoped() -> None:
    detector = small()
    for _ in range(5):
        run(detector, "read", {"p": 1}, "same", run_id="r1")
    assert detector.check("read", {"p": 1}, run_id="r1").level == "critical"
    assert not detector.check("read", {"p": 1}, run_id="r2").stuck
    assert not detector.check("read", {"p": 1}).stuck


def test_history_is_trimmed_to_history_size() -> None:
    detector = ToolLoopDetector(history_size=4)
    for i in range(10):
        run(detector, "read", {"p": i}, "x")
    assert detector.history_len == 4


def test_enabled_states() -> None:
    # enabled=None: records and arms the guard, never detects.
    unset = ToolLoopDetector.from_openclaw(None)
    assert unset.config.enabled is None
    for _ in range(40):
        assert not run(unset, "read", {"p": 1}, "x").verdict.stuck
    assert unset.history_len == 30
    assert unset.arm_post_compaction() == 3
    # enabled=False: only outcomes are recorded, the guard is off.
    off = ToolLoopDetector(enabled=False)
    off.record_call("read", {"p": 1})
    assert off.history_len == 1
    run(off, "read", {"p": 2}, "x")
    assert off.history_len == 2  # not recorded before the call, appended after it
    run(off, "read", {"p": 1}, "x")
    assert off.history_len == 2  # this outcome filled the pending record_call record
    assert off.arm_post_compaction() == 0
    # The OpenClaw path is off unless enabled: true; the native one is on.
    assert ToolLoopDetector.from_openclaw({}).config.enabled is None
    assert ToolLoopDetector().config.enabled is True


def test_outcome_fills_pending_record_by_tool_call_id() -> None:
    detector = ToolLoopDetector()
    detector.record_call("read", {"p": 1}, tool_call_id="c1")
    detector.record_call("read", {"p": 1}, tool_call_id="c2")
    detector.record_outcome("read", {"p": 1}, result="x", tool_call_id="c1")
    detector.record_outcome("read", {"p": 1}, result="x", tool_call_id="c2")
    assert detector.history_len == 2
    detector.record_outcome("read", {"p": 1}, result="x", tool_call_id="c3")
    assert detector.history_len == 3
    # No result and vetoes are not recorded.
    detector.record_outcome("read", {"p": 1}, result=None)
    veto = {"content": [], "details": {"status": "blocked", "deniedReason": "tool-loop"}}
    assert detector.record_outcome("read", {"p": 1}, result=veto).result_hash is None
    assert detector.history_len == 3


# --- normalisation --------------------------------------------------------------------------


def h(tool: str, result: Any = None, params: Optional[Dict[str, Any]] = None, **kw: Any) -> Optional[int]:
    return tool_result_hash(tool, params or {}, result=result, **kw)


def exec_result(status: str, **details: Any) -> Dict[str, Any]:
    return text_result(details.pop("text", "out"), {"status": status, **details})


def test_exec_ignores_runtime_metadata() -> None:
    a = exec_result("completed", exitCode=0, aggregated="a\nb", durationMs=1, pid=1, cwd="/a", sessionId="x")
    b = exec_result("completed", exitCode=0, aggregated="a\nb", durationMs=2, pid=2, cwd="/b", sessionId="y")
    assert h("exec", a) == h("exec", b)
    assert h("exec", a) != h("exec", exec_result("completed", exitCode=1, aggregated="a\nb"))
    assert h("exec", a) != h("exec", exec_result("failed", exitCode=0, aggregated="a\nb"))
    # Without aggregated output the text is the output.
    assert h("exec", exec_result("completed", exitCode=0, text="x", pid=1)) == h(
        "exec", exec_result("completed", exitCode=0, text="x", aggregated="", pid=2)
    )
    assert h("exec", exec_result("running", tail="[1/9]", pid=1)) == h("exec", exec_result("running", tail="[1/9]", pid=2))
    assert h("exec", exec_result("running", tail="[1/9]")) != h("exec", exec_result("running", tail="[2/9]"))
    pending = dict(reason="r", host="h", command="c", warningText="w")
    assert h("exec", exec_result("approval-pending", pid=1, **pending)) == h(
        "exec", exec_result("approval-pending", pid=2, **pending)
    )
    # Another status falls through to the generic rule, where pid counts.
    assert h("exec", exec_result("weird", pid=1)) != h("exec", exec_result("weird", pid=2))
    # The exec rule applies only to a call named exactly exec.
    assert h("bash", a) != h("bash", b)


def test_process_poll_and_log() -> None:
    poll = {"action": "poll", "sessionId": "s"}
    a = text_result("t", {"status": "running", "aggregated": "x", "pid": 1})
    b = text_result("t", {"status": "running", "aggregated": "x", "pid": 2})
    assert h("process", a, poll) == h("process", b, poll)
    assert h("process", a, poll) != h("process", text_result("t", {"status": "exited", "aggregated": "x"}), poll)
    log = {"action": "log"}
    c = text_result("t", {"status": "running", "totalLines": 3, "totalChars": 9, "pid": 1})
    d = text_result("t", {"status": "running", "totalLines": 3, "totalChars": 9, "pid": 2})
    assert h("process", c, log) == h("process", d, log)
    assert h("process", c, log) != h("process", text_result("t", {"status": "running", "totalLines": 4}), log)
    # Missing and null fields are the same.
    assert h("process", text_result("t", {}), poll) == h("process", text_result("t", {"exitCode": None}), poll)


def test_send_like_results_drop_volatile_ids_at_every_depth() -> None:
    params = {"action": "send", "to": "u"}
    a = {"content": [{"type": "text", "text": "sent 1"}], "details": {"ok": True, "messageId": "m1", "meta": [{"ts": 1, "x": 1}]}}
    b = {"content": [{"type": "text", "text": "sent 2"}], "details": {"ok": True, "messageId": "m2", "meta": [{"ts": 2, "x": 1}]}}
    assert h("message", a, params) == h("message", b, params)
    assert h("sessions_send", a) == h("sessions_send", b)
    c = {"content": [], "details": {"ok": True, "meta": [{"x": 2}]}}
    assert h("message", a, params) != h("message", c, params)
    # A message action that does not send is generic: ids and text count.
    assert h("message", a, {"action": "read"}) != h("message", b, {"action": "read"})


def test_generic_results_use_details_and_text() -> None:
    assert h("t", text_result("x", {"a": 1})) == h("t", {"details": {"a": 1}, "content": [{"type": "text", "text": "  x\n"}]})
    assert h("t", text_result("x", {"a": 1})) != h("t", text_result("x", {"a": 2}))
    two = {"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "..."}, {"type": "text", "text": "b"}]}
    joined = {"content": [{"type": "text", "text": "a\nb"}]}
    assert h("t", two) == h("t", joined)
    # Entries without a string type are ignored; details that are not a mapping are {}.
    assert h("t", {"content": [{"text": "z"}]}) == h("t", {"content": [], "details": "nope"})


def test_result_kinds() -> None:
    assert h("t", None) is None
    assert h("t", "boom") != h("t", error="boom")
    assert h("t", error="boom") == h("t", error=RuntimeError("boom"))
    assert h("t", [1, 2]) == h("t", (1, 2))
    assert h("t", [1, 2]) != h("t", [2, 1])
    assert h("t", 1) == h("t", 1.0)
    assert h("t", 1) != h("t", True)
    assert h("t", "1") != h("t", 1)


def test_params_canonical_form() -> None:
    detector = ToolLoopDetector()
    same = [
        {"b": {"x": [1, 2], "y": 2}, "a": 1},
        {"a": 1.0, "b": {"y": 2, "x": (1, 2.0)}},
    ]
    for params in same:
        run(detector, "q", params, "r")
    assert (
        detector.record_outcome("q", same[0], result="r").args_hash == detector.record_outcome("q", same[1], result="r").args_hash
    )
    ids = {detector.record_outcome("q", p, result="r").args_hash for p in ({"a": 1}, {"a": True}, {"a": "1"}, {"a": 1.5})}
    assert len(ids) == 4
    nan = {detector.record_outcome("q", {"a": v}, result="r").args_hash for v in (math.nan, float("nan"))}
    assert len(nan) == 1
    named = {
        detector.record_outcome("q", {"a": v}, result="r").args_hash
        for v in (math.nan, "NaN", None, math.inf, -math.inf, "Infinity")
    }
    assert len(named) == 6


class _Text(str):
    pass


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.update(a=2),
        lambda p: p.update(a=_Text("1")),
        lambda p: (p.pop("a"), p.update(c=1)),  # same size, another key
        lambda p: p.update(d=None),
        lambda p: p.clear(),
        lambda p: p["b"].append(3),  # nested
    ],
)
def test_params_changed_between_the_hooks_are_hashed_anew(change: Any) -> None:
    # The hooks reuse a params digest only while the dict holds the very same immutable
    # entries: any change made between before_tool_call and after_tool_call is seen.
    def fresh(params: Dict[str, Any]) -> int:
        return ToolLoopDetector().after_tool_call("t", params, result="r").args_hash

    for params in ({"a": 1, "s": "x", "b": [1, 2]}, {"a": 1, "s": "x", "b": 0.5}):
        detector = ToolLoopDetector()
        detector.before_tool_call("t", params, run_id="run")
        try:
            change(params)
        except AttributeError:
            continue  # the nested change needs the list
        assert detector.after_tool_call("t", params, result="r", run_id="run").args_hash == fresh(params)
        # The same content handed over again hashes the same.
        assert detector.after_tool_call("t", params, result="r").args_hash == fresh(params)


def test_params_changed_by_another_thread_while_hashed_are_not_remembered_wrongly() -> None:
    # Hashing a string this long releases the interpreter, so another thread can change the
    # dict in the middle of a hook. A digest a later hook reuses must be that of the content
    # it is then handed. Whether the other thread gets in during the hook is up to the OS, so
    # attempts make sure it did at least once (on a loaded machine the other thread may miss
    # many windows, each one hash of the string long).
    big = "x" * (32 * doomloop._core.HASH_DETACH_THRESHOLD)
    interval = sys.getswitchinterval()
    changed_during_a_hook = False
    for _ in range(100):
        params: Dict[str, Any] = {"n": 0, "big": big}
        detector = ToolLoopDetector()
        go = threading.Event()
        thread = threading.Thread(target=lambda go=go, params=params: (go.wait(), params.update(n=1)))
        thread.start()
        # The main thread keeps the interpreter until the hook releases it to hash the string.
        sys.setswitchinterval(30.0)
        try:
            go.set()
            detector.before_tool_call("t", params)
            changed_during_a_hook |= params["n"] == 1
        finally:
            sys.setswitchinterval(interval)
            thread.join()
        expected = ToolLoopDetector().after_tool_call("t", params, result="r").args_hash
        assert detector.after_tool_call("t", params, result="r").args_hash == expected
        if changed_during_a_hook:
            break
    assert changed_during_a_hook


# --- extension points ---------------------------------------------------------------------


def test_tool_aliases_are_opt_in() -> None:
    params = {"command": "ls"}
    plain = small()
    aliased = small(tool_aliases={"bash": "exec"})
    for i in range(5):
        result = exec_result("completed", exitCode=0, aggregated="a", pid=i)
        run(plain, "bash", params, result)
        run(aliased, "bash", params, result)
    # Raw names: bash is not exec, so the changing pid is progress.
    assert plain.check("bash", params).level == "warning"
    verdict = aliased.check("bash", params)
    assert (verdict.level, verdict.count) == ("critical", 5)
    assert "exec" in (verdict.message or "")


def test_volatile_keys_normalisers_and_send_like() -> None:
    detector = ToolLoopDetector(
        volatile_keys={"requestId"},
        normalisers={"fetch": lambda result, params: result["details"]["status"]},
        send_like=lambda tool, params: tool == "notify",
    )
    a = detector.record_outcome("notify", {}, result={"details": {"requestId": 1, "messageId": 1, "ok": True}})
    b = detector.record_outcome("notify", {}, result={"details": {"requestId": 2, "messageId": 2, "ok": True}})
    assert a.result_hash == b.result_hash
    c = detector.record_outcome("fetch", {}, result={"details": {"status": 200, "body": "a"}})
    d = detector.record_outcome("fetch", {}, result={"details": {"status": 200, "body": "b"}})
    assert c.result_hash == d.result_hash == doomloop.fingerprint(200)
    with pytest.raises(TypeError, match="normalisers"):
        ToolLoopDetector(normalisers={"x": 1})
    with pytest.raises(TypeError, match="send_like"):
        ToolLoopDetector(send_like=3)
    with pytest.raises(TypeError, match="volatile_keys"):
        ToolLoopDetector(volatile_keys="ts")


# --- warning emission -------------------------------------------------------------------------


def test_first_warning_is_emitted_whatever_the_threshold() -> None:
    detector = ToolLoopDetector(warning_threshold=3, critical_threshold=100, global_circuit_breaker_threshold=200)
    emitted = [run(detector, "read", {"p": 1}, f"v{i}").emit_warning for i in range(25)]
    # counts 3..24: first at 3 (doomloop's difference), then OpenClaw's buckets at 10 and 20.
    assert [i for i, e in enumerate(emitted) if e] == [3, 10, 20]


def test_warnings_at_threshold_ten_follow_openclaw() -> None:
    detector = ToolLoopDetector(warning_threshold=10, critical_threshold=100, global_circuit_breaker_threshold=200)
    emitted = [run(detector, "read", {"p": 1}, f"v{i}").emit_warning for i in range(25)]
    assert [i for i, e in enumerate(emitted) if e] == [10, 20]


def test_warning_buckets_are_per_run() -> None:
    detector = ToolLoopDetector(warning_threshold=2, critical_threshold=100, global_circuit_breaker_threshold=200)
    for run_id in ("r1", "r2"):
        emitted = [run(detector, "read", {"p": 1}, f"v{i}", run_id=run_id).emit_warning for i in range(4)]
        assert emitted == [False, False, True, False]


def test_warning_keys_are_bounded_and_evicted_first_in_first_out() -> None:
    detector = ToolLoopDetector(warning_threshold=1, critical_threshold=100, global_circuit_breaker_threshold=200, history_size=2)
    first = None
    for i in range(257):
        run(detector, "read", {"p": i}, f"v{i}")
        decision = run(detector, "read", {"p": i}, f"w{i}")
        assert decision.emit_warning
        first = first or decision
    assert detector._warning_keys == 256
    # Key 0 was evicted: warning on it again is new and emitted.
    run(detector, "read", {"p": 0}, "a")
    assert run(detector, "read", {"p": 0}, "b").emit_warning
    # A key still remembered is not re-emitted below the next bucket.
    run(detector, "read", {"p": 256}, "a")
    assert not run(detector, "read", {"p": 256}, "b").emit_warning


def test_emitted_warnings_and_blocks_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    detector = small()
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        for _ in range(6):
            run(detector, "read", {"p": 1}, "same")
    messages = [r.getMessage() for r in caplog.records if r.name == "doomloop"]
    assert any("tool loop warning (generic_repeat, count 3)" in m for m in messages)
    assert any("tool call blocked (generic_repeat, count 5)" in m for m in messages)


# --- post-compaction guard -----------------------------------------------------------------------


def test_guard_in_the_detector(caplog: pytest.LogCaptureFixture) -> None:
    detector = ToolLoopDetector.from_openclaw({"postCompactionGuard": {"windowSize": 2}})
    outcome = detector.after_tool_call("read", {"p": 1}, result="x")
    assert not guard_of(outcome).should_abort
    with caplog.at_level(logging.INFO, logger="doomloop"):
        assert detector.arm_post_compaction() == 2
    assert "post-compaction guard armed for 2 attempts" in [r.getMessage() for r in caplog.records]
    assert detector.guard_remaining == 2
    detector.before_tool_call("read", {"p": 1})
    assert not guard_of(detector.after_tool_call("read", {"p": 1}, result="x")).should_abort
    detector.before_tool_call("read", {"p": 1})
    guard = guard_of(detector.after_tool_call("read", {"p": 1}, result="x"))
    assert guard.should_abort and (guard.detector, guard.count, guard.tool_name) == ("compaction_loop_persisted", 2, "read")
    # The window is spent: no more aborts.
    assert not guard_of(detector.after_tool_call("read", {"p": 1}, result="x")).should_abort
    # A different result breaks the triple.
    detector.arm_post_compaction()
    detector.after_tool_call("read", {"p": 1}, result="x")
    assert not guard_of(detector.after_tool_call("read", {"p": 1}, result="y")).should_abort


def test_guard_can_raise() -> None:
    detector = ToolLoopDetector(raise_on_compaction_loop=True, post_compaction_window_size=2)
    detector.arm_post_compaction()
    detector.after_tool_call("read", {"p": 1}, result="x")
    with pytest.raises(CompactionLoopPersisted) as caught:
        detector.after_tool_call("read", {"p": 1}, result="x")
    assert (caught.value.detector, caught.value.count, caught.value.tool) == ("compaction_loop_persisted", 2, "read")
    # The outcome was recorded before raising.
    assert detector.history_len == 2
    quiet = ToolLoopDetector(post_compaction_window_size=1)
    quiet.arm_post_compaction()
    outcome = quiet.after_tool_call("read", {}, result="x")
    with pytest.raises(CompactionLoopPersisted):
        CompactionLoopPersisted.raise_for(outcome)
    CompactionLoopPersisted.raise_for(quiet.after_tool_call("read", {}, result="x"))


def test_guard_off_when_disabled_and_silent_on_no_result() -> None:
    off = ToolLoopDetector.from_openclaw({"enabled": False, "postCompactionGuard": {"windowSize": 1}})
    off.arm_post_compaction()
    assert not guard_of(off.after_tool_call("read", {}, result="x")).should_abort
    on = ToolLoopDetector(post_compaction_window_size=1)
    on.arm_post_compaction()
    assert on.after_tool_call("read", {}, result=None).guard is None


def test_standalone_guard(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(3)

    def observe(result: Any) -> GuardVerdict:
        verdict = guard.observe("exec", {"c": 1}, result=result)
        assert verdict is not None
        return verdict

    assert not observe("x").should_abort
    with caplog.at_level(logging.INFO, logger="doomloop"):
        assert guard.arm() == 3
    assert "post-compaction guard armed for 3 attempts" in [r.getMessage() for r in caplog.records]
    verdicts = [observe(exec_result("completed", exitCode=0, aggregated="a", pid=i)) for i in range(3)]
    assert [v.should_abort for v in verdicts] == [False, False, True]
    assert (verdicts[2].count, verdicts[2].tool_name, verdicts[2].detector) == (3, "exec", "compaction_loop_persisted")
    assert guard.observe("exec", {}, result=None) is None
    guard.arm()
    assert [guard.observe_hashes("t", 1, 2).should_abort for _ in range(3)] == [False, False, True]
    with pytest.raises(ValueError, match="window_size"):
        PostCompactionGuard(0)


@pytest.mark.parametrize("seed", range(4))
def test_params_sharing_objects_with_the_last_ones_hash_as_fresh_ones(seed: int) -> None:
    # Fresh params refresh the snapshot of the last ones in place, and a key or value that is
    # the very object held there is not hashed again: a twin handed equal dicts it never
    # remembers must end in the same state after every call.
    shared, fresh = ToolLoopDetector(), ToolLoopDetector()
    for step, (params, copy) in enumerate(shared_argument_dicts(seed, 300)):
        shared.before_tool_call("read", params)
        shared.after_tool_call("read", params, result="ok")
        fresh.before_tool_call("read", copy)
        fresh.after_tool_call("read", copy, result="ok")
        assert shared.to_bytes() == fresh.to_bytes(), f"step {step}: {params!r}"


@pytest.mark.parametrize("seed", range(4))
def test_result_details_sharing_objects_with_the_last_ones_hash_as_fresh_ones(seed: int) -> None:
    # The last result's details mapping is remembered as the params are: a twin handed equal
    # results whose details it never remembers must end in the same state after every call
    # (the same details dict again, mutated, a fresh one of the same objects, a new one).
    shared, fresh = ToolLoopDetector(), ToolLoopDetector()
    for step, (details, copy) in enumerate(shared_argument_dicts(seed, 300)):
        text = [{"type": "text", "text": f"line {step % 3}"}]
        shared.before_tool_call("read", {"path": "a.py"})
        shared.after_tool_call("read", {"path": "a.py"}, result={"content": text, "details": details})
        fresh.before_tool_call("read", {"path": "a.py"})
        fresh.after_tool_call("read", {"path": "a.py"}, result={"content": text, "details": copy})
        assert shared.to_bytes() == fresh.to_bytes(), f"step {step}: {details!r}"
        assert tool_result_hash("read", {}, result={"content": text, "details": details}) == tool_result_hash(
            "read", {}, result={"content": text, "details": copy}
        )


# --- threads, memory, bad input ----------------------------------------------------------------


def test_threads_sharing_one_detector_lose_no_update() -> None:
    detector = ToolLoopDetector(
        history_size=10_000, warning_threshold=10**6, critical_threshold=10**6 + 1, global_circuit_breaker_threshold=10**6 + 2
    )
    threads_n, calls = 8, 500
    errors: List[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(calls):
                call_id = f"{t}-{i}"
                detector.before_tool_call("read", {"t": t}, tool_call_id=call_id)
                detector.after_tool_call("read", {"t": t}, result=f"r{i}", tool_call_id=call_id)
        except BaseException as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    # Every call recorded once and every outcome filled its own record (none appended).
    assert detector.history_len == threads_n * calls
    assert detector.check("read", {"t": 0}).count == 0


def test_state_is_small_and_reported() -> None:
    detector = ToolLoopDetector()
    for i in range(100):
        run(detector, "read", {"p": i % 5}, "x")
    assert 0 < detector._state_size() <= 4096
    assert sys.getsizeof(detector) >= detector._state_size()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda d: d.before_tool_call(1, {}), "tool must be a str"),
        (lambda d: d.before_tool_call("t", {1}), "params must be a JSON-like value"),
        (lambda d: d.before_tool_call("t", {}, run_id=3), "run_id must be a str"),
        (lambda d: d.before_tool_call("t", {}, tool_call_id=b"x"), "tool_call_id must be a str"),
        (lambda d: d.after_tool_call("t", {}, error=42), "error must be an exception"),
        (lambda d: d.check(None, {}), "tool must be a str"),
    ],
)
def test_bad_input_raises_type_error_naming_the_parameter(call: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        call(ToolLoopDetector())


def test_unusual_values_never_crash() -> None:
    detector = ToolLoopDetector()
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    cyclic: Dict[str, Any] = {}
    cyclic["self"] = cyclic

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    for params, result in [
        ({"deep": deep}, deep),
        ({"cyclic": cyclic}, cyclic),
        ({}, object()),
        ({}, lambda: 1),
        ({}, {"content": "not a list", "details": {"x": object()}}),
        ({}, "x" * 5_000_000),
        (None, {"content": [{"type": "text", "text": "\ud800"}]}),
    ]:
        outcome = detector.after_tool_call("t", params, result=result)
        assert outcome.result_hash is not None
    assert detector.after_tool_call("t", {}, error=Unprintable()).result_hash is not None
    assert detector.before_tool_call("t", {"deep": deep}).verdict is not None


def test_options_are_validated() -> None:
    with pytest.raises(TypeError, match="unknown option"):
        ToolLoopDetector(warn_threshold=3)
    with pytest.raises(ValueError, match="warning_threshold"):
        ToolLoopDetector(warning_threshold=0)
    with pytest.raises(TypeError, match="config must be"):
        ToolLoopDetector({"enabled": True})  # type: ignore[arg-type]
    detector = ToolLoopDetector(LoopDetectionConfig(warning_threshold=4), critical_threshold=6)
    assert (detector.config.warning_threshold, detector.config.critical_threshold) == (4, 6)


def test_verdict_objects() -> None:
    detector = small()
    for _ in range(4):
        run(detector, "read", {"p": 1}, "x")
    verdict = detector.check("read", {"p": 1})
    assert bool(verdict) and verdict.to_dict()["warningKey"].startswith("generic:read:read:")
    assert "generic_repeat" in repr(verdict)
    assert not detector.check("other", {})
    assert detector.check("other", {}).to_dict() == {"stuck": False}


def test_lone_surrogates_hash_exactly_and_never_raise() -> None:
    # Texts that differ only in a lone surrogate are different results (the fingerprint's
    # surrogatepass rule), and a tool name holding one is an ordinary name.
    errors = [tool_result_hash("t", {}, error=text) for text in ("a\udcff", "a\udcfe", "a\ufffd")]
    assert len(set(errors)) == 3
    content = [
        tool_result_hash("t", {}, result={"content": [{"type": "text", "text": text}]})
        for text in ("x\udcff ", "x\udcfe", "x\ufffd", "x\udcff")
    ]
    assert content[0] == content[3] and len(set(content)) == 3
    two = tool_result_hash("t", {}, result={"content": [{"type": "text", "text": "a\udcff"}, {"type": "text", "text": "b"}]})
    assert two != tool_result_hash(
        "t", {}, result={"content": [{"type": "text", "text": "a\udcfe"}, {"type": "text", "text": "b"}]}
    )
    detector = ToolLoopDetector(warning_threshold=2, critical_threshold=3)
    decisions = [detector.before_tool_call("read\udcff", {"path": "x"}) for _ in range(3)]
    detector.after_tool_call("read\udcff", {"path": "x"}, error="no such tool: read\udcff")
    assert decisions[-1].verdict.detector == "generic_repeat"
    assert "read\ufffd" in (decisions[-1].verdict.message or "")
    with pytest.raises(ValueError, match="tool_aliases"):
        ToolLoopDetector(tool_aliases={"a\udcff": "exec"})
