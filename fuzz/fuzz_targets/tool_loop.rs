//! The tool-call loop detector (`ToolLoopSession`) and the post-compaction guard: configs in
//! the range the binding layer accepts (history 1..=10,000, thresholds >= 1, guard window
//! 1..=1,000), call sequences over a small alphabet of tools, args, runs and results so that
//! every detector fires.
//!
//! Properties:
//! - with thresholds ordered as the Python layer resolves them, every decision (verdict,
//!   block, warning emission, paired tool) and guard verdict is the one of a plain model of
//!   the spec and of doomloop's own rules, cycles and argument churn (the port of
//!   `tests/models/test_tool_loop_model.py`, with the detector switches), and the history has
//!   the model's length;
//! - for any accepted config: `detect` has no side effects and is what `before_call` decides;
//!   a critical verdict blocks and records nothing; only warnings are emitted; the guard
//!   aborts only when armed, with a full window;
//! - bounds: `history_len() <= history_size`, `warning_keys() <= MAX_WARNING_KEYS`,
//!   `heap_bytes()` within a bound set by the config, and not less than the heap the session
//!   really holds.
#![no_main]

use std::collections::VecDeque;

use arbitrary::Arbitrary;
use doomloop_engine::tool_loop::{
    CallKey, Detector, GuardVerdict, Level, LoopConfig, Outcome, Record, ToolLoopSession, MAX_WARNING_KEYS,
};
use doomloop_fuzz::live_bytes;
use libfuzzer_sys::fuzz_target;

const TOOLS: u8 = 4;
/// Tool 2 with variants 0 and 1 is a known poll (as `process` with `poll`/`log`).
const POLL_TOOL: u8 = 2;

