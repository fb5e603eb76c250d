//! Tool-call loop detection (the `tools.loopDetection` model) and the post-compaction guard.
//!
//! One [`ToolLoopSession`] is one agent session: a ring of fixed-size call records (digests and
//! flags only, plus an opaque payload the caller uses for names), the warning buckets and the
//! guard window. All comparisons are on 64-bit digests; the binding layer computes them (tool
//! name, canonical params, normalised result) and renders messages. The rules follow the
//! project's tool-loop spec; see docs/tool-loop.md for where doomloop deliberately differs.

use std::collections::VecDeque;

use crate::fingerprint::hash_two;
use crate::names::NameTable;
use crate::ring::Ring;
use crate::settings::{Value, TOOL_LOOP};

/// OpenClaw's warning bucket width: a key is re-emitted when `count / 10` grows.
pub const WARNING_BUCKET_SIZE: u32 = 10;
/// Warning keys remembered per session, evicted in order of first insertion.
pub const MAX_WARNING_KEYS: usize = 256;

const HAS_RUN: u8 = 1;
const HAS_CALL_ID: u8 = 2;
const HAS_RESULT: u8 = 4;
const HAS_UNKNOWN: u8 = 8;

/// Resolved thresholds and switches (the binding layer applies the config rules first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopConfig {
    pub history_size: usize,
    pub warning: u32,
    pub critical: u32,
    pub unknown_tool: u32,
    pub global: u32,
    pub generic_repeat: bool,
    pub known_poll: bool,
    pub ping_pong: bool,
    /// Results that are mappings with neither `content` nor `details` hash by their canonical
    /// value (OpenClaw hashes every such mapping alike); read by the result normalisation.
    pub hash_plain_results: bool,
    /// Run the detectors (`enabled: true`).
    pub detect: bool,
    /// Record calls before execution and feed the guard (`enabled` not explicitly false).
    pub record_calls: bool,
    pub guard_enabled: bool,
    pub guard_window: u32,
}

impl Default for LoopConfig {
    /// The settings table's defaults (a config built in Python).
    fn default() -> Self {
        LoopConfig::from_values(&TOOL_LOOP.defaults()).0
    }
}

impl LoopConfig {
    /// The run-time settings from checked `settings::TOOL_LOOP` values (in the schema's
    /// order), resolved as OpenClaw's run time resolves them: `critical` is raised to
    /// `warning + 1` and `global` to `critical + 1` where needed (each fix described in the
    /// returned list, for the caller to log); `enabled` true detects, unset records without
    /// detecting, false also turns the guard off.
    pub fn from_values(values: &[Value]) -> (LoopConfig, Vec<String>) {
        let get = |name: &str| {
            TOOL_LOOP
                .index(name)
                .and_then(|i| values.get(i).copied().or(Some(TOOL_LOOP.settings[i].default)))
                .unwrap_or(Value::Unset)
        };
        let switch = |name: &str| get(name).switch().unwrap_or(false);
        // Checked values are within `MAX_THRESHOLD` (`i32::MAX`), so `+ 1` fits a u32.
        let threshold = |name: &str| u32::try_from(get(name).count()).unwrap_or(i32::MAX as u32);
        let warning = threshold("warning_threshold");
        let mut critical = threshold("critical_threshold");
        let mut global = threshold("global_circuit_breaker_threshold");
        let mut fixes = Vec::new();
        if critical <= warning {
            fixes.push(format!(
                "critical_threshold {critical} <= warning_threshold {warning}; using {}",
                warning + 1
            ));
            critical = warning + 1;
        }
        if global <= critical {
            fixes.push(format!(
                "global_circuit_breaker_threshold {global} <= critical_threshold {critical}; using {}",
                critical + 1
            ));
            global = critical + 1;
        }
        let enabled = get("enabled").switch();
        let config = LoopConfig {
            history_size: usize::try_from(get("history_size").count()).unwrap_or(1),
            warning,
            critical,
            unknown_tool: threshold("unknown_tool_threshold"),
            global,
            generic_repeat: switch("generic_repeat"),
            known_poll: switch("known_poll_no_progress"),
            ping_pong: switch("ping_pong"),
            hash_plain_results: switch("hash_plain_results"),
            detect: enabled == Some(true),
            record_calls: enabled != Some(false),
            guard_enabled: enabled != Some(false),
            guard_window: u32::try_from(get("post_compaction_window_size").count()).unwrap_or(1),
        };
        (config, fixes)
    }
}

/// The identity of one call: digests of the tool name and of `(tool, canonical params)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallKey {
    pub tool: u64,
    pub args: u64,
    pub run: Option<u64>,
    pub known_poll: bool,
}

/// What a finished call produced, as digests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub result: u64,
    /// Digest of the unknown-tool name the error text named, if any.
    pub unknown: Option<u64>,
}

/// One history entry. `payload` is the caller's (names for rendering); the rules only read
/// the digests and flags.
#[derive(Clone, Debug)]
pub struct Record<N> {
    tool: u64,
    args: u64,
    run: u64,
    call_id: u64,
    result: u64,
    unknown: u64,
    flags: u8,
    pub payload: N,
}

