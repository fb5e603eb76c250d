//! Tool-call loop detection (the `tools.loopDetection` model) and the post-compaction guard.
//!
//! One [`ToolLoopSession`] is one agent session: a ring of fixed-size call records (digests and
//! flags only, plus an opaque payload the caller uses for names), the warning buckets and the
//! guard window. All comparisons are on 64-bit digests; the binding layer computes them (tool
//! name, canonical params, normalised result) and renders messages. The rules follow the
//! project's tool-loop spec; see docs/tool-loop.md for where doomloop deliberately differs,
//! and for doomloop's own two rules (cycles of 3 to 8 calls, argument churn), which the
//! OpenClaw-shaped configs turn off.
//!
//! The session and its rules are here; `scan` holds the passes over the history they read,
//! `config` the settings, `guard` the post-compaction guard and `snapshot` the snapshot format.

mod config;
mod guard;
mod scan;
mod snapshot;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::fingerprint::hash_two;
use crate::names::NameTable;
use crate::policy::ToolLimits;
use crate::ring::Ring;
use crate::settings::{shared, Value};

pub use config::{LoopConfig, GUARD, MAX_GUARD_WINDOW, MAX_HISTORY_SIZE, MAX_THRESHOLD, TOOL_LOOP};
pub use guard::{compaction_message, CompactionGuard, GuardVerdict, COMPACTION_DETECTOR};
use scan::{churn_match, cycle_match, Scan};

/// OpenClaw's warning bucket width: a key is re-emitted when `count / 10` grows.
pub const WARNING_BUCKET_SIZE: u32 = 10;
/// Warning keys remembered per session, evicted in order of first insertion.
pub const MAX_WARNING_KEYS: usize = 256;

const HAS_RUN: u8 = 1;
const HAS_CALL_ID: u8 = 2;
const HAS_RESULT: u8 = 4;
const HAS_UNKNOWN: u8 = 8;

/// The shortest and longest cycle the cycle rule looks for (two calls are ping-pong's).
pub const MIN_CYCLE_PERIOD: usize = 3;
pub const MAX_CYCLE_PERIOD: usize = 8;
/// Argument churn: the most argument sets one churning tool is followed through ("a few").
pub const MAX_CHURN_VARIANTS: usize = 8;
/// Argument churn: calls an argument set needs in the tail to count as one the tool cycles
/// through; fewer are one-off probes (two passes over a few files are ordinary work).
pub const MIN_CHURN_REPEATS: u32 = 3;
/// Argument churn: one-off probes may be at most one call in this many of the tail (and at
/// least one), so a few novel attempts do not hide the loop but a batch of new calls is no
/// churn.
pub const CHURN_PROBE_SHARE: u32 = 5;

/// The identity of one call: digests of the tool name and of `(tool, canonical params)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallKey {
    pub tool: u64,
    pub args: u64,
    pub run: Option<u64>,
    pub known_poll: bool,
    /// Its tool's policy thresholds (a profile's `tool_policies`), if any: the rules judge
    /// this call by them in place of the config's.
    pub limits: Option<ToolLimits>,
}

/// What a finished call produced, as digests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub result: u64,
    /// Digest of the unknown-tool name the error text named, if any.
    pub unknown: Option<u64>,
}

/// One history entry. `payload` is the caller's (names for rendering); the rules only read
/// the digests and flags. Its call id and unknown-tool digest, which most calls lack, are
/// kept apart, and its run id is an index into the session's few run ids (see
/// [`ToolLoopSession`]), so a record is 32 bytes rather than 56.
#[derive(Clone, Debug)]
pub struct Record<N> {
    tool: u64,
    args: u64,
    result: u64,
    /// The run id's index in the session's `runs` (0 when the record has none).
    run: u32,
    flags: u8,
    pub payload: N,
}

/// A record's call id and unknown-tool digest (each 0 when absent, as the flags say).
#[derive(Clone, Copy, Debug, Default)]
struct Ids {
    call_id: u64,
    unknown: u64,
}

impl<N> Record<N> {
    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn in_run(&self, run: RunScope) -> bool {
        self.flags & HAS_RUN == run.flag && u64::from(self.run) == run.run
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
}

/// A run id as records store it (absent: no flag and 0; present: its index in the session's
/// run ids), so scoping a record is two plain comparisons.
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
    Cycle,
    GenericRepeat,
    ArgumentChurn,
}

impl Detector {
    pub fn name(self) -> &'static str {
        match self {
            Detector::UnknownToolRepeat => "unknown_tool_repeat",
            Detector::GlobalCircuitBreaker => "global_circuit_breaker",
            Detector::KnownPollNoProgress => "known_poll_no_progress",
            Detector::PingPong => "ping_pong",
            Detector::Cycle => "cycle",
            Detector::GenericRepeat => "generic_repeat",
            Detector::ArgumentChurn => "argument_churn",
        }
    }
}

/// A stuck verdict. `key` is the warning key's digest (buckets are keyed by it); `result` is
/// the streak's result hash and `other` the paired args identity (ping-pong), the unknown-tool
/// name digest, or the digest of the argument sets a tool churns through, for rendering the
/// key; `pattern` is a cycle's period or the number of argument sets churned through (0 for
/// the other rules); `source_back` indexes (back from the newest) the record whose payload
/// names the paired tool or the unknown tool, or the newest record of a cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    pub detector: Detector,
    pub count: u32,
    pub key: u64,
    pub result: u64,
    pub other: u64,
    pub pattern: u32,
    pub source_back: Option<usize>,
}

