//! What a finished tool call leaves for the loop rules to compare: OpenClaw's result hashing
//! (exec, process poll/log, send-like tools with volatile ids stripped, the generic
//! `{details, text}` rule, the loop veto, error texts), doomloop's hashing of results that are
//! not OpenClaw-shaped, the built-in tool kinds and the known-poll rule.
//!
//! The rules read a result through [`ResultValue`], a read-only view of a JSON-like value:
//! the binding layer implements it for Python objects (reading dicts in place, so the hot
//! path builds no intermediate objects), and a reader of recorded traces can implement it for
//! parsed JSON, so that a scanned trace and a live hook hash alike.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::fingerprint::{self as fp, hash_none};
use crate::unknown_tool::{trim_js_space, trim_js_space_bytes, unknown_tool_name};

/// Ids that change on every send and must not make two identical sends look different.
pub const VOLATILE_KEYS: [&str; 18] = [
    "messageId",
    "message_id",
    "messageIds",
    "platformMessageId",
    "platformMessageIds",
    "fileId",
    "file_id",
    "fileKey",
    "pollId",
    "poll_id",
    "receipt",
    "runId",
    "idempotencyKey",
    "ts",
    "timestamp",
    "sentAt",
    "deliveredAt",
    "createdAt",
];

/// `message` actions that send something (their results are hashed as sends).
pub const SEND_ACTIONS: [&str; 9] = [
    "send",
    "broadcast",
    "reply",
    "thread-reply",
    "sendWithEffect",
    "sendAttachment",
    "upload-file",
    "sticker",
    "poll",
];

/// `details.status` and `details.deniedReason` of the result a blocked call returns (the
/// loop veto); such a result is never recorded as an outcome.
pub const VETO_STATUS: &str = "blocked";
pub const VETO_REASON: &str = "tool-loop";

/// The tool names the built-in rules single out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolKind {
    Exec,
    Process,
    CommandStatus,
    SessionsSend,
    Message,
    Other,
}

impl ToolKind {
    pub fn of(name: &str) -> ToolKind {
        match name {
            "exec" => ToolKind::Exec,
            "process" => ToolKind::Process,
            "command_status" => ToolKind::CommandStatus,
            "sessions_send" => ToolKind::SessionsSend,
            "message" => ToolKind::Message,
            _ => ToolKind::Other,
        }
    }
}

/// The field names the rules read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Action,
    Aggregated,
    Command,
    Content,
    DeniedReason,
    Details,
    ExitCode,
    ExitSignal,
    Host,
    Reason,
    Status,
    Tail,
    Text,
    TimedOut,
    TotalChars,
    TotalLines,
    Truncated,
    Type,
    WarningText,
}

impl Field {
    /// Every field, in declaration order (`ALL[f as usize] == f`).
    pub const ALL: [Field; 19] = [
        Field::Action,
        Field::Aggregated,
        Field::Command,
        Field::Content,
        Field::DeniedReason,
        Field::Details,
        Field::ExitCode,
        Field::ExitSignal,
        Field::Host,
        Field::Reason,
        Field::Status,
        Field::Tail,
        Field::Text,
        Field::TimedOut,
        Field::TotalChars,
        Field::TotalLines,
        Field::Truncated,
        Field::Type,
        Field::WarningText,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Field::Action => "action",
            Field::Aggregated => "aggregated",
            Field::Command => "command",
            Field::Content => "content",
            Field::DeniedReason => "deniedReason",
            Field::Details => "details",
            Field::ExitCode => "exitCode",
            Field::ExitSignal => "exitSignal",
            Field::Host => "host",
            Field::Reason => "reason",
            Field::Status => "status",
            Field::Tail => "tail",
            Field::Text => "text",
            Field::TimedOut => "timedOut",
            Field::TotalChars => "totalChars",
            Field::TotalLines => "totalLines",
            Field::Truncated => "truncated",
            Field::Type => "type",
            Field::WarningText => "warningText",
        }
    }

    /// The digest of the field's name as a string key (computed at compile time).
    pub fn digest(self) -> u64 {
        const DIGESTS: [u64; 19] = {
            let mut digests = [0u64; 19];
            let mut i = 0;
            while i < Field::ALL.len() {
                digests[i] = fp::hash_str_const(Field::ALL[i].name().as_bytes());
                i += 1;
            }
            digests
        };
        DIGESTS[self as usize]
    }
}

