//! Session-level doom-loop detection: the state behind `DoomLoopDetector`.
//!
//! Every check is answered from running counters kept up to date on each recorded action, so
//! recording and checking cost O(1) (cycle checks O(max_cycle_period)) whatever the history
//! length or the thresholds. The only history kept is a ring buffer of the last
//! `max_cycle_period + 1` actions; nothing grows with the number of actions.
//!
//! doomloop's own rules (off in `DoomLoopConfig()`, on in `DoomLoopConfig.recommended()`)
//! compare actions by a fixed-size [`Sketch`] of their arguments, and responses by a sketch of
//! their text, kept for the newest action and the newest response only: O(1) memory whatever
//! the session's length.
//!
//! The session and its rules are here; `config` holds the settings and `snapshot` the
//! snapshot format.

mod config;
mod failure;
mod snapshot;

pub use failure::{failure_digest, failure_parts, FAILURE_ARGUMENT_BYTES, FAILURE_HEAD_BYTES, FAILURE_TAIL_BYTES};

use std::collections::{HashMap, VecDeque};

use crate::chant::{Chant, ChantEvent, HashKey, TextInput};
use crate::fingerprint::{CachedSketch, SeenValues, Sketch, TextFeatures, SKETCH_ROOT};
use crate::names::RecentNames;
use crate::policy::ActionLimits;
use crate::ring::Ring;

pub use config::{SessionConfig, SESSION};
/// Action types kept by name for `DoomLoopEvent.action_history`.
pub const RECENT_TYPES: usize = 10;

/// Plan states remembered for CIRCULAR_PLAN (oldest forgotten first).
pub const PLAN_STATES_CAP: usize = 4096;

/// Longest action cycle CIRCULAR_PLAN watches (`max_cycle_period`): each period up to it
/// keeps a counter updated on every action.
pub const MAX_CYCLE_PERIOD: u64 = 64;

/// Most repeats of a cycle CIRCULAR_PLAN can be asked to wait for (`min_cycle_repeats`).
pub const MAX_CYCLE_REPEATS: u64 = 1024;

/// Loop types, in the order of `DoomLoopType`'s members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopType {
    RepeatedAction = 0,
    RepeatedFailure = 1,
    NoProgress = 2,
    CircularPlan = 3,
    ResourceExhaustion = 4,
    RepeatedOutput = 5,
}

impl LoopType {
    /// The loop type's name, as upstream's `DoomLoopType` values spell it.
    pub fn name(self) -> &'static str {
        match self {
            LoopType::RepeatedAction => "repeated_action",
            LoopType::RepeatedFailure => "repeated_failure",
            LoopType::NoProgress => "no_progress",
            LoopType::CircularPlan => "circular_plan",
            LoopType::ResourceExhaustion => "resource_exhaustion",
            LoopType::RepeatedOutput => "repeated_output",
        }
    }
}

/// Which rule fired. Several rules share a loop type; each has its own [`Finding::rule`] name
/// and description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    IdenticalAction,
    /// Upstream's similar case: the same action type.
    SimilarAction,
    RepeatedFailure,
    NoProgress,
    CircularPlan,
    ResourceExhaustion,
    /// A chant inside one response.
    RepeatedOutput,
    /// `similar_by_arguments`: alike actions with the same result.
    SimilarArguments,
    /// `failures_by_arguments`: alike actions failing with the same result (a retry storm).
    RetryStorm,
    /// `no_progress_by_arguments`: alike actions whose result does not change.
    AlikeNoProgress,
    /// Alike responses turn after turn.
    RepeatedResponse,
}

impl Finding {
    pub fn loop_type(self) -> LoopType {
        match self {
            Finding::IdenticalAction | Finding::SimilarAction | Finding::SimilarArguments => LoopType::RepeatedAction,
            Finding::RepeatedFailure | Finding::RetryStorm => LoopType::RepeatedFailure,
            Finding::NoProgress | Finding::AlikeNoProgress => LoopType::NoProgress,
            Finding::CircularPlan => LoopType::CircularPlan,
            Finding::ResourceExhaustion => LoopType::ResourceExhaustion,
            Finding::RepeatedOutput | Finding::RepeatedResponse => LoopType::RepeatedOutput,
        }
    }

    /// Whether the finding holds whatever the time: an action rule, checked before the time
    /// limit (see [`Session::finding_at`]), so it stands until the state changes.
    pub fn is_timeless(self) -> bool {
        !matches!(
            self,
            Finding::ResourceExhaustion | Finding::RepeatedOutput | Finding::RepeatedResponse
        )
    }

    /// The rule's name (`DoomLoopEvent.metadata["rule"]`, and docs/session.md's table).
    pub fn rule(self) -> &'static str {
        match self {
            Finding::IdenticalAction => "identical_actions",
            Finding::SimilarAction => "same_action_type",
            Finding::SimilarArguments => "similar_actions",
            Finding::RepeatedFailure => "consecutive_failures",
            Finding::RetryStorm => "retry_storm",
            Finding::NoProgress => "no_progress",
            Finding::AlikeNoProgress => "alike_no_progress",
            Finding::CircularPlan => "circular_plan",
            Finding::ResourceExhaustion => "time_limit",
            Finding::RepeatedOutput => "chant",
            Finding::RepeatedResponse => "repeated_response",
        }
    }

    /// Upstream's sentence for its rules (the same-type case says what it is); doomloop's own
    /// rules are described by [`Session::describe`], which names what repeated.
    fn upstream_sentence(self, config: &SessionConfig) -> String {
        match self {
            Finding::IdenticalAction => format!("Same action repeated {} times", config.max_identical_actions),
            Finding::SimilarAction => format!("Same action type repeated {} times", config.max_similar_actions),
            Finding::RepeatedFailure => {
                format!("Action failed {} times consecutively", config.max_consecutive_failures)
            }
            Finding::NoProgress => format!("No meaningful progress in {} steps", config.max_no_progress_steps),
            Finding::CircularPlan => "Plan has looped back to a previous state".to_owned(),
            Finding::ResourceExhaustion => format!("Exceeded time limit of {}s", PyFloat(config.max_total_time)),
            Finding::RepeatedOutput => format!(
                "Model output repeating — {}+ identical chunks detected",
                config.max_repeated_chunks
            ),
            Finding::SimilarArguments => {
                format!(
                    "Similar actions repeated {} times with the same result",
                    config.max_similar_actions
                )
            }
            Finding::RetryStorm => format!(
                "Alike actions failed {} times in a row with the same result",
                config.max_consecutive_failures
            ),
            Finding::AlikeNoProgress => format!(
                "No meaningful progress in {} steps: alike actions kept returning the same result",
                config.max_no_progress_steps
            ),
            Finding::RepeatedResponse => format!(
                "Same response repeated {} times in a row",
                config.max_repeated_responses
            ),
        }
    }
}

/// A float as Python's `str()` shows it (`300.0`, `1e+300`), for messages that quote
/// upstream's.
struct PyFloat(f64);