#[derive(Arbitrary, Debug)]
struct Config {
    history: u16,
    warning: u32,
    critical: u32,
    unknown_tool: u32,
    global: u32,
    guard_window: u16,
    /// Small thresholds (the loops happen) unless set.
    raw: bool,
    switches: u8,
    /// doomloop's own rules (cycle, argument churn), mostly on.
    own_switches: u8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum CallResult {
    Value(u8),
    UnknownTool(u8),
    Error(u8),
    None,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Call {
        tool: u8,
        variant: u8,
        run: u8,
        result: CallResult,
        call_id: Option<u8>,
    },
    RecordCall {
        tool: u8,
        variant: u8,
        run: u8,
        call_id: Option<u8>,
    },
    RecordOutcome {
        tool: u8,
        variant: u8,
        run: u8,
        result: u8,
        call_id: Option<u8>,
    },
    Arm,
}

fn call_key(tool: u8, variant: u8, run: u8) -> (CallKey, u8) {
    let (tool, variant) = (tool % TOOLS, variant % 3);
    let key = CallKey {
        tool: 1000 + u64::from(tool),
        args: 1 + u64::from(tool) * 16 + u64::from(variant),
        run: match run % 3 {
            0 => None,
            r => Some(u64::from(r)),
        },
        known_poll: tool == POLL_TOOL && variant < 2,
        limits: None,
    };
    (key, tool)
}

/// (result hash, unknown-tool name digest) of an outcome; errors hash apart from results.
fn outcome(result: CallResult) -> Option<Outcome> {
    match result {
        CallResult::Value(v) => Some(Outcome {
            result: u64::from(v % 3),
            unknown: None,
        }),
        CallResult::UnknownTool(name) => Some(Outcome {
            result: 100 + u64::from(name % 2),
            unknown: Some(200 + u64::from(name % 2)),
        }),
        CallResult::Error(e) => Some(Outcome {
            result: 300 + u64::from(e % 2),
            unknown: None,
        }),
        CallResult::None => None,
    }
}

#[derive(Clone, Debug)]
struct ModelRecord {
    tool: u64,
    id: u64,
    run: Option<u64>,
    result: Option<u64>,
    unknown: Option<u64>,
    call_id: Option<u64>,
    payload: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum BucketKey {
    Generic(u64),
    Poll(u64, u64),
    PingPong(u64, u64),
    /// A cycle's calls, rotated to start at the smallest rotation.
    Cycle(Vec<u64>),
    /// The tool and its repeated argument sets, sorted.
    Churn(u64, Vec<u64>),
}

/// No shorter pattern repeated makes up `pattern`.
fn primitive(pattern: &[u64]) -> bool {
    let p = pattern.len();
    !(1..p).any(|d| p % d == 0 && (0..p).all(|i| pattern[i] == pattern[i % d]))
}

/// The longest cycle of 3 to 8 calls that `args` continues, over two full rounds at least:
/// (count, no-progress evidence, the cycle up to rotation); ties to the shorter period.
fn model_cycle(h: &[&ModelRecord], args: u64) -> Option<(u32, bool, Vec<u64>)> {
    let newest: Vec<&ModelRecord> = h.iter().rev().copied().collect();
    let mut best: Option<(u32, bool, Vec<u64>)> = None;
    for p in 3..=8 {
        if newest.len() < p {
            break;
        }
        let pattern: Vec<u64> = newest[..p].iter().map(|r| r.id).collect();
        if pattern[p - 1] != args || !primitive(&pattern) {
            continue;
        }
        let tail = (0..newest.len())
            .take_while(|&j| newest[j].id == pattern[j % p])
            .count();
        let mut seen: Vec<(u64, u64)> = Vec::new();
        let mut evidence = true;
        for r in &newest[..tail] {
            match (r.result, seen.iter().find(|s| s.0 == r.id)) {
                (None, _) => evidence = false,
                (Some(res), Some(&(_, first))) => evidence &= res == first,
                (Some(res), None) => seen.push((r.id, res)),
            }
        }
        let calls: Vec<u64> = pattern.iter().rev().copied().collect();
        let key = (0..p)
            .map(|start| (0..p).map(|i| calls[(start + i) % p]).collect::<Vec<u64>>())
            .min()
            .unwrap_or_default();
        let count = tail as u32 + 1;
        if count >= 2 * p as u32 && best.as_ref().is_none_or(|b| count > b.0) {
            best = Some((count, evidence, key));
        }
    }
    best
}

/// One tool cycling through a few argument sets with unchanged outcomes: (count, the
/// repeated sets, sorted).
fn model_churn(h: &[&ModelRecord], tool: u64, args: u64) -> Option<(u32, Vec<u64>)> {
    let mut sets: Vec<(u64, u64, u32)> = Vec::new();
    let mut count = 0u32;
    for r in h.iter().rev() {
        let Some(result) = r.result.filter(|_| r.tool == tool) else {
            break;
        };
        match sets.iter().position(|s| s.0 == r.id) {
            Some(i) if sets[i].1 != result => break,
            Some(i) => sets[i].2 += 1,
            None if sets.len() == 8 => break,
            None => sets.push((r.id, result, 1)),
        }
        count += 1;
    }
    let mut repeated: Vec<u64> = sets.iter().filter(|s| s.2 >= 3).map(|s| s.0).collect();
    repeated.sort_unstable();
    let probes = count - sets.iter().filter(|s| s.2 >= 3).map(|s| s.2).sum::<u32>();
    (repeated.len() >= 2 && probes <= (count / 5).max(1) && repeated.contains(&args)).then_some((count, repeated))
}

type Verdict = (Level, Detector, u32, Option<u8>);

/// The spec's rules, written out plainly over a list of records.
struct Model {
    c: LoopConfig,
    history: Vec<ModelRecord>,
    buckets: VecDeque<((Option<u64>, BucketKey), u32)>,
    remaining: u32,
    window: Vec<(u64, u64, u64)>,
}

impl Model {
    fn detect(&self, k: &CallKey) -> (Option<Verdict>, Option<BucketKey>) {
        let c = &self.c;
        if !c.detect {
            return (None, None);
        }
        let h: Vec<&ModelRecord> = self.history.iter().filter(|r| r.run == k.run).collect();
        let same = |r: &ModelRecord| r.tool == k.tool && r.id == k.args;
        // 1. The unknown tool.
        let (mut n, mut name) = (0u32, None);
        for r in h.iter().rev() {
            match r.unknown {
                Some(u) if r.tool == k.tool && name.is_none_or(|n| n == u) => {
                    name = Some(u);
                    n += 1;
                }
                _ => break,
            }
        }
        if n >= c.unknown_tool {
            return (Some((Level::Critical, Detector::UnknownToolRepeat, n, None)), None);
        }
        // The streak of one result, and the recent count.
        let (mut streak, mut latest) = (0u32, None);
        for r in h.iter().rev() {
            let Some(result) = r.result.filter(|_| same(r)) else {
                continue;
            };
            match latest {
                None => {
                    latest = Some(result);
                    streak = 1;
                }
                Some(l) if l == result => streak += 1,
                Some(_) => break,
            }
        }
        let recent = h.iter().filter(|r| same(r)).count() as u32;
        let latest = latest.unwrap_or(0);
        if streak >= c.global {
            return (
                Some((Level::Critical, Detector::GlobalCircuitBreaker, streak, None)),
                None,
            );
        }
        if k.known_poll && c.known_poll {
            if streak >= c.critical {
                return (
                    Some((Level::Critical, Detector::KnownPollNoProgress, streak, None)),
                    None,
                );
            }
            if streak >= c.warning {
                let key = BucketKey::Poll(k.args, latest);
                return (
                    Some((Level::Warning, Detector::KnownPollNoProgress, streak, None)),
                    Some(key),
                );
            }
        }
        if c.ping_pong {
            if let Some(last) = h.last() {
                let other = h.iter().rev().skip(1).map(|r| r.id).find(|&id| id != last.id);
                let mut tail = 0usize;
                for r in h.iter().rev() {
                    let expected = if tail.is_multiple_of(2) { Some(last.id) } else { other };
                    if Some(r.id) != expected {
                        break;
                    }
                    tail += 1;
                }
                if other.is_some() && tail >= 2 && Some(k.args) == other {
                    let mut sides: Vec<(u64, u64)> = vec![];
                    let mut evidence = true;
                    for r in &h[h.len() - tail..] {
                        match (r.result, sides.iter().find(|s| s.0 == r.id)) {
                            (None, _) => evidence = false,
                            (Some(res), Some(&(_, seen))) if seen != res => evidence = false,
                            (Some(res), None) => sides.push((r.id, res)),
                            _ => {}
                        }
                    }
                    evidence = evidence && sides.len() == 2;
                    let count = tail as u32 + 1;
                    let key = BucketKey::PingPong(k.args.min(last.id), k.args.max(last.id));
                    if count >= c.critical && evidence {
                        return (
                            Some((Level::Critical, Detector::PingPong, count, Some(last.payload))),
                            None,
                        );
                    }
                    if count >= c.warning {
                        let v = (Level::Warning, Detector::PingPong, count, Some(last.payload));
                        return (Some(v), Some(key));
                    }
                }
            }
        }
        if c.cycle {
            if let Some((count, evidence, calls)) = model_cycle(&h, k.args) {
                if count >= c.critical && evidence {
                    return (Some((Level::Critical, Detector::Cycle, count, None)), None);
                }
                if count >= c.warning {
                    let key = BucketKey::Cycle(calls);
                    return (Some((Level::Warning, Detector::Cycle, count, None)), Some(key));
                }
            }
        }
        let generic = !k.known_poll && c.generic_repeat;
        if generic && streak >= c.critical {
            return (Some((Level::Critical, Detector::GenericRepeat, streak, None)), None);
        }
        if c.argument_churn {
            if let Some((count, sets)) = model_churn(&h, k.tool, k.args) {
                if count >= c.critical {
                    return (Some((Level::Critical, Detector::ArgumentChurn, count, None)), None);
                }
                if count >= c.warning {
                    let key = BucketKey::Churn(k.tool, sets);
                    return (Some((Level::Warning, Detector::ArgumentChurn, count, None)), Some(key));
                }
            }
        }
        if generic && recent >= c.warning {
            let key = BucketKey::Generic(k.args);
            return (Some((Level::Warning, Detector::GenericRepeat, recent, None)), Some(key));
        }
        (None, None)
    }