/// A read-only view of a JSON-like value (a result, its `details`, a call's params) as the
/// rules read it. Lookups that fail count as absent; nothing here may fail.
pub trait ResultValue: Sized {
    /// The value under `field` when this is a mapping that holds it.
    fn field(&self, field: Field) -> Option<Self>;
    /// Whether this is a mapping (a JSON object).
    fn is_mapping(&self) -> bool;
    /// Whether this is a string.
    fn is_str(&self) -> bool;
    /// The text when this is a string holding valid Unicode (no lone surrogates).
    fn as_str(&self) -> Option<&str>;
    /// The exact text when this is a string: UTF-8, with lone surrogates encoded as such
    /// (`surrogatepass`), so that no two texts read alike.
    fn text_bytes(&self) -> Option<Cow<'_, [u8]>>;
    /// Each item, when this is a sequence (a JSON array).
    fn for_each_item(&self, each: &mut dyn FnMut(Self));
    /// The canonical fingerprint of the whole value.
    fn digest(&self) -> u64;
    /// The canonical fingerprint with every mapping entry whose key `skip` accepts left out,
    /// at every depth.
    fn digest_skipping(&self, skip: &dyn Fn(&str) -> bool) -> u64;
    /// [`ResultValue::digest_skipping`] with volatile parts masked at every depth: each text
    /// as [`crate::volatile::mask`] masks it, and a number or text under a key that
    /// [`crate::volatile::is_volatile_quantity`] names as the one-byte text [`crate::volatile::MASK`].
    /// A value with nothing to mask keeps its [`ResultValue::digest`].
    fn digest_masked(&self, skip: &dyn Fn(&str) -> bool) -> u64;
}

/// Extension rules that are plain data: tool-name aliases, extra known polls, extra volatile
/// keys. (Rules that run user code, such as normalisers, stay with the caller.)
#[derive(Clone, Debug, Default)]
pub struct ToolRules {
    pub aliases: HashMap<String, String>,
    pub known_polls: HashSet<String>,
    pub volatile_keys: HashSet<String>,
}

impl ToolRules {
    pub fn is_empty(&self) -> bool {
        self.aliases.is_empty() && self.known_polls.is_empty() && self.volatile_keys.is_empty()
    }

    /// The name a call to `tool` counts as.
    pub fn alias<'a>(&'a self, tool: &str) -> Option<&'a str> {
        self.aliases.get(tool).map(String::as_str)
    }

    /// Whether `key` is stripped from send-like results (the built-in ids or an extra one).
    pub fn is_volatile(&self, key: &str) -> bool {
        VOLATILE_KEYS.contains(&key) || self.volatile_keys.contains(key)
    }

    /// Bytes held on the heap (an estimate: the strings and a word per table slot).
    pub fn heap_bytes(&self) -> usize {
        let strings = |set: &HashSet<String>| set.iter().map(|s| s.capacity() + 24).sum::<usize>();
        strings(&self.known_polls)
            + strings(&self.volatile_keys)
            + self
                .aliases
                .iter()
                .map(|(k, v)| k.capacity() + v.capacity() + 48)
                .sum::<usize>()
    }
}

/// Whether a call is a known poll: `command_status`, `process` with action `poll` or `log`,
/// or a tool the rules name.
pub fn is_known_poll<V: ResultValue>(
    kind: ToolKind,
    tool: Option<&str>,
    params: Option<&V>,
    rules: Option<&ToolRules>,
) -> bool {
    match kind {
        ToolKind::CommandStatus => true,
        ToolKind::Process => matches!(
            field(params, Field::Action).as_ref().and_then(ResultValue::as_str),
            Some("poll" | "log")
        ),
        _ => match (rules, tool) {
            (Some(rules), Some(tool)) => rules.known_polls.contains(tool),
            _ => false,
        },
    }
}

/// The digest of a call's error (kept apart from any result: an error "boom" is not a result
/// "boom") from its exact text, and the unknown tool the text names, read from its display
/// form (where a lone surrogate shows as U+FFFD).
pub fn error_outcome(exact: &[u8], display: &str) -> (u64, Option<String>) {
    (fp::hash_error(exact), unknown_tool_name(display))
}