impl<N> Record<N> {
    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn in_run(&self, run: RunScope) -> bool {
        self.flags & HAS_RUN == run.flag && self.run == run.run
    }

    /// The same call in the same run; the args digest first, as most records are other calls.
    fn same_call(&self, key: &CallKey, run: RunScope) -> bool {
        self.args == key.args && self.tool == key.tool && self.in_run(run)
    }

    pub fn result(&self) -> Option<u64> {
        self.has(HAS_RESULT).then_some(self.result)
    }

    /// The digest of the tool name.
    pub fn tool(&self) -> u64 {
        self.tool
    }

    /// The digest of the unknown tool the error text named, if any.
    pub fn unknown_tool(&self) -> Option<u64> {
        self.has(HAS_UNKNOWN).then_some(self.unknown)
    }
}

/// A run id as records store it (absent: no flag and 0), so scoping a record is two plain
/// comparisons.
#[derive(Clone, Copy)]
struct RunScope {
    flag: u8,
    run: u64,
}

impl RunScope {
    fn of(run: Option<u64>) -> RunScope {
        match run {
            Some(run) => RunScope { flag: HAS_RUN, run },
            None => RunScope { flag: 0, run: 0 },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Warning,
    Critical,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detector {
    UnknownToolRepeat,
    GlobalCircuitBreaker,
    KnownPollNoProgress,
    PingPong,
    GenericRepeat,
}

impl Detector {
    pub fn name(self) -> &'static str {
        match self {
            Detector::UnknownToolRepeat => "unknown_tool_repeat",
            Detector::GlobalCircuitBreaker => "global_circuit_breaker",
            Detector::KnownPollNoProgress => "known_poll_no_progress",
            Detector::PingPong => "ping_pong",
            Detector::GenericRepeat => "generic_repeat",
        }
    }
}

/// A stuck verdict. `key` is the warning key's digest (buckets are keyed by it); `result` is
/// the streak's result hash and `other` the paired args identity (ping-pong) or unknown-tool
/// name digest, for rendering the key; `source_back` indexes (back from the newest) the record
/// whose payload names the paired tool or the unknown tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    pub detector: Detector,
    pub count: u32,
    pub key: u64,
    pub result: u64,
    pub other: u64,
    pub source_back: Option<usize>,
}

impl Finding {
    /// The verdict's message and warning key, as OpenClaw renders them, for a call to `tool`
    /// whose `(tool, params)` digest is `args`. The record the finding points back to
    /// (`source_back`) names the paired tool of a ping-pong, or the unknown tool its error
    /// named.
    pub fn render(
        &self,
        tool: &str,
        args: u64,
        paired_tool: Option<&str>,
        unknown_tool: Option<&str>,
    ) -> (String, String) {
        let critical = self.level == Level::Critical;
        let count = self.count;
        let identity = |tool: &str, args: u64| format!("{tool}:{args:016x}");
        let a = identity(tool, args);
        match self.detector {
            Detector::UnknownToolRepeat => (
                format!(
                    "CRITICAL: attempted unavailable tool {tool} {count} times. Stop retrying that missing tool and answer without it."
                ),
                format!("unknown-tool:{tool}:{}", unknown_tool.unwrap_or(tool)),
            ),
            Detector::GlobalCircuitBreaker => (
                format!(
                    "CRITICAL: {tool} has repeated identical no-progress outcomes {count} times. Session execution blocked by global circuit breaker to prevent runaway loops."
                ),
                format!("global:{tool}:{a}:{:016x}", self.result),
            ),
            Detector::KnownPollNoProgress => (
                if critical {
                    format!(
                        "CRITICAL: Called {tool} with identical arguments and no progress {count} times. This appears to be a stuck polling loop. Session execution blocked to prevent resource waste."
                    )
                } else {
                    format!(
                        "WARNING: You have called {tool} {count} times with identical arguments and no progress. Stop polling and either (1) increase wait time between checks, or (2) report the task as failed if the process is stuck."
                    )
                },
                format!("poll:{tool}:{a}:{:016x}", self.result),
            ),
            Detector::PingPong => {
                let b = identity(paired_tool.unwrap_or(""), self.other);
                let (lo, hi) = if a <= b { (&a, &b) } else { (&b, &a) };
                (
                    if critical {
                        format!(
                            "CRITICAL: You are alternating between repeated tool-call patterns ({count} consecutive calls) with no progress. This appears to be a stuck ping-pong loop. Session execution blocked to prevent resource waste."
                        )
                    } else {
                        format!(
                            "WARNING: You are alternating between repeated tool-call patterns ({count} consecutive calls). This looks like a ping-pong loop; stop retrying and report the task as failed."
                        )
                    },
                    format!("pingpong:{lo}|{hi}"),
                )
            }
            Detector::GenericRepeat if critical => (
                format!(
                    "CRITICAL: Called {tool} with identical arguments and identical outcomes {count} times. Session execution blocked to prevent runaway loops."
                ),
                format!("generic:{tool}:{a}:{:016x}", self.result),
            ),
            Detector::GenericRepeat => (
                format!(
                    "WARNING: You have called {tool} {count} times with identical arguments. If this is not making progress, stop retrying and report the task as failed."
                ),
                format!("generic:{tool}:{a}"),
            ),
        }
    }
}

/// The post-compaction guard's detector name.
pub const COMPACTION_DETECTOR: &str = "compaction_loop_persisted";

/// The post-compaction guard's message when the same call and result filled its window.
pub fn compaction_message(tool: &str, count: u32) -> String {
    format!(
        "{COMPACTION_DETECTOR}: {tool} repeated the same call with the same result {count} times after compaction; aborting the run."
    )
}

/// The decision for one call about to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub finding: Option<Finding>,
    pub blocked: bool,
    pub emit_warning: bool,
}