impl std::fmt::Display for PyFloat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = self.0;
        if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e16 {
            write!(f, "{value:.1}")
        } else if value.is_finite() && (value.abs() >= 1e16 || (value != 0.0 && value.abs() < 1e-4)) {
            let text = format!("{value:e}");
            // Rust writes `1e300` and `1.5e-5`; Python `1e+300` and `1.5e-05`.
            let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
            let (sign, digits) = exponent.strip_prefix('-').map_or(("+", exponent), |d| ("-", d));
            write!(f, "{mantissa}e{sign}{digits:0>2}")
        } else if value.is_nan() {
            f.write_str("nan")
        } else if value.is_infinite() {
            f.write_str(if value > 0.0 { "inf" } else { "-inf" })
        } else {
            write!(f, "{value}")
        }
    }
}

/// Rungs of the recovery ladder, in the order of `RecoveryAction`'s members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    Continue = 0,
    RetryDifferent = 1,
    EscalateModel = 2,
    RequestHelp = 3,
    Abort = 4,
}

impl Recovery {
    /// The rung's name, as upstream's `RecoveryAction` values spell it.
    pub fn name(self) -> &'static str {
        match self {
            Recovery::Continue => "continue",
            Recovery::RetryDifferent => "retry_different",
            Recovery::EscalateModel => "escalate_model",
            Recovery::RequestHelp => "request_help",
            Recovery::Abort => "abort",
        }
    }
}

/// One recorded action: digests only, 25 bytes of payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionRecord {
    /// Action type + canonical args.
    pub identity: u64,
    /// Action type alone.
    pub kind: u64,
    pub result: u64,
    pub failed: bool,
}

/// One action as the binding hands it over: digests, and what doomloop's own rules and the
/// descriptions read of its arguments.
#[derive(Clone, Copy, Debug)]
pub struct Action<'a> {
    /// Action type + canonical args.
    pub identity: u64,
    /// Action type alone.
    pub kind: u64,
    pub result: u64,
    /// What `retry_storm` compares of two failures: [`failure_digest`] of a failed action's
    /// text result, else `result` (read only with `failures_by_arguments`).
    pub failure: u64,
    pub success: bool,
    /// Seconds; above `max_time_per_action` the action counts as failed.
    pub duration: f64,
    /// The arguments' sketch (read only when [`SessionConfig::compares_arguments`]).
    pub arguments: &'a Sketch,
    /// The first string argument, to name the action in descriptions (read only when
    /// [`SessionConfig::names_actions`]).
    pub preview: &'a str,
    /// Its tool's policy thresholds (a profile's `tool_policies`), if any: the checks after
    /// it use them in place of the config's.
    pub limits: Option<ActionLimits>,
}

/// Bytes of text a [`Preview`] keeps.
pub const PREVIEW_BYTES: usize = 60;

/// The beginning of a text, kept to name it in descriptions: at most [`PREVIEW_BYTES`] bytes
/// (whole characters), inline, so keeping one per action or response never allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preview {
    bytes: [u8; PREVIEW_BYTES],
    len: u8,
    /// Text was left out.
    cut: bool,
}

impl Default for Preview {
    fn default() -> Self {
        Preview {
            bytes: [0; PREVIEW_BYTES],
            len: 0,
            cut: false,
        }
    }
}

impl Preview {
    pub fn new(text: &str) -> Self {
        let mut preview = Preview::default();
        preview.push_str(text);
        preview
    }

    /// Hold the beginning of `text` instead.
    pub fn set(&mut self, text: &str) {
        self.len = 0;
        self.cut = false;
        self.push_str(text);
    }

    /// Append as much of `text` as fits.
    pub fn push_str(&mut self, text: &str) {
        if self.cut {
            return;
        }
        let len = usize::from(self.len).min(PREVIEW_BYTES);
        let room = PREVIEW_BYTES - len;
        let mut take = text.len().min(room);
        while !text.is_char_boundary(take) {
            take -= 1;
        }
        if let (Some(slot), Some(piece)) = (self.bytes.get_mut(len..len + take), text.as_bytes().get(..take)) {
            // A loop, not `copy_from_slice`: the pieces are short, a `memcpy` call costs more.
            for (to, &from) in slot.iter_mut().zip(piece) {
                *to = from;
            }
            self.len += take as u8;
        }
        self.cut = take < text.len();
    }

    /// Append the start of a piece of a response.
    pub fn push_input(&mut self, text: TextInput<'_>) {
        match text {
            // ASCII is UTF-8; `from_utf8` only confirms it.
            TextInput::Ascii(bytes) => self.push_str(std::str::from_utf8(bytes).unwrap_or("")),
            TextInput::Utf8(text) => self.push_str(text),
            TextInput::CodePoints(code_points) => {
                for &cp in code_points {
                    if self.cut {
                        break;
                    }
                    let mut buffer = [0u8; 4];
                    self.push_str(char::from_u32(cp).unwrap_or('\u{fffd}').encode_utf8(&mut buffer));
                }
            }
        }
    }

    /// The text kept, its whitespace runs read as one space, `…` where text was left out.
    pub fn shown(&self) -> String {
        let kept = self.bytes.get(..usize::from(self.len)).unwrap_or(&[]);
        let text = String::from_utf8_lossy(kept);
        let mut shown = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if self.cut {
            shown.push('…');
        }
        shown
    }
}

/// The response being recorded: its features so far.
#[derive(Clone, Copy, Debug)]
struct ResponseDraft {
    features: TextFeatures,
    sketch: Sketch,
    seen: SeenValues,
    preview: Preview,
}

impl ResponseDraft {
    fn new() -> Self {
        ResponseDraft {
            features: TextFeatures::new(SKETCH_ROOT),
            sketch: Sketch::default(),
            seen: SeenValues::EMPTY,
            preview: Preview::default(),
        }
    }
}

/// What the argument rules and the descriptions keep of the newest action (allocated with the
/// first action when a rule compares arguments or descriptions name actions).
#[derive(Clone, Copy, Debug, Default)]
struct ArgumentState {
    /// Sketch of its arguments.
    sketch: Sketch,
    /// Its first string argument.
    preview: Preview,
    /// Its [`Action::failure`].
    failure: u64,
}

/// What the repeated-response rule keeps (allocated with the first response).
#[derive(Clone, Copy, Debug)]
struct ResponseState {
    /// The response being recorded (`output_open`), or the last one.
    draft: ResponseDraft,
    last: Option<LastResponse>,
    /// Trailing complete responses each alike to the one before.
    run: u64,
}