    fn trim(&mut self) {
        let keep = self.c.history_size.max(1);
        if self.history.len() > keep {
            self.history.drain(..self.history.len() - keep);
        }
    }

    fn record(&mut self, k: &CallKey, call_id: Option<u64>, payload: u8, result: Option<Outcome>) {
        self.history.push(ModelRecord {
            tool: k.tool,
            id: k.args,
            run: k.run,
            result: result.map(|o| o.result),
            unknown: result.and_then(|o| o.unknown),
            call_id,
            payload,
        });
        self.trim();
    }

    /// Fill the newest pending record of this call (and this call id, when given).
    fn outcome(&mut self, k: &CallKey, call_id: Option<u64>, payload: u8, o: Outcome) {
        let pending = self.history.iter_mut().rev().find(|r| {
            r.result.is_none()
                && r.run == k.run
                && r.tool == k.tool
                && r.id == k.args
                && call_id.is_none_or(|id| r.call_id == Some(id))
        });
        match pending {
            Some(r) => {
                r.result = Some(o.result);
                r.unknown = o.unknown;
                r.payload = payload;
            }
            None => self.record(k, call_id, payload, Some(o)),
        }
    }

    /// (verdict, blocked, emitted, guard abort)
    fn call(
        &mut self,
        k: &CallKey,
        call_id: Option<u64>,
        payload: u8,
        result: Option<Outcome>,
    ) -> (Option<Verdict>, bool, bool, Option<bool>) {
        let (verdict, key) = self.detect(k);
        if verdict.is_some_and(|v| v.0 == Level::Critical) {
            return (verdict, true, false, None);
        }
        let mut emitted = false;
        if let (Some(v), Some(key)) = (verdict, key) {
            let bucket = v.2 / 10;
            let bucket_key = (k.run, key);
            match self.buckets.iter_mut().find(|(bk, _)| *bk == bucket_key) {
                None => {
                    emitted = true;
                    self.buckets.push_back((bucket_key, bucket));
                    if self.buckets.len() > MAX_WARNING_KEYS {
                        self.buckets.pop_front();
                    }
                }
                Some(entry) if bucket > entry.1 => {
                    emitted = true;
                    entry.1 = bucket;
                }
                Some(_) => {}
            }
        }
        if self.c.record_calls {
            self.record(k, call_id, payload, None);
        }
        let Some(o) = result else {
            return (verdict, false, emitted, None);
        };
        self.outcome(k, call_id, payload, o);
        if !self.c.guard_enabled {
            return (verdict, false, emitted, Some(false));
        }
        let mut abort = false;
        if self.remaining > 0 {
            self.remaining -= 1;
            let triple = (k.tool, k.args, o.result);
            self.window.push(triple);
            abort = self.window.iter().filter(|&&t| t == triple).count() as u32 >= self.c.guard_window.max(1);
        }
        (verdict, false, emitted, Some(abort))
    }
}

fuzz_target!(|input: (Config, Vec<Op>)| {
    let (cfg, ops) = input;
    let small = |v: u32, modulo: u32| 1 + v % modulo;
    let s = cfg.switches;
    let mut config = LoopConfig {
        history_size: 1 + usize::from(cfg.history % 10_000),
        warning: cfg.warning.max(1),
        critical: cfg.critical.max(1),
        unknown_tool: cfg.unknown_tool.max(1),
        global: cfg.global.max(1),
        // Mostly all on, as configured by default.
        generic_repeat: s & 0x81 != 0x81,
        known_poll: s & 0x82 != 0x82,
        ping_pong: s & 0x84 != 0x84,
        cycle: cfg.own_switches & 0x81 != 0x81,
        argument_churn: cfg.own_switches & 0x82 != 0x82,
        // Read by the result normalisation only (outside this target).
        hash_plain_results: true,
        detect: s & 0x88 != 0x88,
        record_calls: s & 0x90 != 0x90,
        guard_enabled: s & 0xa0 != 0xa0,
        guard_window: 1 + u32::from(cfg.guard_window % 1000),
    };
    if !cfg.raw {
        config.history_size = 1 + usize::from(cfg.history % 16);
        config.warning = small(cfg.warning, 8);
        config.critical = small(cfg.critical, 10);
        config.unknown_tool = small(cfg.unknown_tool, 5);
        config.global = small(cfg.global, 12);
        config.guard_window = 1 + u32::from(cfg.guard_window % 4);
    }
    // The Python layer's run-time ordering (critical > warning, global > critical): only then
    // is the model's verdict the engine's.
    let ordered = config.critical > config.warning && config.global > config.critical;

    let before = live_bytes();
    let mut session: ToolLoopSession<u8> = ToolLoopSession::new(config);
    let mut model = Model {
        c: config,
        history: Vec::new(),
        buckets: VecDeque::new(),
        remaining: 0,
        window: Vec::new(),
    };
    let record_size = std::mem::size_of::<Record<u8>>();
    // The records; their call ids and unknown-tool digests (a second ring of 16 bytes each,
    // once any is used, and its header); the run ids (at most twice the history's size and
    // 8 more, 8 bytes each).
    let heap_bound = config.history_size * (record_size + 16)
        + 64
        + (2 * config.history_size + 8) * 8
        + 2 * (MAX_WARNING_KEYS + 1) * std::mem::size_of::<(u64, u32)>()
        + 2 * (config.guard_window as usize + 4) * 24;

    for op in ops.iter().take(3000) {
        match *op {
            Op::Call {
                tool,
                variant,
                run,
                result,
                call_id,
            } => {
                let (key, payload) = call_key(tool, variant, run);
                let call_id = call_id.map(u64::from);
                let len = session.history_len();
                let detected = session.detect(&key);
                assert_eq!(session.detect(&key), detected, "detect is pure");
                assert_eq!(session.history_len(), len);
                let d = session.before_call(&key, call_id, payload);
                let recorded = !d.blocked && config.record_calls;
                assert_eq!(
                    d.finding.map(|f| (f.level, f.detector, f.count, f.key)),
                    detected.map(|f| (f.level, f.detector, f.count, f.key)),
                    "before_call decides what detect said"
                );
                assert_eq!(
                    d.finding.and_then(|f| f.source_back),
                    detected.and_then(|f| f.source_back).map(|b| b + usize::from(recorded)),
                    "the source record moves back by the recorded call"
                );
                assert_eq!(d.blocked, d.finding.is_some_and(|f| f.level == Level::Critical));
                assert!(!d.emit_warning || d.finding.is_some_and(|f| f.level == Level::Warning));
                if let Some(f) = d.finding {
                    assert!(config.detect);
                    assert!(f.count as usize <= len + 1, "count {} beyond history {len}", f.count);
                    let threshold = match (f.detector, f.level) {
                        (Detector::UnknownToolRepeat, _) => config.unknown_tool,
                        (Detector::GlobalCircuitBreaker, _) => config.global,
                        (_, Level::Critical) => config.critical,
                        (_, Level::Warning) => config.warning,
                    };
                    assert!(f.count >= threshold, "{f:?} below its threshold");
                    if let Some(back) = f.source_back {
                        assert!(session.record(back).is_some(), "source_back {back} names no record");
                    }
                }
                // The paired tool's record, as the binding layer reads it (before after_call).
                let paired = d.finding.and_then(|f| {
                    let back = f.source_back?;
                    (f.detector == Detector::PingPong).then(|| session.record(back).map(|r| r.payload))?
                });
                let expected_len = len + usize::from(recorded);
                assert_eq!(session.history_len(), expected_len.min(config.history_size));
                let outcome = if d.blocked { None } else { outcome(result) };
                let armed = session.guard().remaining() > 0;
                let guard = session.after_call(&key, call_id, outcome, payload);
                assert_eq!(guard.is_some(), outcome.is_some());
                if let Some(GuardVerdict::Abort(count)) = guard {
                    assert!(armed && config.guard_enabled, "an unarmed guard aborted");
                    assert_eq!(count, session.guard().window_size(), "aborts exactly on a full window");
                }
                if ordered {
                    let expected = model.call(&key, call_id, payload, outcome);
                    let got = (
                        d.finding.map(|f| (f.level, f.detector, f.count, paired)),
                        d.blocked,
                        d.emit_warning,
                        guard.map(|g| g != GuardVerdict::Continue),
                    );
                    assert_eq!(got, expected, "engine and model disagree on {op:?}");
                    assert_eq!(session.history_len(), model.history.len());
                }
            }
            Op::RecordCall {
                tool,
                variant,
                run,
                call_id,
            } => {
                let (key, payload) = call_key(tool, variant, run);
                let call_id = call_id.map(u64::from);
                session.record_call(&key, call_id, payload);
                model.record(&key, call_id, payload, None);
            }
            Op::RecordOutcome {
                tool,
                variant,
                run,
                result,
                call_id,
            } => {
                let (key, payload) = call_key(tool, variant, run);
                let o = Outcome {
                    result: u64::from(result % 3),
                    unknown: None,
                };
                let call_id = call_id.map(u64::from);
                session.record_outcome(&key, call_id, o, payload);
                model.outcome(&key, call_id, payload, o);
            }
            Op::Arm => {
                let armed = session.arm_guard();
                let expected = if config.guard_enabled { config.guard_window } else { 0 };
                assert_eq!(armed, expected);
                if config.guard_enabled {
                    model.remaining = config.guard_window;
                    model.window.clear();
                }
            }
        }
        assert!(session.history_len() <= config.history_size);
        assert!(session.warning_keys() <= MAX_WARNING_KEYS);
        assert!(session.guard().remaining() <= session.guard().window_size());
        let heap = session.heap_bytes();
        assert!(heap <= heap_bound, "heap_bytes {heap} > {heap_bound}");
        let held = live_bytes().saturating_sub(before + model_bytes(&model));
        assert!(held <= heap, "heap_bytes {heap} under-reports the {held} bytes held");
    }
});

fn model_bytes(m: &Model) -> usize {
    let key_heap = |key: &BucketKey| match key {
        BucketKey::Cycle(calls) | BucketKey::Churn(_, calls) => calls.capacity() * std::mem::size_of::<u64>(),
        _ => 0,
    };
    m.history.capacity() * std::mem::size_of::<ModelRecord>()
        + m.buckets.capacity() * std::mem::size_of::<((Option<u64>, BucketKey), u32)>()
        + m.buckets.iter().map(|((_, key), _)| key_heap(key)).sum::<usize>()
        + m.window.capacity() * std::mem::size_of::<(u64, u64, u64)>()
}