/// The guard's answer for one observed outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardVerdict {
    /// Not armed, or armed and the window has not filled with one triple.
    Continue,
    /// The same (tool, args, result) triple filled the window: abort with this count.
    Abort(u32),
}

/// Warning-key digests kinds (distinct tags keep the key shapes apart).
mod key_tag {
    pub const GENERIC_WARNING: u8 = b'g';
    pub const GENERIC_CRITICAL: u8 = b'G';
    pub const POLL: u8 = b'p';
    pub const GLOBAL: u8 = b'b';
    pub const UNKNOWN: u8 = b'u';
    pub const PING_PONG: u8 = b'q';
    pub const RUN: u8 = b'r';
}

/// Remembers the warning bucket last emitted per key (FIFO-evicted at [`MAX_WARNING_KEYS`]).
#[derive(Clone, Debug, Default)]
pub struct WarningBuckets {
    entries: VecDeque<(u64, u32)>,
}

impl WarningBuckets {
    /// Whether a warning at `count` for `key` is emitted now. The first time a key is seen it
    /// is emitted whatever the count (doomloop's deliberate difference); afterwards only when
    /// `count / 10` exceeds the bucket stored, as OpenClaw does.
    pub fn should_emit(&mut self, key: u64, count: u32) -> bool {
        let bucket = count / WARNING_BUCKET_SIZE;
        if let Some(entry) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            if bucket <= entry.1 {
                return false;
            }
            entry.1 = bucket;
            return true;
        }
        self.entries.push_back((key, bucket));
        if self.entries.len() > MAX_WARNING_KEYS {
            self.entries.pop_front();
        }
        true
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<(u64, u32)>()
    }
}

/// The post-compaction guard: after `arm()`, watches the next `window` outcomes and aborts
/// when one (tool, args, result) triple fills the window.
#[derive(Clone, Debug)]
pub struct CompactionGuard {
    window_size: u32,
    remaining: u32,
    window: Vec<(u64, u64, u64)>,
}

impl CompactionGuard {
    pub fn new(window_size: u32) -> Self {
        CompactionGuard {
            window_size: window_size.max(1),
            remaining: 0,
            window: Vec::new(),
        }
    }

    pub fn window_size(&self) -> u32 {
        self.window_size
    }

    pub fn remaining(&self) -> u32 {
        self.remaining
    }

    /// Start watching the next `window_size` outcomes; returns that number.
    pub fn arm(&mut self) -> u32 {
        self.remaining = self.window_size;
        self.window.clear();
        self.window_size
    }

    pub fn observe(&mut self, tool: u64, args: u64, result: u64) -> GuardVerdict {
        if self.remaining == 0 {
            return GuardVerdict::Continue;
        }
        self.remaining -= 1;
        let triple = (tool, args, result);
        self.window.push(triple);
        let count = self.window.iter().filter(|&&t| t == triple).count() as u32;
        if self.remaining == 0 {
            // The window is over: free it (a gateway holds many idle guards).
            self.window = Vec::new();
        }
        if count >= self.window_size {
            GuardVerdict::Abort(count)
        } else {
            GuardVerdict::Continue
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.window.capacity() * std::mem::size_of::<(u64, u64, u64)>()
    }
}

/// One session's state: history, warning buckets and the guard.
#[derive(Clone, Debug)]
pub struct ToolLoopSession<N> {
    config: LoopConfig,
    /// The smallest threshold any detector compares a count with.
    lowest_threshold: usize,
    /// The smallest threshold the streak or the recent count is compared with.
    lowest_window_threshold: usize,
    history: Ring<Record<N>>,
    buckets: WarningBuckets,
    guard: CompactionGuard,
}

impl<N> ToolLoopSession<N> {
    pub fn new(config: LoopConfig) -> Self {
        let c = &config;
        let lowest_window = c.warning.min(c.critical).min(c.global);
        ToolLoopSession {
            lowest_threshold: lowest_window.min(c.unknown_tool) as usize,
            lowest_window_threshold: lowest_window as usize,
            history: Ring::new(config.history_size),
            buckets: WarningBuckets::default(),
            guard: CompactionGuard::new(config.guard_window),
            config,
        }
    }

    pub fn config(&self) -> &LoopConfig {
        &self.config
    }

    pub fn history_len(&self) -> usize {
        self.history.len()
    }

    /// The record `back` places before the newest.
    pub fn record(&self, back: usize) -> Option<&Record<N>> {
        self.history.back(back)
    }

    pub fn warning_keys(&self) -> usize {
        self.buckets.len()
    }

    pub fn guard(&self) -> &CompactionGuard {
        &self.guard
    }