/// The newest complete response, as the next one is compared with it.
#[derive(Clone, Copy, Debug)]
struct LastResponse {
    sketch: Sketch,
    preview: Preview,
    /// `total_actions` when it was complete: an empty response with an action after it only
    /// carried a tool call.
    actions_at: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SessionStats {
    pub total_actions: u64,
    pub successful_actions: u64,
    pub failed_actions: u64,
    pub loop_events: u64,
    pub recovery_attempts: u64,
    pub progress_markers: u64,
    pub current_backoff: f64,
}

#[derive(Clone, Copy, Debug)]
struct PlanVisit {
    count: u64,
    /// `progress_markers` when the run of visits started: a later marker restarts it.
    markers_at_first_visit: u64,
}

#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    history: Ring<ActionRecord>,
    /// Trailing run lengths ending at the newest action.
    identical_run: u64,
    similar_run: u64,
    failure_run: u64,
    same_result_run: u64,
    /// `period_runs[p]`: trailing actions equal (identity and result) to the one `p` before.
    period_runs: Vec<u64>,
    /// Number of actions recorded when the newest progress marker was recorded.
    last_marker_at: Option<u64>,
    plan_visits: HashMap<u64, PlanVisit>,
    plan_order: VecDeque<u64>,
    last_plan: Option<u64>,
    started_at: Option<f64>,
    stats: SessionStats,
    /// Loop type seen at the last evaluation, to count one event per episode.
    last_type: Option<LoopType>,
    /// Chant detector over the current (or last) response; its verdict stands until the
    /// next response starts. Built with the first response: most sessions of a gateway
    /// record none, and the detector is a third of a session's size.
    output: Option<Box<Chant<u32>>>,
    /// Its hash key, drawn with the session (a snapshot saves it, output or not).
    output_key: HashKey,
    /// A response is being streamed (`record_output_chunk` since the last `end_response`).
    output_open: bool,
    /// The last action types by name, for events.
    recent_types: RecentNames,
    /// Trailing actions each alike to the one before (same type, arguments similar).
    alike_run: u64,
    /// Trailing failed actions each alike to the one before and failing with its result.
    alike_failure_run: u64,
    /// The newest action's argument sketch and first string argument.
    arguments: Option<Box<ArgumentState>>,
    /// The responses' sketches and the repeated-response run.
    responses: Option<Box<ResponseState>>,
    /// The newest action's policy thresholds ([`Action::limits`]).
    limits: Option<ActionLimits>,
}

impl Session {
    pub fn new(config: SessionConfig) -> Self {
        let config = clamp(config);
        // The checks run on counters; the ring only serves the cycle checks, which look back
        // at most `max_cycle_period` actions. So memory does not depend on the thresholds.
        let capacity = config.max_cycle_period + 1;
        let period_slots = config.max_cycle_period as usize + 1;
        let current_backoff = config.initial_backoff;
        Session {
            history: Ring::new(capacity as usize),
            identical_run: 0,
            similar_run: 0,
            failure_run: 0,
            same_result_run: 0,
            period_runs: vec![0; period_slots],
            last_marker_at: None,
            plan_visits: HashMap::new(),
            plan_order: VecDeque::new(),
            last_plan: None,
            started_at: None,
            stats: SessionStats {
                current_backoff,
                ..SessionStats::default()
            },
            last_type: None,
            output: None,
            output_key: HashKey::random(),
            output_open: false,
            recent_types: RecentNames::new(RECENT_TYPES),
            alike_run: 0,
            alike_failure_run: 0,
            arguments: None,
            responses: None,
            limits: None,
            config,
        }
    }

    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Ring capacity (exposed so tests can check the bound).
    pub fn history_capacity(&self) -> usize {
        self.history.capacity()
    }

    /// Clear everything and start the session clock at `now`.
    pub fn start(&mut self, now: f64) {
        *self = Session::new(self.config.clone());
        self.started_at = Some(now);
    }

    /// Note the name of the newest action's type (`kind` is its digest), for events.
    /// `name` is called only for a name not known yet (converting it costs more than the rest).
    pub fn note_action_type<S: AsRef<str>>(&mut self, kind: u64, name: impl FnOnce() -> S) {
        self.recent_types.push_with(kind, name);
    }

    /// The chant found in the current (or last) response, if any.
    fn output_event(&self) -> Option<&ChantEvent<u32>> {
        self.output.as_ref().and_then(|output| output.event())
    }

    /// The last [`RECENT_TYPES`] action types noted, oldest first.
    pub fn recent_action_types(&self) -> Vec<&str> {
        self.recent_types.oldest_first()
    }

    /// Record one action. `duration` above `max_time_per_action` counts as a failure.
    #[inline]
    pub fn record_action(&mut self, action: &Action<'_>) {
        let &Action {
            identity,
            kind,
            result,
            success,
            duration,
            ..
        } = action;
        let failed = !success || duration > self.config.max_time_per_action;
        let record = ActionRecord {
            identity,
            kind,
            result,
            failed,
        };
        let previous = self.history.back(0).copied();
        let extend = |run: u64, same: bool| if same { run.saturating_add(1) } else { 1 };
        self.identical_run = extend(self.identical_run, previous.is_some_and(|p| p.identity == identity));
        self.similar_run = extend(self.similar_run, previous.is_some_and(|p| p.kind == kind));
        self.same_result_run = extend(self.same_result_run, previous.is_some_and(|p| p.result == result));
        self.failure_run = if failed { self.failure_run.saturating_add(1) } else { 0 };
        // The same identity is the same canonical arguments: alike without comparing, and
        // nothing new to keep of them.
        let repeated = previous.is_some_and(|p| p.identity == identity);
        if self.config.names_actions() {
            let kept = self.arguments.get_or_insert_with(Box::default);
            if self.config.compares_arguments() {
                let alike = repeated
                    || previous.is_some_and(|p| {
                        p.kind == kind && kept.sketch.similarity(action.arguments) >= self.config.similarity_threshold
                    });
                self.alike_run = extend(self.alike_run, alike);
                let same_failure = alike && previous.is_some_and(|p| p.failed) && kept.failure == action.failure;
                self.alike_failure_run = match (failed, same_failure) {
                    (false, _) => 0,
                    (true, true) => self.alike_failure_run.saturating_add(1),
                    (true, false) => 1,
                };
                if !repeated {
                    kept.sketch.assign(action.arguments);
                }
                kept.failure = action.failure;
            }
            if !repeated {
                kept.preview.set(action.preview);
            }
        }
        for period in 2..self.period_runs.len() {
            let repeats = self
                .history
                .back(period - 1)
                .is_some_and(|old| old.identity == identity && old.result == result);
            self.period_runs[period] = if repeats {
                self.period_runs[period].saturating_add(1)
            } else {
                0
            };
        }
        self.history.push(record);
        self.limits = action.limits;
        self.stats.total_actions += 1;
        if failed {
            self.stats.failed_actions += 1;
        } else {
            self.stats.successful_actions += 1;
        }
    }

    /// Record one piece of the response being streamed; windows span pieces of one
    /// response. The first piece after `end_response` starts a new response.
    pub fn record_output_chunk(&mut self, text: TextInput<'_>) {
        let responses = self.responses.get_or_insert_with(|| {
            Box::new(ResponseState {
                draft: ResponseDraft::new(),
                last: None,
                run: 0,
            })
        });
        let (config, key) = (&self.config, self.output_key);
        let output = self
            .output
            .get_or_insert_with(|| Box::new(Chant::with_key(config.chant_config(), key)));
        if !self.output_open {
            output.reset();
            self.output_open = true;
            responses.draft = ResponseDraft::new();
        }
        output.feed_text(text);
        let draft = &mut responses.draft;
        let mut sink = CachedSketch {
            sketch: &mut draft.sketch,
            seen: &mut draft.seen,
        };
        match text {
            TextInput::Ascii(bytes) => draft.features.feed(bytes, &mut sink),
            TextInput::Utf8(text) => draft.features.feed(text.as_bytes(), &mut sink),
            TextInput::CodePoints(code_points) => draft.features.feed_code_points(code_points, &mut sink),
        }
        draft.preview.push_input(text);
    }