/// What the caller's own extension points decide for one result (each may fail with `E`).
pub trait Extensions<V, E> {
    /// A user normaliser's digest for this result, replacing the built-in rules.
    fn normalised(&mut self, result: &V) -> Result<Option<u64>, E>;
    /// Whether a user predicate calls this call send-like.
    fn send_like(&mut self) -> Result<bool, E>;
    /// The digest of a result's `details` mapping ([`ResultValue::digest`]); a caller that
    /// remembers the last one may answer for the objects it still holds.
    fn details_digest(&mut self, details: &V) -> u64
    where
        V: ResultValue,
    {
        details.digest()
    }
}

/// No extension points.
pub struct NoExtensions;

impl<V, E> Extensions<V, E> for NoExtensions {
    fn normalised(&mut self, _result: &V) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn send_like(&mut self) -> Result<bool, E> {
        Ok(false)
    }
}

/// The digest a finished call's (non-null) result is recorded with, or `None` for the loop
/// veto (a blocked call's own result), which is never recorded.
///
/// With `plain_by_value`, a text result is compared with its volatile tokens masked
/// ([`crate::volatile::mask`]), and a mapping that has neither a `content` nor a `details` key (not
/// OpenClaw-shaped: `{"output": ...}`), or any other value, hashes by its canonical value with
/// its volatile parts masked ([`ResultValue::digest_masked`]), and with volatile ids left out
/// at every depth for a send-like call, where OpenClaw's rules would hash every such mapping
/// alike (`{details: {}, text: ""}`).
pub fn result_digest<V: ResultValue, E>(
    kind: ToolKind,
    params: Option<&V>,
    result: &V,
    rules: Option<&ToolRules>,
    plain_by_value: bool,
    extensions: &mut impl Extensions<V, E>,
) -> Result<Option<u64>, E> {
    if !result.is_mapping() {
        if let Some(digest) = extensions.normalised(result)? {
            return Ok(Some(digest));
        }
        // doomloop's keyword configuration: a text (or a list of records) that differs from
        // another only in its volatile tokens (a timestamp, a pid, ...) is the same result. A
        // value with none keeps its own digest.
        return Ok(Some(if plain_by_value {
            result.digest_masked(&|_| false)
        } else {
            result.digest()
        }));
    }
    let details = result.field(Field::Details);
    let plain = plain_by_value && details.is_none() && result.field(Field::Content).is_none();
    let details = details.filter(ResultValue::is_mapping);
    let details = details.as_ref();
    let status = field(details, Field::Status);
    if str_is(status.as_ref(), VETO_STATUS) && str_is(field(details, Field::DeniedReason).as_ref(), VETO_REASON) {
        return Ok(None);
    }
    if let Some(digest) = extensions.normalised(result)? {
        return Ok(Some(digest));
    }
    let is_volatile = |key: &str| match rules {
        Some(rules) => rules.is_volatile(key),
        None => VOLATILE_KEYS.contains(&key),
    };
    if plain {
        return Ok(Some(if is_send_like(kind, params, extensions)? {
            result.digest_masked(&is_volatile)
        } else {
            result.digest_masked(&|_| false)
        }));
    }
    let entry = |name: Field| {
        (
            name.digest(),
            field(details, name).map_or_else(hash_none, |v| v.digest()),
        )
    };
    // `status` was read above: its entry needs no second lookup.
    let status_entry = || {
        (
            Field::Status.digest(),
            status.as_ref().map_or_else(hash_none, ResultValue::digest),
        )
    };
    if kind == ToolKind::Exec {
        match status.as_ref().and_then(ResultValue::as_str) {
            Some("running") => return Ok(Some(hash_fields(&[status_entry(), entry(Field::Tail)]))),
            Some("completed" | "failed") => {
                let aggregated = field(details, Field::Aggregated);
                let output = match aggregated.as_ref().and_then(|a| Some((a, a.text_bytes()?))) {
                    Some((aggregated, text)) if !text.is_empty() => aggregated.digest(),
                    _ => content_text_digest(result),
                };
                return Ok(Some(hash_fields(&[
                    status_entry(),
                    entry(Field::ExitCode),
                    entry(Field::TimedOut),
                    (const { fp::hash_str_const(b"output") }, output),
                ])));
            }
            Some("approval-pending" | "approval-unavailable") => {
                return Ok(Some(hash_fields(&[
                    status_entry(),
                    entry(Field::Reason),
                    entry(Field::Host),
                    entry(Field::Command),
                    entry(Field::WarningText),
                ])));
            }
            _ => {}
        }
    }
    // Only `process` and `message` results depend on the action.
    let action = || field(params, Field::Action);
    if kind == ToolKind::Process {
        let text = || (Field::Text.digest(), content_text_digest(result));
        let action_entry = |a: &str| (Field::Action.digest(), fp::hash_str(a.as_bytes()));
        match action().as_ref().and_then(ResultValue::as_str) {
            Some("poll") => {
                return Ok(Some(hash_fields(&[
                    action_entry("poll"),
                    status_entry(),
                    entry(Field::ExitCode),
                    entry(Field::ExitSignal),
                    entry(Field::Aggregated),
                    text(),
                ])));
            }
            Some("log") => {
                return Ok(Some(hash_fields(&[
                    action_entry("log"),
                    status_entry(),
                    entry(Field::TotalLines),
                    entry(Field::TotalChars),
                    entry(Field::Truncated),
                    entry(Field::ExitCode),
                    entry(Field::ExitSignal),
                    text(),
                ])));
            }
            _ => {}
        }
    }
    if is_send_like(kind, params, extensions)? {
        let digest = match details {
            None => hash_fields(&[]),
            Some(details) => details.digest_skipping(&is_volatile),
        };
        return Ok(Some(digest));
    }
    let details_digest = match details {
        None => hash_fields(&[]),
        Some(details) => extensions.details_digest(details),
    };
    Ok(Some(hash_fields(&[
        (Field::Details.digest(), details_digest),
        (Field::Text.digest(), content_text_digest(result)),
    ])))
}