    /// Bytes held on the heap by this session (the records, buckets and guard window).
    pub fn heap_bytes(&self) -> usize {
        self.history.capacity() * std::mem::size_of::<Record<N>>() + self.buckets.heap_bytes() + self.guard.heap_bytes()
    }

    /// The digests of every name the records refer to (tools and unknown tools).
    pub fn name_digests(&self) -> impl Iterator<Item = u64> + '_ {
        self.history
            .iter_newest_first()
            .flat_map(|r| std::iter::once(r.tool).chain(r.unknown_tool()))
    }

    /// Append a call without a result.
    pub fn record_call(&mut self, key: &CallKey, call_id: Option<u64>, payload: N) {
        let scope = RunScope::of(key.run);
        let mut flags = scope.flag;
        if call_id.is_some() {
            flags |= HAS_CALL_ID;
        }
        self.history.push(Record {
            tool: key.tool,
            args: key.args,
            run: scope.run,
            call_id: call_id.unwrap_or(0),
            result: 0,
            unknown: 0,
            flags,
            payload,
        });
    }

    /// Fill the newest matching pending record with `outcome`, or append one; either way the
    /// record's payload becomes `payload`.
    pub fn record_outcome(&mut self, key: &CallKey, call_id: Option<u64>, outcome: Outcome, payload: N) {
        let mut unknown_flags = HAS_RESULT;
        if outcome.unknown.is_some() {
            unknown_flags |= HAS_UNKNOWN;
        }
        let scope = RunScope::of(key.run);
        for back in 0..self.history.len() {
            let Some(record) = self.history.back_mut(back) else {
                break;
            };
            let matches = !record.has(HAS_RESULT)
                && record.same_call(key, scope)
                && call_id.is_none_or(|id| record.has(HAS_CALL_ID) && record.call_id == id);
            if matches {
                record.result = outcome.result;
                record.unknown = outcome.unknown.unwrap_or(0);
                record.flags |= unknown_flags;
                record.payload = payload;
                return;
            }
        }
        self.record_call(key, call_id, payload);
        if let Some(record) = self.history.back_mut(0) {
            record.result = outcome.result;
            record.unknown = outcome.unknown.unwrap_or(0);
            record.flags |= unknown_flags;
        }
    }

    /// The verdict for `key` now, without side effects (`None`: not stuck).
    pub fn detect(&self, key: &CallKey) -> Option<Finding> {
        // Every count is bounded by the history's length (a ping-pong count by one more): while
        // the history is shorter than the lowest threshold, no detector can fire.
        if !self.config.detect || self.history.len() + 1 < self.lowest_threshold {
            return None;
        }
        // Likewise the streak and the recent count (the one pass over the whole window) are
        // only counted once the history could hold enough records to reach their thresholds.
        let count_window = self.history.len() >= self.lowest_window_threshold;
        let scan = Scan::run(&self.history, key, count_window);
        let c = &self.config;
        let finding = |level, detector, count, key_digest, result, other, source_back| Finding {
            level,
            detector,
            count,
            key: key_digest,
            result,
            other,
            source_back,
        };
        if scan.unknown_run >= c.unknown_tool {
            let k = hash_two(key_tag::UNKNOWN, key.tool, scan.unknown_name);
            return Some(finding(
                Level::Critical,
                Detector::UnknownToolRepeat,
                scan.unknown_run,
                k,
                0,
                scan.unknown_name,
                scan.newest_back,
            ));
        }
        let streak = scan.streak;
        let latest = scan.latest_result;
        if streak >= c.global {
            let k = hash_two(key_tag::GLOBAL, key.args, latest);
            return Some(finding(
                Level::Critical,
                Detector::GlobalCircuitBreaker,
                streak,
                k,
                latest,
                0,
                None,
            ));
        }
        if key.known_poll && c.known_poll {
            let k = hash_two(key_tag::POLL, key.args, latest);
            if streak >= c.critical {
                return Some(finding(
                    Level::Critical,
                    Detector::KnownPollNoProgress,
                    streak,
                    k,
                    latest,
                    0,
                    None,
                ));
            }
            if streak >= c.warning {
                return Some(finding(
                    Level::Warning,
                    Detector::KnownPollNoProgress,
                    streak,
                    k,
                    latest,
                    0,
                    None,
                ));
            }
        }
        if c.ping_pong {
            if let Some((count, no_progress)) = scan.ping_pong(key) {
                let (lo, hi) = if key.args <= scan.newest_args {
                    (key.args, scan.newest_args)
                } else {
                    (scan.newest_args, key.args)
                };
                let k = hash_two(key_tag::PING_PONG, lo, hi);
                let level = if count >= c.critical && no_progress {
                    Some(Level::Critical)
                } else if count >= c.warning {
                    Some(Level::Warning)
                } else {
                    None
                };
                if let Some(level) = level {
                    return Some(finding(
                        level,
                        Detector::PingPong,
                        count,
                        k,
                        0,
                        scan.newest_args,
                        scan.newest_back,
                    ));
                }
            }
        }
        if !key.known_poll && c.generic_repeat {
            if streak >= c.critical {
                let k = hash_two(key_tag::GENERIC_CRITICAL, key.args, latest);
                return Some(finding(
                    Level::Critical,
                    Detector::GenericRepeat,
                    streak,
                    k,
                    latest,
                    0,
                    None,
                ));
            }
            if scan.recent >= c.warning {
                let k = hash_two(key_tag::GENERIC_WARNING, key.args, 0);
                return Some(finding(
                    Level::Warning,
                    Detector::GenericRepeat,
                    scan.recent,
                    k,
                    0,
                    0,
                    None,
                ));
            }
        }
        None
    }