    /// The streamed response is complete: its chant verdict stands until the next one
    /// starts, and it is compared with the response before it.
    pub fn end_response(&mut self) {
        if !self.output_open {
            return;
        }
        self.output_open = false;
        let Some(responses) = self.responses.as_deref_mut() else {
            return;
        };
        let draft = &mut responses.draft;
        draft.features.finish(&mut CachedSketch {
            sketch: &mut draft.sketch,
            seen: &mut draft.seen,
        });
        let (sketch, total) = (draft.sketch, self.stats.total_actions);
        let alike = responses.last.is_some_and(|last| {
            if sketch.is_empty() || last.sketch.is_empty() {
                // No words: alike only to another such response with no action between (an
                // empty message that carried a tool call is no answer).
                sketch.is_empty() && last.sketch.is_empty() && last.actions_at == total
            } else {
                last.sketch.similarity(&sketch) >= self.config.similarity_threshold
            }
        });
        responses.run = if alike { responses.run.saturating_add(1) } else { 1 };
        responses.last = Some(LastResponse {
            sketch,
            preview: draft.preview,
            actions_at: total,
        });
    }

    /// Record one whole response (no window spans two responses).
    pub fn record_response(&mut self, text: TextInput<'_>) {
        self.end_response();
        self.record_output_chunk(text);
        self.end_response();
    }

    pub fn mark_progress(&mut self) {
        self.last_marker_at = Some(self.stats.total_actions);
        self.stats.progress_markers += 1;
    }

    /// Record a plan state's digest (CIRCULAR_PLAN by revisits).
    pub fn record_plan(&mut self, state: u64) {
        let markers = self.stats.progress_markers;
        match self.plan_visits.get_mut(&state) {
            Some(visit) if visit.markers_at_first_visit == markers => {
                visit.count = visit.count.saturating_add(1);
            }
            Some(visit) => {
                *visit = PlanVisit {
                    count: 1,
                    markers_at_first_visit: markers,
                };
            }
            None => {
                if self.plan_order.len() >= PLAN_STATES_CAP {
                    if let Some(oldest) = self.plan_order.pop_front() {
                        self.plan_visits.remove(&oldest);
                    }
                }
                self.plan_order.push_back(state);
                self.plan_visits.insert(
                    state,
                    PlanVisit {
                        count: 1,
                        markers_at_first_visit: markers,
                    },
                );
            }
        }
        self.last_plan = Some(state);
    }

    /// The first check that holds, in the documented precedence, at time `now`.
    #[inline]
    pub fn finding(&self, now: f64) -> Option<Finding> {
        self.finding_at(|| now)
    }

    /// [`Session::finding`] with the time read from `now` only when a check needs it (the
    /// time limit, reached only when no action rule holds and the session clock runs).
    #[inline]
    pub fn finding_at(&self, now: impl FnOnce() -> f64) -> Option<Finding> {
        let total = self.stats.total_actions;
        let c = &self.config;
        if total >= 2 {
            let t = self.thresholds();
            // A run never exceeds the number of actions, so "the last N" always exist here.
            let alike_same_result = self.alike_run.min(self.same_result_run);
            if self.identical_run >= t.identical {
                return Some(Finding::IdenticalAction);
            }
            if c.similar_by_arguments {
                if alike_same_result >= t.similar {
                    return Some(Finding::SimilarArguments);
                }
            } else if self.similar_run >= t.similar {
                return Some(Finding::SimilarAction);
            }
            if c.failures_by_arguments {
                if self.alike_failure_run >= t.failures {
                    return Some(Finding::RetryStorm);
                }
            } else if self.failure_run >= t.failures {
                return Some(Finding::RepeatedFailure);
            }
            let n = t.no_progress;
            if c.no_progress_by_arguments {
                if alike_same_result >= n && !self.marker_since(total - n) {
                    return Some(Finding::AlikeNoProgress);
                }
            } else if self.same_result_run >= n && !self.marker_since(total - n) {
                return Some(Finding::NoProgress);
            }
            if c.detect_cycles && (self.action_cycle().is_some() || self.plan_cycle()) {
                return Some(Finding::CircularPlan);
            }
        }
        if self.started_at.is_some_and(|start| now() - start > c.max_total_time) {
            return Some(Finding::ResourceExhaustion);
        }
        // Content chanting and repeated responses need no recorded actions.
        if self.output_event().is_some() {
            return Some(Finding::RepeatedOutput);
        }
        if self
            .responses
            .as_ref()
            .is_some_and(|r| r.run >= c.max_repeated_responses)
        {
            return Some(Finding::RepeatedResponse);
        }
        None
    }

    /// The action checks' thresholds: the newest action's policy's, else the config's.
    #[inline]
    fn thresholds(&self) -> ActionLimits {
        self.limits.unwrap_or(ActionLimits {
            identical: self.config.max_identical_actions,
            similar: self.config.max_similar_actions,
            failures: self.config.max_consecutive_failures,
            no_progress: self.config.max_no_progress_steps,
        })
    }

    /// What `finding` found, in words: which rule fired and why. Upstream's rules keep its
    /// sentences (naming what repeated only with `detailed_descriptions`); doomloop's own
    /// always name the repeated action or response.
    pub fn describe(&self, finding: Finding) -> String {
        let c = &self.config;
        // The thresholds a sentence quotes are the ones the check used.
        let t = self.thresholds();
        let sentence = finding.upstream_sentence(&SessionConfig {
            max_identical_actions: t.identical,
            max_similar_actions: t.similar,
            max_consecutive_failures: t.failures,
            max_no_progress_steps: t.no_progress,
            ..c.clone()
        });
        let own = matches!(
            finding,
            Finding::SimilarArguments | Finding::RetryStorm | Finding::AlikeNoProgress | Finding::RepeatedResponse
        );
        if !own && !c.detailed_descriptions {
            return sentence;
        }
        match finding {
            Finding::IdenticalAction
            | Finding::RepeatedFailure
            | Finding::NoProgress
            | Finding::SimilarArguments
            | Finding::RetryStorm
            | Finding::AlikeNoProgress => format!("{sentence}: {}", self.action_subject()),
            Finding::SimilarAction => format!("{sentence}: {}", self.newest_type()),
            Finding::CircularPlan => match self.action_cycle() {
                Some(period) => format!(
                    "{sentence}: {period} actions repeated {} times, the last {}",
                    c.min_cycle_repeats,
                    self.action_subject()
                ),
                None => format!("{sentence}: a plan state visited {} times", c.min_cycle_repeats),
            },
            Finding::ResourceExhaustion => sentence,
            Finding::RepeatedOutput => match self.output_event() {
                Some(event) => {
                    let window: String = event
                        .window
                        .iter()
                        .map(|&cp| char::from_u32(cp).unwrap_or('\u{fffd}'))
                        .collect();
                    let mut preview = Preview::new(&window);
                    preview.cut |= event.period.is_some_and(|p| p > window.chars().count() as u64);
                    format!("{sentence}: \"{}\"", preview.shown())
                }
                None => sentence,
            },
            Finding::RepeatedResponse => match self.responses.as_ref().and_then(|r| r.last) {
                Some(last) if last.sketch.is_empty() => format!(
                    "Empty response repeated {} times in a row with no action between",
                    c.max_repeated_responses
                ),
                Some(last) => format!("{sentence}: \"{}\"", last.preview.shown()),
                None => sentence,
            },
        }
    }