impl Finding {
    /// The verdict's message and warning key, as OpenClaw renders them (doomloop's own rules
    /// in the same style), for a call to `tool` whose `(tool, params)` digest is `args`. The
    /// record the finding points back to (`source_back`) names the paired tool of a
    /// ping-pong, or the unknown tool its error named; `cycle` is a cycle's calls (tool name
    /// and args identity) in call order from this one (see [`NamedSession::cycle_calls`]).
    pub fn render(
        &self,
        tool: &str,
        args: u64,
        paired_tool: Option<&str>,
        unknown_tool: Option<&str>,
        cycle: &[(&str, u64)],
    ) -> (String, String) {
        let critical = self.level == Level::Critical;
        let count = Num(u64::from(self.count));
        let a = Id(tool, args);
        match self.detector {
            Detector::UnknownToolRepeat => (
                join(&[
                    Text("CRITICAL: attempted unavailable tool "),
                    Text(tool),
                    Text(" "),
                    count,
                    Text(" times. Stop retrying that missing tool and answer without it."),
                ]),
                join(&[Text("unknown-tool:"), Text(tool), Text(":"), Text(unknown_tool.unwrap_or(tool))]),
            ),
            Detector::GlobalCircuitBreaker => (
                join(&[
                    Text("CRITICAL: "),
                    Text(tool),
                    Text(" has repeated identical no-progress outcomes "),
                    count,
                    Text(" times. Session execution blocked by global circuit breaker to prevent runaway loops."),
                ]),
                join(&[Text("global:"), Text(tool), Text(":"), a, Text(":"), Hex(self.result)]),
            ),
            Detector::KnownPollNoProgress => (
                if critical {
                    join(&[
                        Text("CRITICAL: Called "),
                        Text(tool),
                        Text(" with identical arguments and no progress "),
                        count,
                        Text(" times. This appears to be a stuck polling loop. Session execution blocked to prevent resource waste."),
                    ])
                } else {
                    join(&[
                        Text("WARNING: You have called "),
                        Text(tool),
                        Text(" "),
                        count,
                        Text(" times with identical arguments and no progress. Stop polling and either (1) increase wait time between checks, or (2) report the task as failed if the process is stuck."),
                    ])
                },
                join(&[Text("poll:"), Text(tool), Text(":"), a, Text(":"), Hex(self.result)]),
            ),
            Detector::PingPong => {
                let (a, b) = (join(&[a]), join(&[Id(paired_tool.unwrap_or(""), self.other)]));
                let (lo, hi) = if a <= b { (&a, &b) } else { (&b, &a) };
                (
                    if critical {
                        join(&[
                            Text("CRITICAL: You are alternating between repeated tool-call patterns ("),
                            count,
                            Text(" consecutive calls) with no progress. This appears to be a stuck ping-pong loop. Session execution blocked to prevent resource waste."),
                        ])
                    } else {
                        join(&[
                            Text("WARNING: You are alternating between repeated tool-call patterns ("),
                            count,
                            Text(" consecutive calls). This looks like a ping-pong loop; stop retrying and report the task as failed."),
                        ])
                    },
                    join(&[Text("pingpong:"), Text(lo), Text("|"), Text(hi)]),
                )
            }
            Detector::Cycle => {
                let head = [
                    Text(if critical {
                        "CRITICAL: You are repeating a cycle of "
                    } else {
                        "WARNING: You are repeating a cycle of "
                    }),
                    Num(u64::from(self.pattern)),
                    Text(" tool calls ("),
                ];
                let tail = if critical {
                    [
                        Text(") with identical outcomes ("),
                        count,
                        Text(" consecutive calls). This appears to be a stuck loop. Session execution blocked to prevent resource waste."),
                    ]
                } else {
                    [
                        Text(") ("),
                        count,
                        Text(" consecutive calls). If this is not making progress, stop retrying and report the task as failed."),
                    ]
                };
                // The cycle's tools in call order, or the one tool all its calls are of.
                let one_tool = match cycle.split_first() {
                    Some(((first, _), rest)) if rest.iter().all(|(tool, _)| tool == first) => Some(*first),
                    _ => None,
                };
                let names: usize = cycle.iter().map(|(tool, _)| tool.len() + 4).sum();
                let mut message = String::with_capacity(size(&head) + names + 32 + size(&tail));
                push(&mut message, &head);
                match one_tool {
                    Some(tool) => push(&mut message, &[Text("all "), Text(tool), Text(", with changing arguments")]),
                    None => {
                        for (i, &(tool, _)) in cycle.iter().enumerate() {
                            push(&mut message, &[Text(if i > 0 { " -> " } else { "" }), Text(tool)]);
                        }
                    }
                }
                push(&mut message, &tail);
                let start = rotation_start(cycle.len(), |i| cycle[i].1);
                let mut key = String::with_capacity(6 + cycle.iter().map(|(tool, _)| tool.len() + 18).sum::<usize>());
                key.push_str("cycle:");
                for i in 0..cycle.len() {
                    let (tool, args) = cycle[(start + i) % cycle.len()];
                    push(&mut key, &[Text(if i > 0 { ">" } else { "" }), Id(tool, args)]);
                }
                (message, key)
            }
            Detector::ArgumentChurn => {
                let sets = Num(u64::from(self.pattern));
                (
                    if critical {
                        join(&[
                            Text("CRITICAL: Called "),
                            Text(tool),
                            Text(" "),
                            count,
                            Text(" times cycling through the same "),
                            sets,
                            Text(" argument sets, each with an unchanged outcome. Session execution blocked to prevent runaway loops."),
                        ])
                    } else {
                        join(&[
                            Text("WARNING: You have called "),
                            Text(tool),
                            Text(" "),
                            count,
                            Text(" times cycling through the same "),
                            sets,
                            Text(" argument sets, and each gave the same outcome every time. Changing between them is not making progress; try something different or report the task as failed."),
                        ])
                    },
                    join(&[Text("churn:"), Text(tool), Text(":"), Hex(self.other)]),
                )
            }
            Detector::GenericRepeat if critical => (
                join(&[
                    Text("CRITICAL: Called "),
                    Text(tool),
                    Text(" with identical arguments and identical outcomes "),
                    count,
                    Text(" times. Session execution blocked to prevent runaway loops."),
                ]),
                join(&[Text("generic:"), Text(tool), Text(":"), a, Text(":"), Hex(self.result)]),
            ),
            Detector::GenericRepeat => (
                join(&[
                    Text("WARNING: You have called "),
                    Text(tool),
                    Text(" "),
                    count,
                    Text(" times with identical arguments. If this is not making progress, stop retrying and report the task as failed."),
                ]),
                join(&[Text("generic:"), Text(tool), Text(":"), a]),
            ),
        }
    }
}