    /// Everything that happens before a call runs: detect; a critical verdict blocks the call
    /// (not recorded, so an identical retry is blocked again); a warning is emitted per the
    /// buckets; the call is recorded unless `enabled` is explicitly false.
    pub fn before_call(&mut self, key: &CallKey, call_id: Option<u64>, payload: N) -> Decision {
        let finding = self.detect(key);
        let mut decision = Decision {
            finding,
            blocked: false,
            emit_warning: false,
        };
        if let Some(f) = finding {
            if f.level == Level::Critical {
                decision.blocked = true;
                return decision;
            }
            let bucket_key = match key.run {
                Some(run) => hash_two(key_tag::RUN, run, f.key),
                None => f.key,
            };
            decision.emit_warning = self.buckets.should_emit(bucket_key, f.count);
        }
        if self.config.record_calls {
            self.record_call(key, call_id, payload);
            // The finding's source record is now one further back.
            if let Some(f) = decision.finding.as_mut() {
                f.source_back = f.source_back.map(|back| back + 1);
            }
        }
        decision
    }

    /// Everything after a call ran: record the outcome and feed it to the guard. `None`
    /// outcome (no result, or a loop veto) does nothing and returns `None`.
    pub fn after_call(
        &mut self,
        key: &CallKey,
        call_id: Option<u64>,
        outcome: Option<Outcome>,
        payload: N,
    ) -> Option<GuardVerdict> {
        let outcome = outcome?;
        self.record_outcome(key, call_id, outcome, payload);
        if !self.config.guard_enabled {
            return Some(GuardVerdict::Continue);
        }
        Some(self.guard.observe(key.tool, key.args, outcome.result))
    }

    /// Arm the guard; returns the attempts armed for (0 when the guard is disabled).
    pub fn arm_guard(&mut self) -> u32 {
        if !self.config.guard_enabled {
            return 0;
        }
        self.guard.arm()
    }
}

/// One fused newest-to-oldest pass over the run-scoped history.
struct Scan {
    unknown_run: u32,
    unknown_name: u64,
    streak: u32,
    latest_result: u64,
    recent: u32,
    newest_back: Option<usize>,
    newest_args: u64,
    other_args: u64,
    /// Length of the alternating tail ending at the newest record.
    tail: u32,
    /// Every tail record has a result and each side's result is constant.
    tail_no_progress: bool,
}

impl Scan {
    /// Three short passes over the run-scoped records, newest first. The unknown-tool run and
    /// the alternating tail usually end within a record or two; only the streak and recent
    /// counts need the whole window, and are left at 0 unless `count_window`.
    fn run<N>(history: &Ring<Record<N>>, key: &CallKey, count_window: bool) -> Scan {
        let mut s = Scan {
            unknown_run: 0,
            unknown_name: 0,
            streak: 0,
            latest_result: 0,
            recent: 0,
            newest_back: None,
            newest_args: 0,
            other_args: 0,
            tail: 0,
            tail_no_progress: true,
        };
        let scope = RunScope::of(key.run);
        let scoped = || {
            history
                .iter_newest_first()
                .enumerate()
                .filter(move |(_, r)| r.in_run(scope))
        };
        // Unknown tool: the run of newest records of this tool naming one missing tool.
        for (position, (_, r)) in scoped().enumerate() {
            let named = r.tool == key.tool && r.has(HAS_UNKNOWN);
            if !named || (position > 0 && r.unknown != s.unknown_name) {
                break;
            }
            s.unknown_name = r.unknown;
            s.unknown_run += 1;
        }
        // Streak of one result and recent count of this call: the only pass over the whole
        // window, so a plain loop over the ring's halves.
        if count_window {
            let mut streak_open = true;
            for half in history.halves() {
                for r in half.iter().rev() {
                    if !r.same_call(key, scope) {
                        continue;
                    }
                    s.recent += 1;
                    if streak_open && r.has(HAS_RESULT) {
                        if s.streak == 0 {
                            s.latest_result = r.result;
                            s.streak = 1;
                        } else if r.result == s.latest_result {
                            s.streak += 1;
                        } else {
                            streak_open = false;
                        }
                    }
                }
            }
        }
        // Ping-pong: the tail alternating between the newest args and the other args, and
        // whether every tail record has a result, constant on each side.
        let (mut side_a, mut side_b): (Option<u64>, Option<u64>) = (None, None);
        for (position, (back, r)) in scoped().enumerate() {
            if position == 0 {
                s.newest_back = Some(back);
                s.newest_args = r.args;
            } else if position == 1 && r.args != s.newest_args {
                s.other_args = r.args;
            } else {
                let expected = if position % 2 == 0 { s.newest_args } else { s.other_args };
                if position == 1 || r.args != expected {
                    break;
                }
            }
            s.tail += 1;
            if !r.has(HAS_RESULT) {
                s.tail_no_progress = false;
                continue;
            }
            let side = if r.args == s.newest_args {
                &mut side_a
            } else {
                &mut side_b
            };
            match side {
                None => *side = Some(r.result),
                Some(seen) if *seen != r.result => s.tail_no_progress = false,
                Some(_) => {}
            }
        }
        if side_a.is_none() || side_b.is_none() {
            s.tail_no_progress = false;
        }
        s
    }

