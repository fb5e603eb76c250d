//! The session detector (`Session`): any `SessionConfig` (construction accepts every one and
//! clamps), any sequence of the operations the binding layer calls, with arbitrary digests,
//! floats (NaN, infinities, negatives) and text.
//!
//! Properties:
//! - the verdict is the one of a plain model of `doom_loop.md` (the port of
//!   `tests/doom_loop_model.py`: every action kept in a list and re-scanned) for every check
//!   but REPEATED_OUTPUT, which is the chant detector's (fuzzed by the chant targets); here it
//!   may only appear when no other check holds, needs a response long enough to hold a chant,
//!   and stands until the next response or `start`;
//! - episodes, the recovery ladder, `elapsed` and every stats counter agree with the model
//!   (total == successful + failed);
//! - backoff: a delay and the stored backoff never exceed `max_backoff`;
//! - memory: `history_capacity()` is fixed by the configuration, and the heap the session
//!   really holds stays within a bound set by the configuration, whatever the sequence length;
//! - doomloop's rules (arguments compared, repeated responses) are the model's too, with
//!   similarity taken from the engine's sketches (unit-tested against exact Jaccard) and an
//!   action's identity derived from its type and arguments, as the binding derives it.
#![no_main]

use arbitrary::Arbitrary;
use doomloop_engine::chant::{ChantConfig, TextInput};
use doomloop_engine::fingerprint::{sketch_text, Sketch, SKETCH_ROOT};
use doomloop_engine::session::{Action, Finding, LoopType, Recovery, Session, SessionConfig, PLAN_STATES_CAP};
use doomloop_fuzz::live_bytes;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Config {
    max_identical_actions: u8,
    max_similar_actions: u8,
    max_consecutive_failures: u8,
    max_no_progress_steps: u8,
    max_time_per_action: f64,
    max_total_time: f64,
    max_recovery_attempts: u8,
    escalate_on_loop: bool,
    initial_backoff: f64,
    backoff_multiplier: f64,
    max_backoff: f64,
    detect_cycles: bool,
    max_cycle_period: u8,
    min_cycle_repeats: u8,
    content_chunk_size: u16,
    max_repeated_chunks: u16,
    similarity: u8,
    similar_by_arguments: bool,
    failures_by_arguments: bool,
    no_progress_by_arguments: bool,
    max_repeated_responses: u8,
    detailed_descriptions: bool,
    /// Use the raw (possibly huge or zero) thresholds instead of small ones.
    extreme: Option<(u64, u64, u64, u64)>,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// Small digests so that repeats and cycles are common; the arguments are one of
    /// [`ARGUMENTS`], and the identity is derived from them and the kind.
    Action {
        arguments: u8,
        kind: u8,
        result: u8,
        success: bool,
        duration: f64,
    },
    Chunk(Vec<u8>),
    EndResponse,
    Response(Vec<u8>),
    Progress,
    Plan(u8),
    Observe(f64),
    Recovery,
    NextBackoff,
    ResetBackoff,
    Start(f64),
    Stats,
    Elapsed(f64),
}

/// Argument texts: alike spellings of a few commands, and different ones.
const ARGUMENTS: [&str; 6] = [
    "grep -rn parse_header src",
    "GREP -nr 'parse_header' src/",
    "grep -rn load_config src",
    "python run.py --case 17",
    "python run.py --case 18",
    "",
];

/// Text from bytes: a few syllables and spaces, so chants are easy to make.
fn text(bytes: &[u8]) -> String {
    const WORDS: [&str; 8] = ["la", " ", "ba", "\n", "é", "x", "la la ", "😀"];
    bytes.iter().take(512).map(|&b| WORDS[usize::from(b % 8)]).collect()
}