/// Whether a call's result is hashed as a send's: `sessions_send`, a `message` send action,
/// or what the caller's predicate says.
fn is_send_like<V: ResultValue, E>(
    kind: ToolKind,
    params: Option<&V>,
    extensions: &mut impl Extensions<V, E>,
) -> Result<bool, E> {
    match kind {
        ToolKind::SessionsSend => Ok(true),
        ToolKind::Message => Ok(field(params, Field::Action)
            .as_ref()
            .and_then(ResultValue::as_str)
            .is_some_and(|a| SEND_ACTIONS.contains(&a))),
        _ => extensions.send_like(),
    }
}

/// A small map's digest from (key digest, value digest) entries (callers pass at most 8).
pub fn hash_fields(entries: &[(u64, u64)]) -> u64 {
    fp::hash_map_entries(entries).unwrap_or_else(hash_none)
}

/// Digest of the `text` of every `content` entry with a string `type` and `text`, joined by
/// newlines and trimmed (JavaScript whitespace). The usual single part is hashed in place.
pub fn content_text_digest<V: ResultValue>(result: &V) -> u64 {
    let Some(content) = result.field(Field::Content) else {
        return const { fp::hash_str_const(b"") };
    };
    let mut first: Option<V> = None;
    let mut joined: Option<Vec<u8>> = None;
    content.for_each_item(&mut |entry| {
        if !entry.is_mapping() {
            return;
        }
        let Some(part) = entry.field(Field::Text).filter(ResultValue::is_str) else {
            return;
        };
        if !entry.field(Field::Type).is_some_and(|kind| kind.is_str()) {
            return;
        }
        match (&first, &mut joined) {
            (None, _) => first = Some(part),
            (Some(head), None) => {
                let mut text = head.text_bytes().unwrap_or_default().into_owned();
                text.push(b'\n');
                text.extend_from_slice(&part.text_bytes().unwrap_or_default());
                joined = Some(text);
            }
            (Some(_), Some(text)) => {
                text.push(b'\n');
                text.extend_from_slice(&part.text_bytes().unwrap_or_default());
            }
        }
    });
    match (joined, first) {
        (Some(text), _) => fp::hash_str(trim_js_space_bytes(&text)),
        (None, Some(part)) => match part.as_str() {
            // The usual single part: no copy, no second UTF-8 check.
            Some(text) => fp::hash_str(trim_js_space(text).as_bytes()),
            None => fp::hash_str(trim_js_space_bytes(&part.text_bytes().unwrap_or_default())),
        },
        (None, None) => const { fp::hash_str_const(b"") },
    }
}