    /// `(count, no-progress evidence)` when `key` continues an alternating tail of >= 2.
    fn ping_pong(&self, key: &CallKey) -> Option<(u32, bool)> {
        if self.tail < 2 || key.args != self.other_args {
            return None;
        }
        Some((self.tail + 1, self.tail_no_progress))
    }
}

/// One agent session's whole state: the history and guard, plus the names its records refer
/// to (for messages). Plain data throughout, what a snapshot saves. The read-only queries are
/// the session's (through `Deref`); every update goes through here, so no record lacks its name.
#[derive(Clone, Debug)]
pub struct NamedSession {
    session: ToolLoopSession<()>,
    names: NameTable,
}

impl std::ops::Deref for NamedSession {
    type Target = ToolLoopSession<()>;

    fn deref(&self) -> &ToolLoopSession<()> {
        &self.session
    }
}

impl NamedSession {
    pub fn new(config: LoopConfig) -> Self {
        NamedSession {
            session: ToolLoopSession::new(config),
            names: NameTable::default(),
        }
    }

    fn remember(&mut self, digest: u64, name: &str) {
        // A record refers to at most two names: twice that, plus slack, sweeps rarely.
        let limit = 4 * self.session.history.capacity() + 16;
        let session = &self.session;
        self.names.remember(digest, name, limit, || session.name_digests());
    }

    fn remember_outcome(&mut self, key: &CallKey, tool: &str, outcome: Option<Outcome>, unknown: Option<&str>) {
        self.remember(key.tool, tool);
        if let (Some(digest), Some(name)) = (outcome.and_then(|o| o.unknown), unknown) {
            self.remember(digest, name);
        }
    }

    pub fn record_call(&mut self, key: &CallKey, call_id: Option<u64>, tool: &str) {
        self.remember(key.tool, tool);
        self.session.record_call(key, call_id, ());
    }

    /// `unknown` is the name the outcome's `unknown` digest stands for.
    pub fn record_outcome(
        &mut self,
        key: &CallKey,
        call_id: Option<u64>,
        outcome: Outcome,
        tool: &str,
        unknown: Option<&str>,
    ) {
        self.remember_outcome(key, tool, Some(outcome), unknown);
        self.session.record_outcome(key, call_id, outcome, ());
    }

    pub fn before_call(&mut self, key: &CallKey, call_id: Option<u64>, tool: &str) -> Decision {
        self.remember(key.tool, tool);
        self.session.before_call(key, call_id, ())
    }

    pub fn after_call(
        &mut self,
        key: &CallKey,
        call_id: Option<u64>,
        outcome: Option<Outcome>,
        tool: &str,
        unknown: Option<&str>,
    ) -> Option<GuardVerdict> {
        self.remember_outcome(key, tool, outcome, unknown);
        self.session.after_call(key, call_id, outcome, ())
    }

    pub fn arm_guard(&mut self) -> u32 {
        self.session.arm_guard()
    }

    /// The names of a finding's source record: its tool, and the unknown tool it named.
    pub fn source_names(&self, finding: &Finding) -> (Option<&str>, Option<&str>) {
        let source = finding.source_back.and_then(|back| self.session.record(back));
        (
            source.and_then(|r| self.names.get(r.tool())),
            source.and_then(|r| self.names.get(r.unknown_tool()?)),
        )
    }