#[derive(Default)]
struct Model {
    /// (identity, kind, result, failed)
    actions: Vec<(u64, u64, u64, bool)>,
    /// Each action's argument sketch.
    arguments: Vec<Sketch>,
    /// Each complete response's sketch and the actions recorded when it completed.
    responses: Vec<(Sketch, usize)>,
    /// The text of the response being streamed.
    open_text: String,
    markers_at: Vec<usize>,
    plan_visits: Vec<(u64, usize)>,
    started_at: Option<f64>,
    loop_events: u64,
    recovery_attempts: u64,
    last_type: Option<LoopType>,
    /// Code points of the response being (or last) recorded, and whether one is open.
    response_len: usize,
    open: bool,
    /// The engine reported REPEATED_OUTPUT for the current response.
    output_seen: bool,
}

impl Model {
    /// What the model's own lists hold (the session's heap is the rest).
    fn heap_bytes(&self) -> usize {
        self.actions.capacity() * std::mem::size_of::<(u64, u64, u64, bool)>()
            + self.markers_at.capacity() * std::mem::size_of::<usize>()
            + self.plan_visits.capacity() * std::mem::size_of::<(u64, usize)>()
            + self.arguments.capacity() * std::mem::size_of::<Sketch>()
            + self.responses.capacity() * std::mem::size_of::<(Sketch, usize)>()
            + self.open_text.capacity()
    }

    fn marker_since(&self, boundary: usize) -> bool {
        self.markers_at.iter().any(|&at| at >= boundary)
    }

    fn finding(&self, c: &SessionConfig, now: f64) -> Option<Finding> {
        let (a, n) = (&self.actions, self.actions.len());
        let last = |k: u64| -> &[(u64, u64, u64, bool)] {
            match usize::try_from(k) {
                Ok(k) if n >= k => &a[n - k..],
                _ => &[],
            }
        };
        let all_same = |w: &[(u64, u64, u64, bool)], f: fn(&(u64, u64, u64, bool)) -> u64| {
            w.first().is_some_and(|x| w.iter().all(|y| f(y) == f(x)))
        };
        if n >= 2 {
            if all_same(last(c.max_identical_actions), |x| x.0) {
                return Some(Finding::IdenticalAction);
            }
            if c.similar_by_arguments {
                if self.alike_run(c, c.max_similar_actions) {
                    return Some(Finding::SimilarArguments);
                }
            } else if all_same(last(c.max_similar_actions), |x| x.1) {
                return Some(Finding::SimilarAction);
            }
            let w = last(c.max_consecutive_failures);
            if c.failures_by_arguments {
                if !w.is_empty() && w.iter().all(|x| x.3) && self.alike_run(c, c.max_consecutive_failures) {
                    return Some(Finding::RetryStorm);
                }
            } else if !w.is_empty() && w.iter().all(|x| x.3) {
                return Some(Finding::RepeatedFailure);
            }
            let k = c.max_no_progress_steps;
            if c.no_progress_by_arguments {
                if self.alike_run(c, k) && !self.marker_since(n - k as usize) {
                    return Some(Finding::AlikeNoProgress);
                }
            } else if all_same(last(k), |x| x.2) && !self.marker_since(n - k as usize) {
                return Some(Finding::NoProgress);
            }
            if c.detect_cycles && (self.action_cycle(c) || self.plan_cycle(c)) {
                return Some(Finding::CircularPlan);
            }
        }
        if self.started_at.is_some_and(|start| now - start > c.max_total_time) {
            return Some(Finding::ResourceExhaustion);
        }
        if self.repeated_responses(c) {
            return Some(Finding::RepeatedResponse);
        }
        None
    }

    /// The last `k` actions exist, each alike to the one before, all with one result.
    fn alike_run(&self, c: &SessionConfig, k: u64) -> bool {
        let n = self.actions.len();
        let Ok(k) = usize::try_from(k) else {
            return false;
        };
        if k == 0 || n < k {
            return false;
        }
        (n - k + 1..n).all(|i| {
            let (before, after) = (self.actions[i - 1], self.actions[i]);
            let alike = before.1 == after.1
                && (before.0 == after.0
                    || self.arguments[i - 1].similarity(&self.arguments[i]) >= c.similarity_threshold);
            alike && before.2 == after.2
        })
    }