    /// The newest action: its type, and its first string argument in parentheses.
    fn action_subject(&self) -> String {
        let preview = self
            .arguments
            .as_ref()
            .map_or_else(String::new, |kept| kept.preview.shown());
        if preview.is_empty() {
            self.newest_type()
        } else {
            format!("{}({preview})", self.newest_type())
        }
    }

    fn newest_type(&self) -> String {
        self.recent_types
            .oldest_first()
            .last()
            .map_or_else(String::new, |name| (*name).to_owned())
    }

    /// Evaluate at `now` and count a loop event when a new episode starts (the type changes
    /// from none, or to another type). Returns the finding and whether an episode started.
    pub fn observe(&mut self, now: f64) -> (Option<Finding>, bool) {
        self.observe_at(|| now)
    }

    /// [`Session::observe`] reading the time from `now` only when a check needs it.
    #[inline]
    pub fn observe_at(&mut self, now: impl FnOnce() -> f64) -> (Option<Finding>, bool) {
        let finding = self.finding_at(now);
        let loop_type = finding.map(Finding::loop_type);
        let new_episode = loop_type.is_some() && loop_type != self.last_type;
        if new_episode {
            self.stats.loop_events += 1;
        }
        self.last_type = loop_type;
        (finding, new_episode)
    }

    /// The recovery ladder for a loop of `loop_type` (None: no loop).
    pub fn recovery(&self, loop_type: Option<LoopType>) -> Recovery {
        let Some(loop_type) = loop_type else {
            return Recovery::Continue;
        };
        let attempts = self.stats.recovery_attempts;
        if attempts >= self.config.max_recovery_attempts || loop_type == LoopType::ResourceExhaustion {
            Recovery::Abort
        } else if attempts == 0 {
            Recovery::RetryDifferent
        } else if attempts == 1 && self.config.escalate_on_loop {
            Recovery::EscalateModel
        } else {
            Recovery::RequestHelp
        }
    }

    /// Count one recovery attempt; true while more attempts are allowed.
    pub fn increment_recovery(&mut self) -> bool {
        self.stats.recovery_attempts = self.stats.recovery_attempts.saturating_add(1);
        self.stats.recovery_attempts < self.config.max_recovery_attempts
    }

    /// The delay to wait now; the next one grows by the multiplier, capped at `max_backoff`.
    pub fn next_backoff(&mut self) -> f64 {
        let delay = self.stats.current_backoff.min(self.config.max_backoff);
        self.stats.current_backoff =
            (self.stats.current_backoff * self.config.backoff_multiplier).min(self.config.max_backoff);
        delay
    }

    pub fn reset_backoff(&mut self) {
        self.stats.current_backoff = self.config.initial_backoff;
    }

    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    pub fn elapsed(&self, now: f64) -> f64 {
        self.started_at.map_or(0.0, |start| now - start)
    }

    /// Was a progress marker recorded after the first `boundary` actions?
    fn marker_since(&self, boundary: u64) -> bool {
        self.last_marker_at.is_some_and(|at| at >= boundary)
    }

    /// The shortest period `p` (2..=max period) whose block the newest `p * min_cycle_repeats`
    /// actions repeat, holding at least two identities, with unchanged results and no marker
    /// since the span.
    fn action_cycle(&self) -> Option<usize> {
        let total = self.stats.total_actions;
        let repeats = self.config.min_cycle_repeats;
        (2..self.period_runs.len()).find(|&period| {
            let p = period as u64;
            let span = p * repeats;
            total >= span
                && self.period_runs[period] >= p * (repeats - 1)
                && self.block_has_two_identities(period)
                && !self.marker_since(total - span)
        })
    }

    fn block_has_two_identities(&self, period: usize) -> bool {
        let mut block = self.history.iter_newest_first().take(period);
        let Some(first) = block.next() else {
            return false;
        };
        block.any(|record| record.identity != first.identity)
    }

    /// The newest plan state has been visited `min_cycle_repeats` times with no marker since
    /// its first visit.
    fn plan_cycle(&self) -> bool {
        self.last_plan
            .and_then(|state| self.plan_visits.get(&state))
            .is_some_and(|visit| {
                visit.count >= self.config.min_cycle_repeats
                    && visit.markers_at_first_visit == self.stats.progress_markers
            })
    }
}