/// A piece of a rendered message or key: text, a number in decimal, a digest as 16 hex
/// digits (what `{}` and `{:016x}` print), or a call's identity, `tool:digest`.
#[derive(Clone, Copy)]
enum Piece<'a> {
    Text(&'a str),
    Num(u64),
    Hex(u64),
    Id(&'a str, u64),
}
use Piece::{Hex, Id, Num, Text};

/// The pieces joined, sized once: `format!`'s machinery was most of what a warned call costs
/// above a normal one (a warning renders a message and a key on every call).
fn join(pieces: &[Piece<'_>]) -> String {
    let mut out = String::with_capacity(size(pieces));
    push(&mut out, pieces);
    out
}

/// The bytes the pieces take at most.
fn size(pieces: &[Piece<'_>]) -> usize {
    pieces
        .iter()
        .map(|piece| match piece {
            Text(text) => text.len(),
            Num(_) => 20,
            Hex(_) => 16,
            Id(tool, _) => tool.len() + 17,
        })
        .sum()
}

/// `digest` as 16 lowercase hex digits, written into `digits`.
fn hex_digits(digest: u64, digits: &mut [u8; 16]) -> &str {
    for (at, digit) in digits.iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[(digest >> (60 - 4 * at)) as usize & 15];
    }
    // SAFETY: every byte was just written from the ASCII table above, so they are valid UTF-8.
    // (`from_utf8` would validate every number of every warning: a cycle's message and key
    // carry a dozen.)
    unsafe { std::str::from_utf8_unchecked(digits) }
}

/// `number` in decimal, written into the end of `digits`.
fn decimal_digits(number: u64, digits: &mut [u8; 20]) -> &str {
    let mut at = digits.len();
    let mut rest = number;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let written = digits.get(at..).unwrap_or_default();
    // SAFETY: `written` holds only bytes just written as b'0' plus a digit, ASCII and so valid
    // UTF-8 (`u64::MAX` has 20 digits: `at` never underflows).
    unsafe { std::str::from_utf8_unchecked(written) }
}

/// The pieces appended to `out`.
fn push(out: &mut String, pieces: &[Piece<'_>]) {
    for piece in pieces {
        match *piece {
            Text(text) => out.push_str(text),
            Num(number) => out.push_str(decimal_digits(number, &mut [0; 20])),
            Hex(digest) => out.push_str(hex_digits(digest, &mut [0; 16])),
            Id(tool, digest) => {
                out.push_str(tool);
                out.push(':');
                out.push_str(hex_digits(digest, &mut [0; 16]));
            }
        }
    }
}

/// The decision for one call about to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub finding: Option<Finding>,
    pub blocked: bool,
    pub emit_warning: bool,
}

/// Warning-key digests kinds (distinct tags keep the key shapes apart).
mod key_tag {
    pub const GENERIC_WARNING: u8 = b'g';
    pub const GENERIC_CRITICAL: u8 = b'G';
    pub const POLL: u8 = b'p';
    pub const GLOBAL: u8 = b'b';
    pub const UNKNOWN: u8 = b'u';
    pub const PING_PONG: u8 = b'q';
    pub const CYCLE: u8 = b'c';
    pub const CHURN: u8 = b'a';
    pub const RUN: u8 = b'r';
}

/// Where the lexicographically smallest rotation of `calls` starts: a cycle's warning key
/// starts there, so it is the same whichever of the cycle's calls is being made.
pub fn canonical_rotation(calls: &[u64]) -> usize {
    rotation_start(calls.len(), |i| calls[i])
}

/// [`canonical_rotation`] of the `n` digests `at` gives.
fn rotation_start(n: usize, at: impl Fn(usize) -> u64 + Copy) -> usize {
    let rotation = move |start: usize| (0..n).map(move |i| at((start + i) % n));
    (1..n).fold(0, |best, start| {
        if rotation(start).lt(rotation(best)) {
            start
        } else {
            best
        }
    })
}

/// A cycle's warning-key digest from its calls' args identities in call order (at most
/// [`MAX_CYCLE_PERIOD`]; a warned cycle computes it on every call, so its rotations are read
/// from the calls written twice over rather than through a modulo per digest).
fn cycle_key(calls: &[u64]) -> u64 {
    let n = calls.len().min(MAX_CYCLE_PERIOD);
    let mut twice = [0u64; 2 * MAX_CYCLE_PERIOD];
    twice[..n].copy_from_slice(&calls[..n]);
    twice[n..2 * n].copy_from_slice(&calls[..n]);
    let rotation = |start: usize| &twice[start..start + n];
    let start = (1..n).fold(
        0,
        |best, start| if rotation(start) < rotation(best) { start } else { best },
    );
    rotation(start)
        .iter()
        .fold(0, |digest, &args| hash_two(key_tag::CYCLE, digest, args))
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

/// One session's state: history, warning buckets and the guard.
#[derive(Clone, Debug)]
pub struct ToolLoopSession<N> {
    config: LoopConfig,
    /// The smallest threshold any detector compares a count with.
    lowest_threshold: usize,
    /// The smallest threshold the streak or the recent count is compared with.
    lowest_window_threshold: usize,
    history: Ring<Record<N>>,
    /// The records' call ids and unknown-tool digests, aligned with `history` from the
    /// newest back; allocated with the first record that has either (a gateway holds many
    /// sessions whose calls carry neither).
    ids: Option<Box<Ring<Ids>>>,
    /// The distinct run ids the records refer to, in order of first use (a session has few).
    runs: Vec<u64>,
    buckets: WarningBuckets,
    guard: CompactionGuard,
}

/// The lowest threshold of any rule, and of the rules that count over the whole window.
fn lowest_thresholds(c: &LoopConfig) -> (usize, usize) {
    let lowest_window = c.warning.min(c.critical).min(c.global);
    (lowest_window.min(c.unknown_tool) as usize, lowest_window as usize)
}

impl<N> ToolLoopSession<N> {
    pub fn new(config: LoopConfig) -> Self {
        let (lowest_threshold, lowest_window_threshold) = lowest_thresholds(&config);
        ToolLoopSession {
            lowest_threshold,
            lowest_window_threshold,
            history: Ring::new(config.history_size),
            ids: None,
            runs: Vec::new(),
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

    /// Bytes held on the heap by this session (the records, their ids, buckets and guard
    /// window).
    pub fn heap_bytes(&self) -> usize {
        let ids = self.ids.as_ref().map_or(0, |ids| {
            std::mem::size_of::<Ring<Ids>>() + ids.capacity() * std::mem::size_of::<Ids>()
        });
        self.history.capacity() * std::mem::size_of::<Record<N>>()
            + ids
            + self.runs.capacity() * std::mem::size_of::<u64>()
            + self.buckets.heap_bytes()
            + self.guard.heap_bytes()
    }

    /// The call id and unknown-tool digest of the record `back` places before the newest.
    fn ids(&self, back: usize) -> Ids {
        self.ids
            .as_ref()
            .and_then(|ids| ids.back(back))
            .copied()
            .unwrap_or_default()
    }

    /// Mutable access to them, allocating the ids of every record on first use.
    fn ids_mut(&mut self, back: usize) -> Option<&mut Ids> {
        let history = &self.history;
        let ids = self.ids.get_or_insert_with(|| {
            let mut ids = Ring::new(history.capacity());
            for _ in 0..history.len() {
                ids.push(Ids::default());
            }
            Box::new(ids)
        });
        ids.back_mut(back)
    }

    /// The digest of the unknown tool the record `back` places before the newest named, if
    /// any.
    pub fn unknown_tool(&self, back: usize) -> Option<u64> {
        let record = self.history.back(back)?;
        record.has(HAS_UNKNOWN).then(|| self.ids(back).unknown)
    }

    /// The digests of every name the records refer to (tools and unknown tools).
    pub fn name_digests(&self) -> impl Iterator<Item = u64> + '_ {
        self.history
            .iter_newest_first()
            .enumerate()
            .flat_map(|(back, r)| std::iter::once(r.tool).chain(self.unknown_tool(back)))
    }

    /// `key` with its run id as the records hold it: its index in `runs`, or one no record
    /// has when no record is in that run.
    fn local(&self, key: &CallKey) -> CallKey {
        let index = |run| {
            self.runs
                .iter()
                .position(|&known| known == run)
                .map_or(u64::MAX, |i| i as u64)
        };
        CallKey {
            run: key.run.map(index),
            ..*key
        }
    }

    /// Whether every record is in the run scope of `key` (a [`Self::local`] key) with no record
    /// read: a record has a run only if `runs` holds its id (they are swept of ids no record
    /// holds), so with none and `key` of no run, all are. The passes over a warned cycle's tail
    /// skip the check then.
    fn every_record_in(&self, key: &CallKey) -> bool {
        self.runs.is_empty() && key.run.is_none()
    }

    /// The index of `run` in `runs`, added if new. Past twice the history's capacity (plus
    /// slack) the run ids no record refers to are dropped first, so the list stays bounded
    /// and that sweep runs at most once per `capacity + 8` new run ids.
    fn run_index(&mut self, run: u64) -> u32 {
        if let Some(i) = self.runs.iter().position(|&known| known == run) {
            return i as u32;
        }
        if self.runs.len() >= 2 * self.history.capacity() + 8 {
            self.sweep_runs();
        }
        // Grown one run at a time: a session starts few runs.
        self.runs.reserve_exact(1);
        self.runs.push(run);
        // At most `2 * MAX_HISTORY_SIZE + 9` run ids: the index fits a u32.
        (self.runs.len() - 1) as u32
    }

    /// Keep the run ids the records refer to, in the order of their oldest record.
    fn sweep_runs(&mut self) {
        let mut moved = vec![u32::MAX; self.runs.len()];
        let mut kept = Vec::new();
        for back in (0..self.history.len()).rev() {
            let Some(record) = self.history.back_mut(back) else {
                continue;
            };
            if !record.has(HAS_RUN) {
                continue;
            }
            let old = record.run as usize;
            if moved.get(old) == Some(&u32::MAX) {
                moved[old] = kept.len() as u32;
                kept.push(self.runs[old]);
            }
            record.run = moved.get(old).copied().unwrap_or(0);
        }
        self.runs = kept;
    }

    /// Append a call without a result.
    pub fn record_call(&mut self, key: &CallKey, call_id: Option<u64>, payload: N) {
        let mut flags = RunScope::of(key.run).flag;
        if call_id.is_some() {
            flags |= HAS_CALL_ID;
        }
        let record = Record {
            tool: key.tool,
            args: key.args,
            run: key.run.map_or(0, |run| self.run_index(run)),
            result: 0,
            flags,
            payload,
        };
        let ids = Ids {
            call_id: call_id.unwrap_or(0),
            unknown: 0,
        };
        self.push(record, ids);
    }

    /// Append a record and its ids (allocating the ids only once one is not 0).
    fn push(&mut self, record: Record<N>, ids: Ids) {
        self.history.push(record);
        match &mut self.ids {
            Some(all) => all.push(ids),
            None if ids.call_id != 0 || ids.unknown != 0 => {
                if let Some(newest) = self.ids_mut(0) {
                    *newest = ids;
                }
            }
            None => {}
        }
    }

    /// Fill the record `back` places before the newest with `outcome`.
    fn fill(&mut self, back: usize, outcome: Outcome, flags: u8) {
        let Some(record) = self.history.back_mut(back) else {
            return;
        };
        record.result = outcome.result;
        record.flags |= flags;
        match (outcome.unknown, self.ids.is_some()) {
            (Some(unknown), _) => {
                if let Some(ids) = self.ids_mut(back) {
                    ids.unknown = unknown;
                }
            }
            (None, true) => {
                if let Some(ids) = self.ids_mut(back) {
                    ids.unknown = 0;
                }
            }
            (None, false) => {}
        }
    }

    /// Fill the newest matching pending record with `outcome`, or append one; either way the
    /// record's payload becomes `payload`.
    pub fn record_outcome(&mut self, key: &CallKey, call_id: Option<u64>, outcome: Outcome, payload: N) {
        let mut unknown_flags = HAS_RESULT;
        if outcome.unknown.is_some() {
            unknown_flags |= HAS_UNKNOWN;
        }
        let scope = RunScope::of(self.local(key).run);
        for back in 0..self.history.len() {
            let Some(record) = self.history.back(back) else {
                break;
            };
            let matches = !record.has(HAS_RESULT)
                && record.same_call(key, scope)
                && call_id.is_none_or(|id| record.has(HAS_CALL_ID) && self.ids(back).call_id == id);
            if matches {
                self.fill(back, outcome, unknown_flags);
                if let Some(record) = self.history.back_mut(back) {
                    record.payload = payload;
                }
                return;
            }
        }
        self.record_call(key, call_id, payload);
        self.fill(0, outcome, unknown_flags);
    }

    /// The verdict for `key` now, without side effects (`None`: not stuck).
    pub fn detect(&self, key: &CallKey) -> Option<Finding> {
        // A policy's thresholds in place of the config's (a copy only for such a call).
        let limited;
        let (c, lowest_threshold, lowest_window_threshold) = match key.limits {
            None => (&self.config, self.lowest_threshold, self.lowest_window_threshold),
            Some(limits) => {
                limited = LoopConfig {
                    warning: limits.warning,
                    critical: limits.critical,
                    global: limits.global,
                    ..self.config
                };
                let (lowest, window) = lowest_thresholds(&limited);
                (&limited, lowest, window)
            }
        };
        // Every count is bounded by the history's length (a ping-pong count by one more): while
        // the history is shorter than the lowest threshold, no detector can fire.
        if !c.detect || self.history.len() + 1 < lowest_threshold {
            return None;
        }
        // Likewise the streak and the recent count (the one pass over the whole window) are
        // only counted once the history could hold enough records to reach their thresholds
        // (or a cycle's count, one more, the warning threshold: the cycle and churn rules
        // need the recent count first).
        let count_window = self.history.len() + 1 >= lowest_window_threshold;
        // Records are scoped by the run's index.
        let key = &self.local(key);
        let scan = Scan::run(&self.history, self.ids.as_deref(), key, count_window);
        let finding = |level, detector, count, key_digest, result, other, source_back| Finding {
            level,
            detector,
            count,
            key: key_digest,
            result,
            other,
            pattern: 0,
            source_back,
        };
        // Critical when `count` reaches the critical threshold with no-progress evidence,
        // a warning from the warning threshold on.
        let level_of = |count: u32, no_progress: bool| {
            if count >= c.critical && no_progress {
                Some(Level::Critical)
            } else if count >= c.warning {
                Some(Level::Warning)
            } else {
                None
            }
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
                if let Some(level) = level_of(count, no_progress) {
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
        // A cycle's calls each recur in the window: without this call there, there is none.
        if c.cycle && scan.recent > 0 {
            if let Some(m) = cycle_match(&self.history, key, c.warning.min(c.critical), self.every_record_in(key)) {
                if let Some(level) = level_of(m.count, m.no_progress) {
                    return Some(Finding {
                        pattern: m.period as u32,
                        ..finding(level, Detector::Cycle, m.count, m.key, 0, 0, scan.newest_back)
                    });
                }
            }
        }
        let generic = !key.known_poll && c.generic_repeat;
        if generic && streak >= c.critical {
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
        // Churn needs this call's args among those repeated in the tail, with one result: the
        // newest of this call's records, so its streak.
        if c.argument_churn && streak >= MIN_CHURN_REPEATS {
            if let Some(m) = churn_match(&self.history, key) {
                // Each argument set's outcome is constant by construction: no-progress evidence.
                if let Some(level) = level_of(m.count, true) {
                    let k = hash_two(key_tag::CHURN, key.tool, m.sets);
                    return Some(Finding {
                        pattern: m.variants,
                        ..finding(level, Detector::ArgumentChurn, m.count, k, 0, m.sets, None)
                    });
                }
            }
        }
        if generic && scan.recent >= c.warning {
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

/// One agent session's whole state: the history and guard, plus the names its records refer
/// to (for messages). Plain data throughout, what a snapshot saves. The read-only queries are
/// the session's (through `Deref`); every update goes through here, so no record lacks its name.
#[derive(Clone, Debug)]
pub struct NamedSession {
    /// The checked [`TOOL_LOOP`] values the session was built from (shared with
    /// every session built from equal values).
    settings: Arc<[Value]>,
    session: ToolLoopSession<()>,
    names: NameTable,
    /// The warning key of the finding the last call was blocked for (`None`: it was not), so
    /// a loop that keeps being blocked is one episode (logged once), not one per call.
    blocking: Option<u64>,
    stats: ToolLoopStats,
}

/// Counts since the detector was built (what `get_stats()` reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolLoopStats {
    /// Calls decided by `before_call`.
    pub calls: u64,
    /// Warnings emitted.
    pub warnings: u64,
    /// Calls blocked.
    pub blocks: u64,
    /// Blocked episodes (a loop blocked again and again is one).
    pub blocked_episodes: u64,
    /// Finished calls reported (`after_call` or `record_outcome`, a veto or no result included).
    pub outcomes: u64,
    /// Post-compaction guard aborts.
    pub guard_aborts: u64,
}

impl std::ops::Deref for NamedSession {
    type Target = ToolLoopSession<()>;

    fn deref(&self) -> &ToolLoopSession<()> {
        &self.session
    }
}

impl NamedSession {
    /// A session from checked [`TOOL_LOOP`] values, and how its thresholds were
    /// reordered (see [`LoopConfig::from_values`]).
    pub fn new(settings: Vec<Value>) -> (Self, Vec<String>) {
        let (config, fixes) = LoopConfig::from_values(&settings);
        let session = NamedSession {
            settings: shared(settings),
            session: ToolLoopSession::new(config),
            names: NameTable::default(),
            blocking: None,
            stats: ToolLoopStats::default(),
        };
        (session, fixes)
    }

    pub fn settings(&self) -> &[Value] {
        &self.settings
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
        self.stats.outcomes += 1;
        self.session.record_outcome(key, call_id, outcome, ());
    }

    /// The decision for a call about to run, and whether it starts a new blocked episode (the
    /// call is blocked, and the one before was not, or for another finding).
    pub fn before_call(&mut self, key: &CallKey, call_id: Option<u64>, tool: &str) -> (Decision, bool) {
        self.remember(key.tool, tool);
        let decision = self.session.before_call(key, call_id, ());
        let blocking = decision.finding.filter(|_| decision.blocked).map(|f| f.key);
        let new_episode = blocking.is_some() && blocking != self.blocking;
        self.blocking = blocking;
        let stats = &mut self.stats;
        stats.calls += 1;
        stats.warnings += u64::from(decision.emit_warning);
        stats.blocks += u64::from(decision.blocked);
        stats.blocked_episodes += u64::from(new_episode);
        (decision, new_episode)
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
        self.stats.outcomes += 1;
        let verdict = self.session.after_call(key, call_id, outcome, ());
        self.stats.guard_aborts += u64::from(matches!(verdict, Some(GuardVerdict::Abort(_))));
        verdict
    }

    pub fn stats(&self) -> ToolLoopStats {
        self.stats
    }

    pub fn arm_guard(&mut self) -> u32 {
        self.session.arm_guard()
    }

    /// The names of a finding's source record: its tool, and the unknown tool it named.
    pub fn source_names(&self, finding: &Finding) -> (Option<&str>, Option<&str>) {
        let source = finding.source_back.and_then(|back| self.session.record(back));
        (
            source.and_then(|r| self.names.get(r.tool())),
            finding
                .source_back
                .and_then(|back| self.names.get(self.session.unknown_tool(back)?)),
        )
    }

    /// A cycle finding's calls (tool name and args identity) in call order from the call it
    /// judged (`key`, named `tool`): that call, then the records that follow it in the cycle,
    /// from the one before the newest to the newest. (The cycle's oldest record is the same
    /// call; it may have left a full history by the time this is read.) Written into `calls`
    /// (a cycle has at most [`MAX_CYCLE_PERIOD`] of them: no allocation); returns how many,
    /// none for any other finding.
    pub fn cycle_calls<'a>(
        &'a self,
        finding: &Finding,
        key: &CallKey,
        tool: &'a str,
        calls: &mut [(&'a str, u64); MAX_CYCLE_PERIOD],
    ) -> usize {
        let (Detector::Cycle, Some(newest)) = (finding.detector, finding.source_back) else {
            return 0;
        };
        let local = self.session.local(key);
        let (scope, every) = (RunScope::of(local.run), self.session.every_record_in(&local));
        let period = (finding.pattern as usize).clamp(1, MAX_CYCLE_PERIOD);
        calls[0] = (tool, key.args);
        let mut used = 1;
        // The records after the `newest` newest, in the call's run, newest first: a plain loop
        // over the ring's halves (a warned cycle reads them on every call).
        let mut back = 0;
        'walk: for half in self.session.history.halves() {
            for record in half.iter().rev() {
                back += 1;
                if back <= newest || !(every || record.in_run(scope)) {
                    continue;
                }
                if used == period {
                    break 'walk;
                }
                // Most cycles are of one tool: the call's own name, with no lookup.
                let name = if record.tool == key.tool {
                    tool
                } else {
                    self.names.get(record.tool).unwrap_or_default()
                };
                calls[used] = (name, record.args);
                used += 1;
            }
        }
        // Newest first after the judged call: the call order is the judged call, then oldest
        // to newest.
        calls[1..used].reverse();
        used
    }

    /// Bytes held on the heap: the session's and the names'.
    pub fn heap_bytes(&self) -> usize {
        self.session.heap_bytes() + self.names.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::scan::scoped;
    use super::*;

    #[test]
    fn joined_pieces_read_as_format_prints_them() {
        for number in [0, 7, 10, 99, 12_345, u64::from(u32::MAX), u64::MAX] {
            for digest in [0, 1, 0xabc, 0x0123_4567_89ab_cdef, u64::MAX] {
                assert_eq!(
                    join(&[
                        Text("é:"),
                        Num(number),
                        Text(" "),
                        Hex(digest),
                        Text(""),
                        Id("t", digest)
                    ]),
                    format!("é:{number} {digest:016x}t:{digest:016x}")
                );
            }
        }
        assert_eq!(join(&[]), "");
    }
    use crate::fingerprint::{hash_action, hash_i64, hash_str};

    fn key(tool: &str, arg: i64) -> CallKey {
        let t = hash_str(tool.as_bytes());
        CallKey {
            tool: t,
            args: hash_action(t, hash_i64(arg)),
            run: None,
            known_poll: false,
            limits: None,
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

    /// A call of `tool` under a policy with these thresholds.
    fn limited(tool: &str, warning: u32, critical: u32, global: u32) -> CallKey {
        CallKey {
            limits: Some(ToolLimits {
                warning,
                critical,
                global,
            }),
            ..key(tool, 1)
        }
    }

    #[test]
    fn a_calls_policy_thresholds_judge_it() {
        // The config warns at 3 and blocks at 5; this tool's policy gives it 6 and 9, and
        // another tool's policy gives none (a warning at 1, a block at 2).
        let mut s = ToolLoopSession::new(config(3, 5, 8));
        let room = limited("wait", 6, 9, 12);
        let levels: Vec<_> = (0..10)
            .map(|_| call(&mut s, &room, 7).finding.map(|f| f.level))
            .collect();
        let expected = [
            [None; 6].as_slice(),
            &[Some(Level::Warning); 3],
            &[Some(Level::Critical)],
        ]
        .concat();
        assert_eq!(levels, expected);
        let none = limited("deploy", 1, 2, 3);
        let levels: Vec<_> = (0..3)
            .map(|_| call(&mut s, &none, 7).finding.map(|f| f.level))
            .collect();
        assert_eq!(levels, [None, Some(Level::Warning), Some(Level::Critical)]);
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

    /// A session with OpenClaw's rules only (doomloop's own off).
    fn openclaw(c: LoopConfig) -> LoopConfig {
        LoopConfig {
            cycle: false,
            argument_churn: false,
            hash_plain_results: false,
            ..c
        }
    }

    #[test]
    fn a_cycle_of_five_warns_then_blocks_with_stable_results() {
        let keys: Vec<CallKey> = ["read", "grep", "edit", "test", "diff"]
            .iter()
            .enumerate()
            .map(|(i, tool)| key(tool, i as i64))
            .collect();
        let mut s = ToolLoopSession::new(LoopConfig::default());
        let mut first = Vec::new();
        for n in 0..25 {
            let k = &keys[n % 5];
            let d = call(&mut s, k, 100 + (n % 5) as u64);
            if let Some(f) = d.finding {
                first.push((n, f.level, f.detector, f.count, f.pattern));
            }
        }
        // The 10th call (n = 9) is the first whose count (9 in the tail + itself) reaches the
        // warning threshold; the 20th (n = 19) reaches the critical one and is blocked, and
        // so is every retry (a veto is not recorded).
        assert_eq!(first[0], (9, Level::Warning, Detector::Cycle, 10, 5));
        assert_eq!(first[9], (18, Level::Warning, Detector::Cycle, 19, 5));
        assert_eq!(first[10], (19, Level::Critical, Detector::Cycle, 20, 5));
        assert!(first[10..].iter().all(|f| (f.1, f.3) == (Level::Critical, 20)));
        // OpenClaw's rules alone never flag it.
        let mut plain = ToolLoopSession::new(openclaw(LoopConfig::default()));
        for n in 0..40 {
            assert_eq!(call(&mut plain, &keys[n % 5], 100 + (n % 5) as u64).finding, None);
        }
    }

    #[test]
    fn a_cycle_key_is_the_same_from_every_call_and_changing_results_only_warn() {
        let keys: Vec<CallKey> = (0..3).map(|i| key("read", i)).collect();
        let mut s = ToolLoopSession::new(config(6, 9, 30));
        let mut found = Vec::new();
        for n in 0..30 {
            // Results change every round: progress, so never critical.
            let d = call(&mut s, &keys[n % 3], n as u64);
            found.extend(d.finding);
        }
        assert!(found
            .iter()
            .all(|f| f.detector == Detector::Cycle && f.level == Level::Warning));
        assert!(found.iter().all(|f| f.key == found[0].key));
        assert_eq!(found[0].count, 6);
    }

    #[test]
    fn a_cycle_needs_two_full_rounds_and_no_shorter_period() {
        // a..h once, then a again: the 8-call pattern has not been repeated yet.
        let keys: Vec<CallKey> = (0..8).map(|i| key("t", i)).collect();
        let mut s = ToolLoopSession::new(config(3, 40, 50));
        for k in &keys {
            call(&mut s, k, 1);
        }
        call(&mut s, &keys[0], 1);
        assert_eq!(s.detect(&keys[1]).map(|f| f.detector), None);
        // a b a b ... is ping-pong's, not a cycle of 4.
        let mut s = ToolLoopSession::new(LoopConfig {
            ping_pong: false,
            argument_churn: false,
            ..config(3, 40, 50)
        });
        for n in 0..12 {
            call(&mut s, &keys[n % 2], 1);
        }
        assert_ne!(s.detect(&keys[0]).map(|f| f.detector), Some(Detector::Cycle));
        // a b a c is a pattern of its own (primitive).
        let mut s = ToolLoopSession::new(config(8, 40, 50));
        let order = [0, 1, 0, 2];
        for n in 0..8 {
            call(&mut s, &keys[order[n % 4]], 1);
        }
        let f = s.detect(&keys[order[0]]).unwrap_or_else(|| panic!("expected a cycle"));
        assert_eq!((f.detector, f.count, f.pattern), (Detector::Cycle, 9, 4));
    }

    #[test]
    fn argument_churn_counts_a_tool_cycling_through_a_few_argument_sets() {
        let sets: Vec<CallKey> = (0..3).map(|i| key("read", i)).collect();
        let mut s = ToolLoopSession::new(LoopConfig {
            cycle: false,
            ..LoopConfig::default()
        });
        // An irregular order (no fixed cycle), each set with its own unchanging result.
        let order = [0, 1, 1, 2, 0, 2, 1, 0, 0, 2, 1, 2, 0, 1, 2, 2, 0, 1, 0, 2, 1, 1, 0];
        let mut found = Vec::new();
        for (n, &i) in order.iter().enumerate() {
            let d = call(&mut s, &sets[i], 10 + i as u64);
            if let Some(f) = d.finding {
                found.push((n, f.level, f.detector, f.count, f.pattern));
            }
        }
        assert_eq!(found[0], (10, Level::Warning, Detector::ArgumentChurn, 10, 3));
        assert_eq!(
            found.last(),
            Some(&(22, Level::Critical, Detector::ArgumentChurn, 20, 3))
        );
        // A result that changes ends the tail.
        let mut s = ToolLoopSession::new(LoopConfig::default());
        for (n, &i) in order.iter().enumerate() {
            let result = if n == 8 { 99 } else { 10 + i as u64 };
            call(&mut s, &sets[i], result);
        }
        assert_eq!(s.detect(&sets[0]).map(|f| f.count), Some(14));
        // Another tool in between ends it too; OpenClaw's rules alone never flag it.
        let mut plain = ToolLoopSession::new(openclaw(LoopConfig::default()));
        for &i in &order {
            assert_eq!(call(&mut plain, &sets[i], 10 + i as u64).finding, None);
        }
    }

    #[test]
    fn a_batch_of_new_calls_is_no_churn() {
        let churn_only = |warning, critical, global| LoopConfig {
            cycle: false,
            ..config(warning, critical, global)
        };
        let mut s = ToolLoopSession::new(churn_only(3, 5, 30));
        // Two passes over three files, then more new ones: no set recurs three times.
        for i in [0, 1, 2, 0, 1, 2, 3, 4, 5, 6] {
            assert_eq!(call(&mut s, &key("read", i), 1).finding, None);
        }
        // Two sets repeated, but too many one-off probes between them.
        let mut s = ToolLoopSession::new(churn_only(3, 50, 60));
        for i in [0, 1, 0, 1, 0, 1, 7, 8, 9] {
            call(&mut s, &key("read", i), 1);
        }
        assert_ne!(
            s.detect(&key("read", 0)).map(|f| f.detector),
            Some(Detector::ArgumentChurn)
        );
        // The call itself must be one of the repeated sets.
        let mut s = ToolLoopSession::new(churn_only(3, 50, 60));
        for i in [0, 1, 1, 0, 1, 0] {
            call(&mut s, &key("read", i), 1);
        }
        assert_eq!(
            s.detect(&key("read", 0)).map(|f| f.detector),
            Some(Detector::ArgumentChurn)
        );
        assert_eq!(s.detect(&key("read", 5)), None);
    }

    #[test]
    fn canonical_rotation_starts_at_the_smallest_rotation() {
        assert_eq!(canonical_rotation(&[3, 1, 2]), 1);
        assert_eq!(canonical_rotation(&[2, 1, 3, 1, 2]), 3);
        assert_eq!(cycle_key(&[1, 2, 3]), cycle_key(&[2, 3, 1]));
        assert_ne!(cycle_key(&[1, 2, 3]), cycle_key(&[1, 3, 2]));
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

    #[test]
    fn a_restored_session_answers_as_the_original() {
        use crate::snapshot::Snapshot;
        let mut values = TOOL_LOOP.defaults();
        values[TOOL_LOOP.index("warning_threshold").unwrap()] = Value::Count(3);
        values[TOOL_LOOP.index("critical_threshold").unwrap()] = Value::Count(5);
        let (mut original, _) = NamedSession::new(values);
        let (a, b) = (key("read", 1), key("list", 2));
        let name_of = |i: u64| if i % 2 == 0 { "read" } else { "list" };
        original.arm_guard();
        for i in 0..4 {
            let k = if i % 2 == 0 { &a } else { &b };
            original.before_call(k, Some(i), name_of(i));
            let ghost = Outcome {
                result: 7,
                unknown: Some(99),
            };
            original.after_call(k, Some(i), Some(ghost), name_of(i), Some("ghost"));
        }
        let data = original.to_snapshot();
        let mut twin = NamedSession::from_snapshot(&data).unwrap();
        assert_eq!(twin.to_snapshot(), data);
        for i in 4..12 {
            let k = if i % 2 == 0 { &a } else { &b };
            let name = name_of(i);
            let ((d1, e1), (d2, e2)) = (original.before_call(k, None, name), twin.before_call(k, None, name));
            assert_eq!(e1, e2);
            assert_eq!(
                (d1.blocked, d1.emit_warning, d1.finding),
                (d2.blocked, d2.emit_warning, d2.finding)
            );
            if let Some(f) = d1.finding {
                assert_eq!(original.source_names(&f), twin.source_names(&f));
            }
            let g1 = original.after_call(k, None, outcome(7), name, None);
            assert_eq!(g1, twin.after_call(k, None, outcome(7), name, None));
        }
        let mut cut = data.clone();
        cut.truncate(data.len() - 9);
        assert!(NamedSession::from_snapshot(&cut).is_err());
    }

    #[test]
    fn call_ids_first_seen_after_the_ring_wrapped_stay_with_their_records() {
        assert_eq!(std::mem::size_of::<Record<()>>(), 32);
        let mut s: ToolLoopSession<()> = ToolLoopSession::new(LoopConfig {
            history_size: 4,
            ..LoopConfig::default()
        });
        // Six calls without ids wrap the ring; no ids are kept for them.
        for arg in 0..6 {
            s.record_call(&key("read", arg), None, ());
        }
        assert!(s.ids.is_none());
        s.record_call(&key("read", 6), Some(60), ());
        s.record_call(&key("read", 7), None, ());
        // The outcome for call id 60 fills its record (two back), not a new one.
        let ghost = Outcome {
            result: 5,
            unknown: Some(9),
        };
        s.record_outcome(&key("read", 6), Some(60), ghost, ());
        assert_eq!(s.history_len(), 4);
        assert_eq!((s.ids(1).call_id, s.unknown_tool(1)), (60, Some(9)));
        assert_eq!(s.record(1).and_then(Record::result), Some(5));
        assert_eq!((s.ids(0).call_id, s.unknown_tool(0)), (0, None));
        assert_eq!((s.ids(2).call_id, s.unknown_tool(2)), (0, None));
        // A call id that names no pending record appends one.
        s.record_outcome(&key("read", 6), Some(61), ghost, ());
        assert_eq!((s.ids(0).call_id, s.unknown_tool(0)), (61, Some(9)));
        assert_eq!(s.ids(2).call_id, 60);
    }

    #[test]
    fn run_ids_stay_few_and_keep_scoping_when_every_call_starts_a_run() {
        let mut s: ToolLoopSession<()> = ToolLoopSession::new(LoopConfig {
            history_size: 4,
            ..LoopConfig::default()
        });
        let in_run = |run| CallKey { run, ..key("read", 1) };
        for run in 0..100 {
            s.record_call(&in_run(Some(run)), None, ());
            assert!(s.runs.len() <= 2 * 4 + 8);
        }
        let newest: Vec<u64> = (0..4)
            .filter_map(|back| s.record(back))
            .map(|r| s.runs[r.run as usize])
            .collect();
        assert_eq!(newest, [99, 98, 97, 96]);
        let count = |run| scoped(&s.history, s.local(&in_run(run)).run).count();
        assert_eq!((count(Some(98)), count(Some(5)), count(None)), (1, 0, 0));
    }
}