    /// The last `max_repeated_responses` responses, each alike to the one before.
    fn repeated_responses(&self, c: &SessionConfig) -> bool {
        let n = self.responses.len();
        let Ok(k) = usize::try_from(c.max_repeated_responses) else {
            return false;
        };
        if n < k {
            return false;
        }
        (n - k + 1..n).all(|i| {
            let ((before, before_at), (after, after_at)) = (&self.responses[i - 1], &self.responses[i]);
            if before.is_empty() || after.is_empty() {
                before.is_empty() && after.is_empty() && before_at == after_at
            } else {
                before.similarity(after) >= c.similarity_threshold
            }
        })
    }

    /// A response is complete.
    fn respond(&mut self, text: &str) {
        self.responses
            .push((sketch_text(SKETCH_ROOT, text.as_bytes()), self.actions.len()));
    }

    fn action_cycle(&self, c: &SessionConfig) -> bool {
        let (a, n, r) = (&self.actions, self.actions.len(), c.min_cycle_repeats as usize);
        (2..=c.max_cycle_period as usize).any(|p| {
            let span = p * r;
            if n < span || self.marker_since(n - span) {
                return false;
            }
            let repeats = (n - span + p..n).all(|i| a[i].0 == a[i - p].0 && a[i].2 == a[i - p].2);
            repeats && a[n - p..].iter().any(|x| x.0 != a[n - p].0)
        })
    }

    fn plan_cycle(&self, c: &SessionConfig) -> bool {
        let Some(&(state, _)) = self.plan_visits.last() else {
            return false;
        };
        let epoch = self.markers_at.len();
        let visits = self
            .plan_visits
            .iter()
            .filter(|&&(s, e)| s == state && e == epoch)
            .count();
        visits as u64 >= c.min_cycle_repeats
    }

    fn recovery(&self, c: &SessionConfig, loop_type: Option<LoopType>) -> Recovery {
        match loop_type {
            None => Recovery::Continue,
            Some(t) if self.recovery_attempts >= c.max_recovery_attempts || t == LoopType::ResourceExhaustion => {
                Recovery::Abort
            }
            Some(_) if self.recovery_attempts == 0 => Recovery::RetryDifferent,
            Some(_) if self.recovery_attempts == 1 && c.escalate_on_loop => Recovery::EscalateModel,
            Some(_) => Recovery::RequestHelp,
        }
    }
}

/// The engine's finding must be the model's, except that REPEATED_OUTPUT (the chant
/// detector's verdict) may stand in for "none" or for a repeated response (it ranks above).
fn check_finding(model: &mut Model, c: &SessionConfig, chant: &ChantConfig, engine: Option<Finding>, now: f64) {
    let expected = model.finding(c, now);
    let chant_may_stand_in = matches!(expected, None | Some(Finding::RepeatedResponse));
    if !chant_may_stand_in || engine != Some(Finding::RepeatedOutput) {
        assert_eq!(engine, expected, "finding at {now}");
        if chant_may_stand_in {
            assert!(!model.output_seen, "REPEATED_OUTPUT vanished within its response");
        }
        return;
    }
    // A chant of min_repeats occurrences at least a window apart needs that much text.
    let needed = chant.window * chant.min_repeats;
    assert!(
        model.response_len as u64 >= needed,
        "REPEATED_OUTPUT after {} code points (< {needed})",
        model.response_len
    );
    model.output_seen = true;
}