    /// Bytes held on the heap: the session's and the names'.
    pub fn heap_bytes(&self) -> usize {
        self.session.heap_bytes() + self.names.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::{hash_action, hash_i64, hash_str};

    fn key(tool: &str, arg: i64) -> CallKey {
        let t = hash_str(tool.as_bytes());
        CallKey {
            tool: t,
            args: hash_action(t, hash_i64(arg)),
            run: None,
            known_poll: false,
        }
    }

    fn outcome(result: u64) -> Option<Outcome> {
        Some(Outcome { result, unknown: None })
    }

    fn config(warning: u32, critical: u32, global: u32) -> LoopConfig {
        LoopConfig {
            warning,
            critical,
            global,
            ..LoopConfig::default()
        }
    }

    /// Run one call through before/after; returns the decision.
    fn call(s: &mut ToolLoopSession<()>, k: &CallKey, result: u64) -> Decision {
        let d = s.before_call(k, None, ());
        if !d.blocked {
            s.after_call(k, None, outcome(result), ());
        }
        d
    }

    #[test]
    fn generic_repeat_warns_on_recent_and_blocks_on_streak() {
        let mut s = ToolLoopSession::new(config(3, 5, 8));
        let k = key("read", 1);
        let levels: Vec<_> = (0..7)
            .map(|_| call(&mut s, &k, 7).finding.map(|f| (f.level, f.count)))
            .collect();
        assert_eq!(
            levels,
            vec![
                None,
                None,
                None,
                Some((Level::Warning, 3)),
                Some((Level::Warning, 4)),
                Some((Level::Critical, 5)),
                Some((Level::Critical, 5)),
            ]
        );
        // The veto is sticky and not recorded.
        assert_eq!(s.history_len(), 5);
    }

    #[test]
    fn changing_results_reset_the_streak_but_not_recent() {
        let mut s = ToolLoopSession::new(config(3, 4, 8));
        let k = key("read", 1);
        for i in 0..10 {
            let d = call(&mut s, &k, i);
            assert!(!d.blocked);
        }
        let f = s.detect(&k).unwrap_or_else(|| panic!("expected a warning"));
        assert_eq!(
            (f.level, f.detector, f.count),
            (Level::Warning, Detector::GenericRepeat, 10)
        );
    }

    #[test]
    fn other_calls_do_not_break_the_streak() {
        let mut s = ToolLoopSession::new(config(10, 4, 30));
        let k = key("read", 1);
        let other = key("list", 2);
        for i in 0..3 {
            call(&mut s, &k, 5);
            call(&mut s, &other, i);
        }
        call(&mut s, &k, 5);
        let f = s.detect(&k).unwrap_or_else(|| panic!("expected critical"));
        assert_eq!((f.level, f.count), (Level::Critical, 4));
    }

    #[test]
    fn global_breaker_ignores_detector_switches() {
        let mut c = config(10, 20, 3);
        c.generic_repeat = false;
        c.ping_pong = false;
        c.known_poll = false;
        let mut s = ToolLoopSession::new(c);
        let k = key("exec", 1);
        for _ in 0..3 {
            call(&mut s, &k, 1);
        }
        let f = s.detect(&k).unwrap_or_else(|| panic!("expected breaker"));
        assert_eq!((f.detector, f.count), (Detector::GlobalCircuitBreaker, 3));
    }

    #[test]
    fn known_poll_uses_the_streak() {
        let mut s = ToolLoopSession::new(config(2, 3, 30));
        let mut k = key("command_status", 1);
        k.known_poll = true;
        call(&mut s, &k, 1);
        call(&mut s, &k, 1);
        assert_eq!(
            s.detect(&k).map(|f| (f.level, f.detector)),
            Some((Level::Warning, Detector::KnownPollNoProgress))
        );
        call(&mut s, &k, 1);
        assert_eq!(s.detect(&k).map(|f| f.level), Some(Level::Critical));
    }

    #[test]
    fn ping_pong_counts_the_tail_plus_one() {
        let mut s = ToolLoopSession::new(config(4, 7, 30));
        let (a, b) = (key("read", 1), key("list", 2));
        for i in 0..3 {
            call(&mut s, &a, 1);
            call(&mut s, &b, 2);
            if i == 0 {
                // tail [a, b] continued by a: count 3, below the warning.
                assert_eq!(s.detect(&a), None);
            }
        }
        // tail a b a b a b, calling a: count 7 >= critical with constant sides.
        let f = s.detect(&a).unwrap_or_else(|| panic!("expected ping-pong"));
        assert_eq!(
            (f.level, f.detector, f.count, f.source_back),
            (Level::Critical, Detector::PingPong, 7, Some(0))
        );
        // Calling b would repeat the newest, not continue the tail.
        assert_ne!(s.detect(&b).map(|f| f.detector), Some(Detector::PingPong));
        // The key is the same from either side.
        let mut s2 = ToolLoopSession::new(config(4, 7, 30));
        for _ in 0..3 {
            call(&mut s2, &b, 2);
            call(&mut s2, &a, 1);
        }
        assert_eq!(s2.detect(&b).map(|f| f.key), Some(f.key));
    }

    #[test]
    fn recorded_warning_still_points_at_the_paired_record() {
        let mut s: ToolLoopSession<&str> = ToolLoopSession::new(config(3, 10, 30));
        let (a, b) = (key("read", 1), key("list", 2));
        for _ in 0..2 {
            s.before_call(&a, None, "read");
            s.after_call(&a, None, outcome(1), "read");
            s.before_call(&b, None, "list");
            s.after_call(&b, None, outcome(2), "list");
        }
        // Calling read continues the tail; the call is recorded, so the paired (newest
        // before it) record is now one further back.
        let d = s.before_call(&a, None, "read");
        let f = d.finding.unwrap_or_else(|| panic!("expected ping-pong"));
        assert_eq!(f.detector, Detector::PingPong);
        assert_eq!(
            f.source_back.and_then(|back| s.record(back)).map(|r| r.payload),
            Some("list")
        );
    }

    #[test]
    fn ping_pong_with_changing_results_only_warns() {
        let mut s = ToolLoopSession::new(config(4, 6, 30));
        let (a, b) = (key("read", 1), key("list", 2));
        for i in 0..3 {
            call(&mut s, &a, i);
            call(&mut s, &b, 2);
        }
        let f = s.detect(&a).unwrap_or_else(|| panic!("expected ping-pong"));
        assert_eq!((f.level, f.count), (Level::Warning, 7));
    }

    #[test]
    fn unknown_tool_run() {
        let mut s = ToolLoopSession::new(LoopConfig {
            unknown_tool: 3,
            ..LoopConfig::default()
        });
        let name = hash_str(b"deploy");
        for i in 0..3 {
            let k = key("deploy", i);
            let d = s.before_call(&k, None, ());
            assert!(!d.blocked);
            s.after_call(
                &k,
                None,
                Some(Outcome {
                    result: 9,
                    unknown: Some(name),
                }),
                (),
            );
        }
        let f = s
            .detect(&key("deploy", 9))
            .unwrap_or_else(|| panic!("expected unknown tool"));
        assert_eq!(
            (f.level, f.detector, f.count, f.other),
            (Level::Critical, Detector::UnknownToolRepeat, 3, name)
        );
        assert_eq!(s.detect(&key("other", 9)), None);
    }

    #[test]
    fn runs_are_scoped() {
        let mut s = ToolLoopSession::new(config(2, 3, 30));
        let mut k = key("read", 1);
        k.run = Some(1);
        call(&mut s, &k, 1);
        call(&mut s, &k, 1);
        assert!(s.detect(&k).is_some());
        k.run = Some(2);
        assert_eq!(s.detect(&k), None);
        k.run = None;
        assert_eq!(s.detect(&k), None);
    }

    #[test]
    fn outcome_fills_the_matching_pending_record() {
        let mut s: ToolLoopSession<u8> = ToolLoopSession::new(LoopConfig::default());
        let (a, b) = (key("read", 1), key("list", 2));
        s.record_call(&a, Some(1), 1);
        s.record_call(&b, None, 2);
        s.record_call(&a, Some(2), 3);
        s.record_outcome(
            &a,
            Some(1),
            Outcome {
                result: 5,
                unknown: None,
            },
            9,
        );
        assert_eq!(s.history_len(), 3);
        assert_eq!(s.record(2).and_then(Record::result), Some(5));
        assert_eq!(s.record(0).and_then(Record::result), None);
        // No pending match: appended.
        s.record_outcome(
            &b,
            Some(7),
            Outcome {
                result: 6,
                unknown: None,
            },
            9,
        );
        assert_eq!(s.history_len(), 4);
        assert_eq!(s.record(0).map(|r| r.payload), Some(9));
    }

    #[test]
    fn disabled_records_outcomes_only() {
        let mut s = ToolLoopSession::new(LoopConfig {
            detect: false,
            record_calls: false,
            guard_enabled: false,
            ..LoopConfig::default()
        });
        let k = key("read", 1);
        for _ in 0..40 {
            assert_eq!(call(&mut s, &k, 1).finding, None);
        }
        assert_eq!(s.history_len(), 30);
        assert_eq!(s.arm_guard(), 0);
    }

    #[test]
    fn a_ping_pong_fires_as_soon_as_its_count_can_reach_the_threshold() {
        // Two records and a warning threshold of 3: the history is short of every threshold,
        // but the call continuing the tail counts one more.
        let mut s = ToolLoopSession::new(config(3, 5, 8));
        let (a, b) = (key("read", 1), key("list", 2));
        call(&mut s, &a, 1);
        assert_eq!(s.detect(&b), None);
        call(&mut s, &b, 2);
        assert_eq!(
            s.detect(&a).map(|f| (f.level, f.detector, f.count)),
            Some((Level::Warning, Detector::PingPong, 3))
        );
    }

    #[test]
    fn history_is_trimmed() {
        let mut s = ToolLoopSession::new(LoopConfig {
            history_size: 4,
            ..config(3, 5, 8)
        });
        let k = key("read", 1);
        for _ in 0..10 {
            call(&mut s, &k, 1);
        }
        assert_eq!(s.history_len(), 4);
        assert_eq!(s.detect(&k).map(|f| (f.level, f.count)), Some((Level::Warning, 4)));
    }

    #[test]
    fn warning_buckets() {
        let mut b = WarningBuckets::default();
        assert!(b.should_emit(1, 3));
        assert!(!b.should_emit(1, 9));
        assert!(b.should_emit(1, 10));
        assert!(!b.should_emit(1, 19));
        assert!(b.should_emit(1, 20));
        for key in 2..=(MAX_WARNING_KEYS as u64 + 1) {
            assert!(b.should_emit(key, 10));
        }
        assert_eq!(b.len(), MAX_WARNING_KEYS);
        // Key 1 was evicted first: it is new again.
        assert!(b.should_emit(1, 20));
    }

    #[test]
    fn guard_aborts_on_a_full_window() {
        let mut g = CompactionGuard::new(3);
        assert_eq!(g.observe(1, 1, 1), GuardVerdict::Continue);
        assert_eq!(g.arm(), 3);
        assert_eq!(g.observe(1, 1, 1), GuardVerdict::Continue);
        assert_eq!(g.observe(1, 1, 1), GuardVerdict::Continue);
        assert_eq!(g.observe(1, 1, 1), GuardVerdict::Abort(3));
        assert_eq!(g.observe(1, 1, 1), GuardVerdict::Continue);
        g.arm();
        g.observe(1, 1, 1);
        g.observe(1, 1, 2);
        assert_eq!(g.observe(1, 1, 1), GuardVerdict::Continue);
        assert_eq!(g.remaining(), 0);
    }
}