fn field<V: ResultValue>(mapping: Option<&V>, name: Field) -> Option<V> {
    mapping?.field(name)
}

fn str_is<V: ResultValue>(value: Option<&V>, expected: &str) -> bool {
    value.and_then(ResultValue::as_str) == Some(expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Canon;
    use crate::volatile;

    /// A JSON value, as a trace reader would hold one: the rules read it like a Python one.
    #[derive(Clone, Debug)]
    enum Json {
        Null,
        Int(i64),
        Str(String),
        /// A string with lone surrogates, as its surrogatepass bytes.
        Raw(Vec<u8>),
        List(Vec<Json>),
        Map(Vec<(String, Json)>),
    }

    fn map(entries: &[(&str, Json)]) -> Json {
        Json::Map(entries.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect())
    }

    fn s(text: &str) -> Json {
        Json::Str(text.to_owned())
    }

    fn text_result(text: &str, details: Json) -> Json {
        map(&[
            (
                "content",
                Json::List(vec![map(&[("type", s("text")), ("text", s(text))])]),
            ),
            ("details", details),
        ])
    }

    fn walk(value: &Json, canon: &mut Canon, skip: &dyn Fn(&str) -> bool, masked: bool) -> u64 {
        let text = |bytes: &[u8]| match volatile::mask(bytes).filter(|_| masked) {
            Some(masked) => fp::hash_str(&masked),
            None => fp::hash_str(bytes),
        };
        match value {
            Json::Null => fp::hash_none(),
            Json::Int(i) => fp::hash_i64(*i),
            Json::Str(string) => text(string.as_bytes()),
            Json::Raw(bytes) => text(bytes),
            Json::List(items) => {
                let start = canon.mark();
                for item in items {
                    let digest = walk(item, canon, skip, masked);
                    canon.push(digest);
                }
                canon.finish_seq(start)
            }
            Json::Map(entries) => {
                let start = canon.mark();
                for (key, item) in entries.iter().filter(|(key, _)| !skip(key)) {
                    canon.push(text(key.as_bytes()));
                    let scalar = matches!(item, Json::Int(_) | Json::Str(_) | Json::Raw(_));
                    let digest = if masked && scalar && volatile::is_volatile_quantity(key.as_bytes()) {
                        fp::hash_str(&[volatile::MASK])
                    } else {
                        walk(item, canon, skip, masked)
                    };
                    canon.push(digest);
                }
                canon.finish_map(start)
            }
        }
    }

    impl ResultValue for Json {
        fn field(&self, field: Field) -> Option<Self> {
            match self {
                Json::Map(entries) => entries.iter().find(|(k, _)| k == field.name()).map(|(_, v)| v.clone()),
                _ => None,
            }
        }
        fn is_mapping(&self) -> bool {
            matches!(self, Json::Map(_))
        }
        fn is_str(&self) -> bool {
            matches!(self, Json::Str(_) | Json::Raw(_))
        }
        fn as_str(&self) -> Option<&str> {
            match self {
                Json::Str(text) => Some(text),
                _ => None,
            }
        }
        fn text_bytes(&self) -> Option<Cow<'_, [u8]>> {
            match self {
                Json::Str(text) => Some(Cow::Borrowed(text.as_bytes())),
                Json::Raw(bytes) => Some(Cow::Borrowed(bytes)),
                _ => None,
            }
        }
        fn for_each_item(&self, each: &mut dyn FnMut(Self)) {
            if let Json::List(items) = self {
                items.iter().cloned().for_each(each);
            }
        }
        fn digest(&self) -> u64 {
            walk(self, &mut Canon::new(), &|_| false, false)
        }
        fn digest_skipping(&self, skip: &dyn Fn(&str) -> bool) -> u64 {
            walk(self, &mut Canon::new(), skip, false)
        }
        fn digest_masked(&self, skip: &dyn Fn(&str) -> bool) -> u64 {
            walk(self, &mut Canon::new(), skip, true)
        }
    }

    fn digest(kind: ToolKind, params: &Json, result: &Json) -> Option<u64> {
        result_digest::<_, ()>(kind, Some(params), result, None, false, &mut NoExtensions).unwrap_or(None)
    }

    #[test]
    fn field_digests_are_the_names_digests() {
        for (i, field) in Field::ALL.iter().enumerate() {
            assert_eq!(*field as usize, i);
            assert_eq!(field.digest(), fp::hash_str(field.name().as_bytes()));
        }
    }

    #[test]
    fn exec_results_ignore_runtime_metadata_and_fall_back_to_the_text() {
        let done = |aggregated: &str, duration: i64| {
            let details = map(&[
                ("status", s("completed")),
                ("exitCode", Json::Int(0)),
                ("aggregated", s(aggregated)),
                ("durationMs", Json::Int(duration)),
            ]);
            digest(ToolKind::Exec, &Json::Null, &text_result("out", details))
        };
        assert_eq!(done("a.py", 10), done("a.py", 99));
        assert_ne!(done("a.py", 10), done("b.py", 10));
        // An empty `aggregated` means the content text ("out") is the output.
        assert_eq!(done("", 1), done("out", 2));
    }

    #[test]
    fn the_loop_veto_is_never_recorded() {
        let veto = map(&[("status", s(VETO_STATUS)), ("deniedReason", s(VETO_REASON))]);
        assert_eq!(
            digest(ToolKind::Other, &Json::Null, &text_result("blocked", veto)),
            None
        );
        let other = map(&[("status", s(VETO_STATUS)), ("deniedReason", s("policy"))]);
        assert!(digest(ToolKind::Other, &Json::Null, &text_result("blocked", other)).is_some());
    }

    #[test]
    fn sends_drop_volatile_ids_at_every_depth() {
        let send = |id: &str, text: &str| {
            let details = map(&[("messageId", s(id)), ("nested", map(&[("ts", s(id)), ("to", s(text))]))]);
            let params = map(&[("action", s("send"))]);
            digest(ToolKind::Message, &params, &text_result("sent", details))
        };
        assert_eq!(send("1", "bob"), send("2", "bob"));
        assert_ne!(send("1", "bob"), send("1", "eve"));
        // Not a send action: the ids count.
        let read = |id: &str| {
            let params = map(&[("action", s("read"))]);
            digest(
                ToolKind::Message,
                &params,
                &text_result("x", map(&[("messageId", s(id))])),
            )
        };
        assert_ne!(read("1"), read("2"));
    }

    #[test]
    fn process_polls_hash_their_progress_only() {
        let poll = |status: &str, pid: i64| {
            let params = map(&[("action", s("poll"))]);
            let details = map(&[("status", s(status)), ("pid", Json::Int(pid))]);
            digest(ToolKind::Process, &params, &text_result("tail", details))
        };
        assert_eq!(poll("running", 1), poll("running", 2));
        assert_ne!(poll("running", 1), poll("exited", 1));
        assert!(is_known_poll(
            ToolKind::Process,
            None,
            Some(&map(&[("action", s("log"))])),
            None
        ));
        assert!(!is_known_poll(
            ToolKind::Process,
            None,
            Some(&map(&[("action", s("kill"))])),
            None
        ));
        assert!(is_known_poll::<Json>(ToolKind::CommandStatus, None, None, None));
    }

    #[test]
    fn content_parts_join_trim_and_keep_lone_surrogates_apart() {
        let parts = |texts: &[Json]| {
            let content = texts
                .iter()
                .map(|t| map(&[("type", s("text")), ("text", t.clone())]))
                .collect();
            content_text_digest(&map(&[("content", Json::List(content))]))
        };
        assert_eq!(parts(&[s(" a\n")]), parts(&[s("a")]));
        assert_eq!(parts(&[s("a"), s("b")]), parts(&[s("a\nb")]));
        let surrogate = |last: u8| Json::Raw(vec![b'x', 0xED, 0xB3, last]);
        assert_ne!(parts(&[surrogate(0xBF)]), parts(&[surrogate(0xBE)]));
        assert_ne!(parts(&[surrogate(0xBF), s("y")]), parts(&[surrogate(0xBE), s("y")]));
        // Entries without a string type, or whose text is not a string, are left out.
        let untyped = map(&[(
            "content",
            Json::List(vec![
                map(&[("text", s("a"))]),
                map(&[("type", s("t")), ("text", Json::Int(1))]),
            ]),
        )]);
        assert_eq!(content_text_digest(&untyped), fp::hash_str(b""));
    }

    #[test]
    fn plain_values_are_compared_with_their_volatile_parts_masked() {
        let hash = |result: &Json, by_value| {
            result_digest::<_, ()>(ToolKind::Other, None, result, None, by_value, &mut NoExtensions).unwrap_or(None)
        };
        let poll = |at: &str, pid: i64, elapsed: i64, state: &str| {
            map(&[
                ("state", s(state)),
                ("log", s(&format!("checked at {at}"))),
                ("pid", Json::Int(pid)),
                ("elapsed_ms", Json::Int(elapsed)),
                (
                    "jobs",
                    Json::List(vec![map(&[("startedAt", s(at)), ("step", Json::Int(3))])]),
                ),
            ])
        };
        let one = poll("2026-12-02T05:31:44Z", 811, 1200, "running");
        let two = poll("2026-12-02T05:31:49Z", 812, 6400, "running");
        assert_eq!(hash(&one, true), hash(&two, true));
        assert_ne!(one.digest(), two.digest());
        // What is not volatile still tells results apart.
        assert_ne!(
            hash(&one, true),
            hash(&poll("2026-12-02T05:31:44Z", 811, 1200, "done"), true)
        );
        let steps = |step: i64| map(&[("step", Json::Int(step)), ("took", Json::Int(step))]);
        assert_ne!(hash(&steps(3), true), hash(&steps(4), true));
        // A list result is masked too; a container under a volatile key is walked, not masked.
        let list = |at: &str| Json::List(vec![s(&format!("{at} ok"))]);
        assert_eq!(hash(&list("05:31:44"), true), hash(&list("05:31:49"), true));
        let nested = |n: i64| map(&[("pid", Json::List(vec![Json::Int(n)]))]);
        assert_ne!(hash(&nested(1), true), hash(&nested(2), true));
    }

    #[test]
    fn plain_mappings_hash_by_value_only_when_asked() {
        let hash = |kind, params: &Json, result: &Json, by_value| {
            result_digest::<_, ()>(kind, Some(params), result, None, by_value, &mut NoExtensions).unwrap_or(None)
        };
        let output = |text: &str| map(&[("output", s(text)), ("messageId", s(text))]);
        // OpenClaw's rule: every mapping without content or details is `{details: {}, text: ""}`.
        assert_eq!(
            hash(ToolKind::Other, &Json::Null, &output("a"), false),
            hash(ToolKind::Other, &Json::Null, &output("b"), false)
        );
        assert_ne!(
            hash(ToolKind::Other, &Json::Null, &output("a"), true),
            hash(ToolKind::Other, &Json::Null, &output("b"), true)
        );
        assert_eq!(
            hash(ToolKind::Other, &Json::Null, &output("a"), true),
            Some(output("a").digest())
        );
        // A send's volatile ids still do not count.
        let send = map(&[("action", s("send"))]);
        let sent = |id: &str, to: &str| map(&[("messageId", s(id)), ("to", s(to))]);
        assert_eq!(
            hash(ToolKind::Message, &send, &sent("1", "bob"), true),
            hash(ToolKind::Message, &send, &sent("2", "bob"), true)
        );
        assert_ne!(
            hash(ToolKind::Message, &send, &sent("1", "bob"), true),
            hash(ToolKind::Message, &send, &sent("1", "eve"), true)
        );
        // An OpenClaw-shaped result keeps OpenClaw's rules, whatever its details hold.
        for shaped in [
            map(&[("details", s("not a mapping")), ("output", s("a"))]),
            map(&[("content", Json::List(vec![])), ("output", s("a"))]),
        ] {
            assert_eq!(
                hash(ToolKind::Other, &Json::Null, &shaped, true),
                hash(ToolKind::Other, &Json::Null, &shaped, false)
            );
        }
    }

    #[test]
    fn errors_hash_apart_from_results_and_name_unknown_tools() {
        let (digest, name) = error_outcome(b"Unknown tool: frobnicate", "Unknown tool: frobnicate");
        assert_ne!(digest, fp::hash_str(b"Unknown tool: frobnicate"));
        assert_eq!(name.as_deref(), Some("frobnicate"));
    }
}