fuzz_target!(|input: (Config, Vec<Op>)| {
    let (cfg, ops) = input;
    let small = |v: u8, modulo: u8| u64::from(v % modulo);
    let (identical, similar, failures, no_progress) = cfg.extreme.unwrap_or((
        small(cfg.max_identical_actions, 8),
        small(cfg.max_similar_actions, 8),
        small(cfg.max_consecutive_failures, 8),
        small(cfg.max_no_progress_steps, 8),
    ));
    let config = SessionConfig {
        max_identical_actions: identical,
        max_similar_actions: similar,
        max_consecutive_failures: failures,
        max_no_progress_steps: no_progress,
        max_time_per_action: cfg.max_time_per_action,
        max_total_time: cfg.max_total_time,
        max_recovery_attempts: small(cfg.max_recovery_attempts, 6),
        escalate_on_loop: cfg.escalate_on_loop,
        initial_backoff: cfg.initial_backoff,
        backoff_multiplier: cfg.backoff_multiplier,
        max_backoff: cfg.max_backoff,
        detect_cycles: cfg.detect_cycles,
        max_cycle_period: u64::from(cfg.max_cycle_period),
        min_cycle_repeats: small(cfg.min_cycle_repeats, 6),
        content_chunk_size: u64::from(cfg.content_chunk_size % 64),
        max_repeated_chunks: u64::from(cfg.max_repeated_chunks % 16),
        similarity_threshold: f64::from(cfg.similarity) / 255.0,
        similar_by_arguments: cfg.similar_by_arguments,
        failures_by_arguments: cfg.failures_by_arguments,
        no_progress_by_arguments: cfg.no_progress_by_arguments,
        max_repeated_responses: small(cfg.max_repeated_responses, 6),
        detailed_descriptions: cfg.detailed_descriptions,
    };

    let before = live_bytes();
    let mut session = Session::new(config);
    let c = session.config().clone();
    // What construction must have clamped.
    assert!(c.max_identical_actions >= 1 && c.max_similar_actions >= 1);
    assert!(c.max_consecutive_failures >= 1 && c.max_no_progress_steps >= 1);
    assert!((2..=64).contains(&c.max_cycle_period) && (2..=1024).contains(&c.min_cycle_repeats));
    assert!(c.max_repeated_responses >= 2 && (0.0..=1.0).contains(&c.similarity_threshold));
    let chant = {
        let requested = c.chant_config();
        if requested.problem().is_some() {
            requested.clamped()
        } else {
            requested
        }
    };
    assert_eq!(chant.problem(), None);
    let capacity = session.history_capacity();
    assert_eq!(capacity as u64, c.max_cycle_period + 1);
    // Ring and cycle runs, the capped plan states (a HashMap and a queue), the chant
    // detector's ring and table (see the chant targets), and slack for hash map rounding.
    let memory_bound = 64 * capacity
        + PLAN_STATES_CAP * 128
        + 4 * 2 * (chant.history() as usize + 257)
        + 16 * 4 * 64usize.max(2 * (chant.max_distance() as usize + 1))
        // doomloop's rules: the newest action's and the responses' boxed state.
        + 2048
        + 4096;

    let mut model = Model::default();
    let mut backoff = c.initial_backoff;
    let mut observes = 0u64;
    for op in ops.iter().take(2000) {
        match op {
            Op::Action {
                arguments,
                kind,
                result,
                success,
                duration,
            } => {
                let (arguments, kind, result) = (
                    usize::from(*arguments) % ARGUMENTS.len(),
                    u64::from(*kind % 3),
                    u64::from(*result % 3),
                );
                // The identity is the type and the arguments, as the binding hashes it.
                let identity = kind * 8 + arguments as u64;
                let text = ARGUMENTS[arguments];
                let sketch = sketch_text(SKETCH_ROOT, text.as_bytes());
                session.note_action_type(kind, || "tool");
                session.record_action(&Action {
                    identity,
                    kind,
                    result,
                    failure: result,
                    success: *success,
                    duration: *duration,
                    arguments: &sketch,
                    preview: text,
                    limits: None,
                });
                let failed = !*success || *duration > c.max_time_per_action;
                model.actions.push((identity, kind, result, failed));
                model.arguments.push(sketch);
            }
            Op::Chunk(bytes) => {
                let t = text(bytes);
                session.record_output_chunk(TextInput::Utf8(&t));
                if !model.open {
                    model.response_len = 0;
                    model.output_seen = false;
                    model.open = true;
                    model.open_text.clear();
                }
                model.response_len += t.chars().count();
                model.open_text.push_str(&t);
            }
            Op::EndResponse => {
                session.end_response();
                if model.open {
                    let streamed = std::mem::take(&mut model.open_text);
                    model.respond(&streamed);
                }
                model.open = false;
            }
            Op::Response(bytes) => {
                let t = text(bytes);
                session.record_response(TextInput::Utf8(&t));
                if model.open {
                    let streamed = std::mem::take(&mut model.open_text);
                    model.respond(&streamed);
                }
                model.respond(&t);
                model.response_len = t.chars().count();
                model.output_seen = false;
                model.open = false;
            }
            Op::Progress => {
                session.mark_progress();
                model.markers_at.push(model.actions.len());
            }
            Op::Plan(state) => {
                let state = u64::from(*state % 5);
                session.record_plan(state);
                model.plan_visits.push((state, model.markers_at.len()));
            }
            Op::Observe(now) => {
                observes += 1;
                let plain = session.finding(*now);
                let (finding, new_episode) = session.observe(*now);
                assert_eq!(plain, finding, "finding() and observe() agree");
                check_finding(&mut model, &c, &chant, finding, *now);
                let loop_type = finding.map(Finding::loop_type);
                let expected_new = loop_type.is_some() && loop_type != model.last_type;
                assert_eq!(new_episode, expected_new);
                model.loop_events += u64::from(expected_new);
                model.last_type = loop_type;
                assert_eq!(session.recovery(loop_type), model.recovery(&c, loop_type));
            }
            Op::Recovery => {
                let more = session.increment_recovery();
                model.recovery_attempts = model.recovery_attempts.saturating_add(1);
                assert_eq!(more, model.recovery_attempts < c.max_recovery_attempts);
            }
            Op::NextBackoff => {
                let delay = session.next_backoff();
                let stored = session.stats().current_backoff;
                if !c.max_backoff.is_nan() {
                    // min() with a number is never NaN, so these hold strictly.
                    assert!(delay <= c.max_backoff, "delay {delay} > max {}", c.max_backoff);
                    assert!(stored <= c.max_backoff, "stored {stored} > max {}", c.max_backoff);
                }
                // The documented rule: wait min(current, max), then grow by the multiplier.
                let expected_delay = backoff.min(c.max_backoff);
                assert!(delay == expected_delay || (delay.is_nan() && expected_delay.is_nan()));
                backoff = (backoff * c.backoff_multiplier).min(c.max_backoff);
            }
            Op::ResetBackoff => {
                session.reset_backoff();
                backoff = c.initial_backoff;
            }
            Op::Start(now) => {
                session.start(*now);
                model = Model {
                    started_at: Some(*now),
                    ..Model::default()
                };
                backoff = c.initial_backoff;
                // A fresh session: nothing recorded, only the clock (a negative time limit
                // is already exceeded).
                assert_eq!(session.finding(*now), model.finding(&c, *now));
            }
            Op::Stats => {}
            Op::Elapsed(now) => {
                let expected = model.started_at.map_or(0.0, |start| now - start);
                let got = session.elapsed(*now);
                assert!(got == expected || (got.is_nan() && expected.is_nan()));
            }
        }
        let stats = session.stats();
        assert_eq!(stats.total_actions, model.actions.len() as u64);
        assert_eq!(stats.total_actions, stats.successful_actions + stats.failed_actions);
        let failed = model.actions.iter().filter(|a| a.3).count() as u64;
        assert_eq!(stats.failed_actions, failed);
        assert_eq!(stats.progress_markers, model.markers_at.len() as u64);
        assert_eq!(stats.recovery_attempts, model.recovery_attempts);
        assert_eq!(stats.loop_events, model.loop_events);
        assert!(stats.loop_events <= observes);
        let stored = stats.current_backoff;
        assert!(stored == backoff || (stored.is_nan() && backoff.is_nan()));
        assert_eq!(session.history_capacity(), capacity, "the ring never grows");
        if let Some(finding) = session.finding(f64::NAN) {
            // Every finding can be described (and names its rule).
            assert!(!session.describe(finding).is_empty() && !finding.rule().is_empty());
        }
        let held = live_bytes().saturating_sub(before + model.heap_bytes());
        assert!(held <= memory_bound, "session holds {held} bytes > {memory_bound}");
    }
});