fn clamp(mut config: SessionConfig) -> SessionConfig {
    for threshold in [
        &mut config.max_identical_actions,
        &mut config.max_similar_actions,
        &mut config.max_consecutive_failures,
        &mut config.max_no_progress_steps,
    ] {
        *threshold = (*threshold).max(1);
    }
    config.max_cycle_period = config.max_cycle_period.clamp(2, MAX_CYCLE_PERIOD);
    config.min_cycle_repeats = config.min_cycle_repeats.clamp(2, MAX_CYCLE_REPEATS);
    config.max_repeated_responses = config.max_repeated_responses.max(2);
    if config.similarity_threshold.is_nan() {
        config.similarity_threshold = 1.0;
    }
    config.similarity_threshold = config.similarity_threshold.clamp(0.0, 1.0);
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_in_descriptions_read_as_python_shows_them() {
        for (value, shown) in [
            (300.0, "300.0"),
            (-0.0, "-0.0"),
            (0.5, "0.5"),
            (123.456, "123.456"),
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(PyFloat(value).to_string(), shown);
        }
        let config = SessionConfig {
            max_total_time: 30.0,
            ..SessionConfig::default()
        };
        assert_eq!(
            Session::new(config).describe(Finding::ResourceExhaustion),
            "Exceeded time limit of 30.0s"
        );
        assert_eq!(LoopType::NoProgress.name(), "no_progress");
        assert_eq!(Recovery::RetryDifferent.name(), "retry_different");
    }

    #[test]
    fn a_snapshot_resealed_with_a_later_clock_is_the_later_snapshot() {
        use crate::snapshot::{resealed_with_f64, sealed_checksum};
        let values = SESSION.defaults();
        let mut s = Session::new(SessionConfig::from_values(&values));
        let Some((fresh, None)) = s.snapshot(&values, 5.0) else {
            panic!("a session not started has no clock in its snapshot");
        };
        s.start(10.0);
        act(&mut s, 1, 2, 3, true);
        act(&mut s, 4, 2, 5, false);
        let (early, Some(at)) = s.snapshot(&values, 12.5).unwrap() else {
            panic!("a started session's snapshot has its clock");
        };
        let (late, clock_at) = s.snapshot(&values, 40.0).unwrap();
        assert_eq!(clock_at, Some(at));
        assert_ne!(early, late);
        assert_eq!(resealed_with_f64(&early, at, 30.0).unwrap(), late);
        assert_eq!(
            sealed_checksum(&late),
            Some(u64::from_le_bytes(late[late.len() - 8..].try_into().unwrap()))
        );
        // Restoring reads the clock where the snapshot wrote it.
        let (restored, _, restored_at) = Session::restore(&late, 100.0).unwrap();
        assert_eq!(restored_at, Some(at));
        assert_eq!(restored.elapsed(100.0), 30.0);
        assert!(Session::restore(&fresh, 0.0).unwrap().2.is_none());
        // Only an f64 wholly inside the body is replaced.
        for bad in [0, 3, late.len() - 8, late.len() - 12, usize::MAX - 4] {
            assert!(resealed_with_f64(&late, bad, 1.0).is_none(), "{bad}");
        }
        assert_eq!(sealed_checksum(b"DLSN"), None);
    }

    const T: f64 = 1000.0;

    fn session(config: SessionConfig) -> Session {
        let mut s = Session::new(config);
        s.start(T);
        s
    }

    fn act(s: &mut Session, identity: u64, kind: u64, result: u64, success: bool) {
        timed(s, identity, kind, result, success, 0.0);
    }

    fn timed(s: &mut Session, identity: u64, kind: u64, result: u64, success: bool, duration: f64) {
        s.record_action(&Action {
            identity,
            kind,
            result,
            failure: result,
            success,
            duration,
            arguments: &Sketch::default(),
            preview: "",
            limits: None,
        });
    }

    #[test]
    fn identical_actions_fire_after_threshold() {
        let mut s = session(SessionConfig::default());
        act(&mut s, 1, 1, 9, true);
        act(&mut s, 1, 1, 9, true);
        assert_eq!(s.finding(T), None);
        act(&mut s, 1, 1, 9, true);
        assert_eq!(s.finding(T), Some(Finding::IdenticalAction));
    }

    #[test]
    fn similar_actions_share_a_type() {
        let mut s = session(SessionConfig::default());
        for i in 0..5 {
            act(&mut s, 10 + i, 7, i, true);
        }
        assert_eq!(s.finding(T), Some(Finding::SimilarAction));
        assert_eq!(Finding::SimilarAction.loop_type(), LoopType::RepeatedAction);
    }

    #[test]
    fn failures_and_timeouts_count_as_failed() {
        let mut s = session(SessionConfig::default());
        act(&mut s, 1, 1, 1, false);
        timed(&mut s, 2, 2, 2, true, 61.0);
        assert_eq!(s.finding(T), None);
        act(&mut s, 3, 3, 3, false);
        assert_eq!(s.finding(T), Some(Finding::RepeatedFailure));
        assert_eq!(s.stats().failed_actions, 3);
        assert_eq!(s.stats().successful_actions, 0);
    }

    #[test]
    fn no_progress_respects_markers_by_record_order() {
        let mut s = session(SessionConfig::default());
        s.mark_progress();
        for i in 0..5 {
            act(&mut s, i, i, 42, true);
        }
        // The window is the whole history: the early marker still counts.
        assert_eq!(s.finding(T), None);
        act(&mut s, 5, 5, 42, true);
        assert_eq!(s.finding(T), Some(Finding::NoProgress));
        s.mark_progress();
        assert_eq!(s.finding(T), None);
    }

    #[test]
    fn abab_cycle_with_same_results_is_circular() {
        let mut s = session(SessionConfig::default());
        for _ in 0..3 {
            act(&mut s, 1, 1, 5, true);
            act(&mut s, 2, 2, 6, true);
        }
        assert_eq!(s.finding(T), Some(Finding::CircularPlan));
        let mut off = session(SessionConfig {
            detect_cycles: false,
            ..SessionConfig::default()
        });
        for _ in 0..3 {
            act(&mut off, 1, 1, 5, true);
            act(&mut off, 2, 2, 6, true);
        }
        assert_eq!(off.finding(T), None);
    }

    #[test]
    fn cycle_with_changing_results_is_work() {
        let mut s = session(SessionConfig::default());
        for i in 0..3 {
            act(&mut s, 1, 1, 5 + i, true);
            act(&mut s, 2, 2, 6, true);
        }
        assert_eq!(s.finding(T), None);
    }

    #[test]
    fn plan_state_revisits_are_circular_until_progress() {
        let mut s = session(SessionConfig::default());
        act(&mut s, 1, 1, 1, true);
        act(&mut s, 2, 2, 2, true);
        for state in [7, 8, 7, 8, 7] {
            s.record_plan(state);
        }
        assert_eq!(s.finding(T), Some(Finding::CircularPlan));
        s.mark_progress();
        assert_eq!(s.finding(T), None);
        s.record_plan(7);
        assert_eq!(s.finding(T), None);
    }

    #[test]
    fn time_limit_and_ladder() {
        let mut s = session(SessionConfig::default());
        assert_eq!(s.finding(T + 300.0), None);
        assert_eq!(s.finding(T + 300.5), Some(Finding::ResourceExhaustion));
        assert_eq!(s.recovery(Some(LoopType::ResourceExhaustion)), Recovery::Abort);
        assert_eq!(s.recovery(Some(LoopType::NoProgress)), Recovery::RetryDifferent);
        assert!(s.increment_recovery());
        assert_eq!(s.recovery(Some(LoopType::NoProgress)), Recovery::EscalateModel);
        assert!(!s.increment_recovery());
        assert_eq!(s.recovery(Some(LoopType::NoProgress)), Recovery::Abort);
        assert_eq!(s.recovery(None), Recovery::Continue);
    }

    #[test]
    fn one_event_per_episode() {
        let mut s = session(SessionConfig::default());
        for _ in 0..5 {
            act(&mut s, 1, 1, 1, true);
            s.observe(T);
        }
        assert_eq!(s.stats().loop_events, 1);
        act(&mut s, 2, 2, 2, true);
        assert_eq!(s.observe(T), (None, false));
        for _ in 0..3 {
            act(&mut s, 3, 3, 3, true);
            s.observe(T);
        }
        assert_eq!(s.stats().loop_events, 2);
    }

    #[test]
    fn backoff_is_capped() {
        let mut s = session(SessionConfig {
            initial_backoff: 8.0,
            max_backoff: 30.0,
            ..SessionConfig::default()
        });
        let delays: Vec<f64> = (0..4).map(|_| s.next_backoff()).collect();
        assert_eq!(delays, vec![8.0, 16.0, 30.0, 30.0]);
        assert_eq!(s.stats().current_backoff, 30.0);
        s.reset_backoff();
        assert_eq!(s.stats().current_backoff, 8.0);
    }

    fn chars(s: &str) -> TextInput<'_> {
        TextInput::Utf8(s)
    }

    #[test]
    fn repeated_output_needs_no_actions_and_lasts_until_the_next_response() {
        let mut s = session(SessionConfig::default());
        s.record_response(chars(&"spam and eggs ".repeat(60)));
        assert_eq!(s.finding(T), Some(Finding::RepeatedOutput));
        assert_eq!(Finding::RepeatedOutput as u8, 6);
        assert_eq!(Finding::RepeatedOutput.loop_type(), LoopType::RepeatedOutput);
        s.record_response(chars("A fresh, ordinary answer."));
        assert_eq!(s.finding(T), None);
    }

    #[test]
    fn windows_span_chunks_of_one_response_but_not_two_responses() {
        let piece = "la la land, ".repeat(8);
        let mut streamed = session(SessionConfig::default());
        for _ in 0..8 {
            streamed.record_output_chunk(chars(&piece));
        }
        assert_eq!(streamed.finding(T), Some(Finding::RepeatedOutput));
        streamed.end_response();
        assert_eq!(streamed.finding(T), Some(Finding::RepeatedOutput));
        streamed.record_output_chunk(chars("new"));
        assert_eq!(streamed.finding(T), None);

        // Eight separate responses: no chant (no window spans two responses), but the same
        // response eight times in a row, as upstream's chunk counts find it.
        let mut separate = session(SessionConfig::default());
        for _ in 0..7 {
            separate.record_response(chars(&piece));
        }
        assert_eq!(separate.finding(T), None);
        separate.record_response(chars(&piece));
        assert_eq!(separate.finding(T), Some(Finding::RepeatedResponse));
        assert!(separate.output_event().is_none());
    }

    #[test]
    fn other_loops_take_precedence_and_start_clears_output() {
        let mut s = session(SessionConfig::default());
        s.record_response(chars(&"spam and eggs ".repeat(60)));
        for _ in 0..3 {
            act(&mut s, 1, 1, 1, true);
        }
        assert_eq!(s.finding(T), Some(Finding::IdenticalAction));
        assert_eq!(s.finding(T + 301.0), Some(Finding::IdenticalAction));
        s.start(T);
        s.record_response(chars(&"spam and eggs ".repeat(60)));
        assert_eq!(s.finding(T + 301.0), Some(Finding::ResourceExhaustion));
        s.start(T);
        assert_eq!(s.finding(T), None);
    }

    #[test]
    fn output_tables_are_allocated_only_when_output_is_recorded() {
        let mut s = session(SessionConfig::default());
        for i in 0..10 {
            act(&mut s, i, i, i, true);
        }
        assert!(s.output.is_none());
        s.record_response(chars("Some answer."));
        assert!(s.output.as_ref().is_some_and(|o| o.heap_bytes() > 0));
        s.start(T);
        assert!(s.output.is_none());
    }

    /// The recommended profile's rules (thresholds as the defaults).
    fn by_arguments() -> SessionConfig {
        SessionConfig {
            similar_by_arguments: true,
            failures_by_arguments: true,
            no_progress_by_arguments: true,
            max_repeated_responses: 3,
            detailed_descriptions: true,
            ..SessionConfig::default()
        }
    }

    /// One `bash` action given its command line: identity from the text, kind 1.
    fn command(s: &mut Session, line: &str, result: u64, success: bool) {
        let sketch = crate::fingerprint::sketch_text(0xc0de, line.as_bytes());
        s.note_action_type(1, || "bash");
        s.record_action(&Action {
            identity: crate::fingerprint::hash_str(line.as_bytes()),
            kind: 1,
            result,
            failure: result,
            success,
            duration: 0.0,
            arguments: &sketch,
            preview: line,
            limits: None,
        });
    }

    #[test]
    fn similar_arguments_need_the_same_result() {
        let spellings = [
            "grep -rn 'parse_header' src",
            "grep -nr \"parse_header\" src/",
            "grep -r -n parse_header src",
            "grep  -n -r parse_header src/",
            "GREP -rn parse_header src",
        ];
        let mut s = session(by_arguments());
        for line in &spellings[..4] {
            command(&mut s, line, 7, true);
        }
        assert_eq!(s.finding(T), None);
        command(&mut s, spellings[4], 7, true);
        assert_eq!(s.finding(T), Some(Finding::SimilarArguments));
        assert_eq!(
            s.describe(Finding::SimilarArguments),
            "Similar actions repeated 5 times with the same result: bash(GREP -rn parse_header src)"
        );
        // The same spellings with changing results are exploration.
        let mut changing = session(by_arguments());
        for (i, line) in spellings.iter().enumerate() {
            command(&mut changing, line, i as u64, true);
        }
        assert_eq!(changing.finding(T), None);
        // Different searches with the same result are not alike either.
        let mut different = session(by_arguments());
        for word in ["parse_header", "load_config", "resolve_path", "Normalizer", "timedelta"] {
            command(&mut different, &format!("grep -rn {word} src"), 7, true);
        }
        assert_eq!(different.finding(T), None);
    }

    /// A failing `bash` action whose error is `error`, digested as the binding digests it.
    fn failing(s: &mut Session, line: &str, error: &str) {
        let sketch = crate::fingerprint::sketch_text(0xc0de, line.as_bytes());
        s.record_action(&Action {
            identity: crate::fingerprint::hash_str(line.as_bytes()),
            kind: 1,
            result: crate::fingerprint::hash_str(error.as_bytes()),
            failure: failure_digest(error.as_bytes(), b"", line.as_bytes()),
            success: false,
            duration: 0.0,
            arguments: &sketch,
            preview: line,
            limits: None,
        });
    }

    #[test]
    fn a_retry_storm_is_found_when_each_error_quotes_what_changed() {
        let mut s = session(by_arguments());
        for patch in 0..3 {
            failing(
                &mut s,
                &format!("pip install 'pkg==1.0.{patch}'"),
                &format!("ERROR: No matching distribution found for pkg==1.0.{patch}"),
            );
        }
        assert_eq!(s.finding(T), Some(Finding::RetryStorm));
        // A name the error echoes: masked as a word of the argument.
        let mut names = session(by_arguments());
        for name in ["parse_header", "parse_headers", "header_parse"] {
            failing(
                &mut names,
                &format!(
                    "cd /testbed && python -m pytest tests/test_api.py --tb=short -p no:cacheprovider -x -q -k {name}"
                ),
                &format!("ERROR: not found: tests/test_api.py::{name} (no match in any of [<Module test_api.py>])"),
            );
        }
        assert_eq!(names.finding(T), Some(Finding::RetryStorm));
        // Errors that differ in what the argument does not hold are different failures.
        let mut errors = session(by_arguments());
        for (patch, cause) in ["not found", "permission denied", "disk full"].iter().enumerate() {
            failing(
                &mut errors,
                &format!("pip install 'pkg==1.0.{patch}'"),
                &format!("ERROR: pkg==1.0.{patch}: {cause}"),
            );
        }
        assert_eq!(errors.finding(T), None);
    }

    #[test]
    fn the_newest_actions_policy_sets_the_action_checks_thresholds() {
        let room = ActionLimits {
            identical: 6,
            similar: 8,
            failures: 8,
            no_progress: 8,
        };
        let mut s = session(SessionConfig::default());
        let sketch = Sketch::EMPTY;
        let poll = |s: &mut Session, limits| {
            s.record_action(&Action {
                identity: 7,
                kind: 1,
                result: 2,
                failure: 2,
                success: true,
                duration: 0.0,
                arguments: &sketch,
                preview: "",
                limits,
            })
        };
        for _ in 0..5 {
            poll(&mut s, Some(room));
        }
        assert_eq!(s.finding(T), None);
        poll(&mut s, Some(room));
        assert_eq!(s.finding(T), Some(Finding::IdenticalAction));
        assert_eq!(s.describe(Finding::IdenticalAction), "Same action repeated 6 times");
        // The same calls without the policy: the config's threshold of 3.
        let mut plain = session(SessionConfig::default());
        for _ in 0..3 {
            poll(&mut plain, None);
        }
        assert_eq!(plain.finding(T), Some(Finding::IdenticalAction));
    }

    #[test]
    fn a_retry_storm_is_alike_failures_with_the_same_result() {
        let mut s = session(by_arguments());
        for case in 17..19 {
            command(&mut s, &format!("python reproduce.py --case {case}"), 9, false);
        }
        assert_eq!(s.finding(T), None);
        command(&mut s, "python reproduce.py --case 19", 9, false);
        assert_eq!(s.finding(T), Some(Finding::RetryStorm));
        assert_eq!(Finding::RetryStorm.loop_type(), LoopType::RepeatedFailure);
        // Three searches that find nothing (a failing exit status, one empty result).
        let mut searches = session(by_arguments());
        for pattern in ["class Parser", "def load_all", "import yaml"] {
            command(&mut searches, &format!("grep -n '{pattern}' src/core.py"), 3, false);
        }
        assert_eq!(searches.finding(T), None);
        // Alike failing commands with a different error each time are not a storm.
        let mut errors = session(by_arguments());
        for case in 0..3 {
            command(
                &mut errors,
                &format!("python reproduce.py --case {case}"),
                100 + case,
                false,
            );
        }
        assert_eq!(errors.finding(T), None);
        // A success in between ends the storm.
        let mut broken = session(by_arguments());
        command(&mut broken, "make test", 9, false);
        command(&mut broken, "make test", 9, false);
        command(&mut broken, "make tests", 9, true);
        command(&mut broken, "make test", 9, false);
        assert_eq!(broken.alike_failure_run, 1);
    }

    #[test]
    fn no_progress_by_arguments_needs_alike_actions() {
        let config = SessionConfig {
            similar_by_arguments: false,
            no_progress_by_arguments: true,
            max_similar_actions: u64::MAX,
            ..SessionConfig::default()
        };
        // Different edits that each print nothing.
        let mut edits = session(config.clone());
        for line in [
            "sed -i 's/a/b/' x.py",
            "cp x.py y.py",
            "echo 1 >> z.py",
            "mv y.py w.py",
            "touch v.py",
        ] {
            command(&mut edits, line, 0, true);
        }
        assert_eq!(edits.finding(T), None);
        let mut polls = session(config);
        for attempt in 1..=5 {
            command(
                &mut polls,
                &format!("curl -s localhost:8000/status?try={attempt}"),
                4,
                true,
            );
        }
        assert_eq!(polls.finding(T), Some(Finding::AlikeNoProgress));
        polls.mark_progress();
        assert_eq!(polls.finding(T), None);
    }

    #[test]
    fn upstream_rules_are_replaced_only_where_switched() {
        let mut s = session(SessionConfig::default());
        for word in ["a", "b", "c", "d", "e"] {
            command(&mut s, &format!("grep {word} src"), 1, true);
        }
        assert_eq!(s.finding(T), Some(Finding::SimilarAction));
        // Upstream's wording, unless descriptions are detailed.
        assert_eq!(s.describe(Finding::SimilarAction), "Same action type repeated 5 times");
        assert!(
            s.arguments.is_none(),
            "nothing of the arguments is kept when no rule reads it"
        );
        let mut detailed = session(SessionConfig {
            detailed_descriptions: true,
            ..SessionConfig::default()
        });
        for _ in 0..3 {
            command(&mut detailed, "ls   -la\n  src", 1, true);
        }
        assert_eq!(
            detailed.describe(Finding::IdenticalAction),
            "Same action repeated 3 times: bash(ls -la src)"
        );
    }

    #[test]
    fn alike_responses_in_a_row_are_repeated_output() {
        let answer = "I checked the parser: it drops the trailing newline before splitting the header.";
        let mut s = session(SessionConfig::default());
        for _ in 0..7 {
            s.record_response(chars(answer));
        }
        assert_eq!(s.finding(T), None);
        s.record_response(chars(answer));
        assert_eq!(s.finding(T), Some(Finding::RepeatedResponse));
        assert_eq!(
            s.describe(Finding::RepeatedResponse),
            "Same response repeated 8 times in a row: \"I checked the parser: it drops the trailing newline before s…\""
        );
        // Case, spacing and the final full stop do not matter; another answer ends the run.
        let mut nudged = session(by_arguments());
        nudged.record_response(chars(answer));
        nudged.record_response(chars(&format!("{answer} ")));
        nudged.record_response(chars(&answer.to_lowercase().replace('.', "")));
        assert_eq!(nudged.finding(T), Some(Finding::RepeatedResponse));
        nudged.record_response(chars("Now let me run the test again:"));
        assert_eq!(nudged.finding(T), None);
    }

    #[test]
    fn empty_responses_repeat_only_with_no_action_between() {
        let mut carrying = session(by_arguments());
        for i in 0..10 {
            carrying.record_response(chars(""));
            command(&mut carrying, &format!("cat file{i}.py"), i, true);
        }
        assert_eq!(carrying.finding(T), None);
        let mut blank = session(by_arguments());
        for text in ["", " \n", "\t.", "  "] {
            blank.record_response(chars(text));
        }
        assert_eq!(blank.finding(T), Some(Finding::RepeatedResponse));
        assert_eq!(
            blank.describe(Finding::RepeatedResponse),
            "Empty response repeated 3 times in a row with no action between"
        );
    }

    #[test]
    fn a_streamed_response_is_compared_when_it_ends() {
        let mut s = session(by_arguments());
        let answer = "The fix is in parse_header; the tests pass now.";
        for _ in 0..2 {
            s.record_response(chars(answer));
        }
        for piece in answer.as_bytes().chunks(5) {
            s.record_output_chunk(TextInput::Ascii(piece));
        }
        assert_eq!(s.finding(T), None, "not before it ends");
        s.end_response();
        assert_eq!(s.finding(T), Some(Finding::RepeatedResponse));
        s.end_response();
        assert_eq!(
            s.responses.as_ref().map(|r| r.run),
            Some(3),
            "a second end is no response"
        );
        s.start(T);
        assert_eq!(s.finding(T), None);
        assert!(s.responses.is_none());
    }

    #[test]
    fn previews_keep_whole_characters_and_show_one_space_per_run() {
        let mut preview = Preview::new(&"é".repeat(40));
        assert_eq!(preview.shown(), format!("{}…", "é".repeat(30)));
        preview.set("  a \n\t b  ");
        assert_eq!(preview.shown(), "a b");
        let mut pieces = Preview::default();
        pieces.push_input(TextInput::Ascii(b"Let me "));
        pieces.push_input(TextInput::CodePoints(&[0x63, 0x68, 0xd800, 0x6b]));
        assert_eq!(pieces.shown(), "Let me ch\u{fffd}k");
    }

    #[test]
    fn huge_thresholds_allocate_nothing_extra() {
        let s = session(SessionConfig {
            max_identical_actions: u64::MAX,
            max_similar_actions: u64::MAX,
            max_consecutive_failures: u64::MAX,
            max_no_progress_steps: u64::MAX,
            ..SessionConfig::default()
        });
        assert_eq!(s.history_capacity(), 5);
        assert_eq!(s.finding(T), None);
    }

    #[test]
    // 100,000 recorded actions: many minutes under Miri.
    #[cfg_attr(miri, ignore)]
    fn memory_is_bounded() {
        let mut s = session(SessionConfig::default());
        for i in 0..100_000u64 {
            act(&mut s, i % 7, i % 3, i, i % 2 == 0);
        }
        assert_eq!(s.history_capacity(), 5);
        assert_eq!(s.stats().total_actions, 100_000);
        for state in 0..(PLAN_STATES_CAP as u64 + 10) {
            s.record_plan(state);
        }
        assert_eq!(s.plan_visits.len(), PLAN_STATES_CAP);
    }
}
