//! The common line of doomloop's own trace event format (docs/traces.md), read without
//! Python: a `tool_call` event whose fields all have the types the format gives them.
//!
//! A scan reads one such line per tool call, and decoding it to Python objects and then
//! checking them costs several times what the detectors do with the call. [`read`] parses
//! the line and applies the reader's rules (`doomloop/traces/events.py`, which stays the
//! reference) to it; for any other line, or a field the rules would report or convert in a way
//! this module does not (an outcome that is not a string, a `v` of `1.0`, a key given twice),
//! it answers None and the Python reader reads the line itself. A time given as text is handed
//! over as text ([`Time::Text`]) for the Python reader to convert. So the fast path never
//! decides a case differently: it only declines it.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A `tool_call` event the rules read without a problem, borrowing from the line (a string
/// with escapes is unescaped into its own buffer).
#[derive(Debug)]
pub struct ToolCall<'a> {
    /// The event's `session` (None: the file's session without a key).
    pub session: Option<Cow<'a, str>>,
    /// Its `run`, when a string.
    pub run: Option<Cow<'a, str>>,
    pub tool: Cow<'a, str>,
    pub call_id: Option<Cow<'a, str>>,
    /// The `arguments` as their JSON text (None when absent or null: the reader's `get` gives
    /// None for both). The text is valid JSON; nesting past the parser's limit is not checked.
    pub arguments: Option<&'a RawValue>,
    /// The `thought`, when a string.
    pub thought: Option<Cow<'a, str>>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// `ts` (see [`ToolCall::seconds`]).
    pub started: Option<Time<'a>>,
    /// The call's outcome, when the event carries `result` or `error` (None: the call awaits a
    /// `tool_result`).
    pub outcome: Option<Outcome<'a>>,
}

/// A call's outcome as the event carries it.
#[derive(Debug, PartialEq)]
pub struct Outcome<'a> {
    pub result: Option<Cow<'a, str>>,
    pub error: Option<Cow<'a, str>>,
    /// `returncode`, when an integer (JSON integers reach `u64::MAX` and `i64::MIN`).
    pub returncode: Option<i128>,
    pub is_error: bool,
    /// `ended` as the event gives it (None: absent or null, the call ended when it started).
    pub ended: Option<Time<'a>>,
}

/// A time as an event gives it.
#[derive(Debug, PartialEq)]
pub enum Time<'a> {
    /// Epoch seconds (an integer rounded as Python's `float(int)` rounds it).
    Seconds(f64),
    /// Text: an RFC 3339 time, or not. The Python reader reads it (and reports what is not),
    /// as `datetime.fromisoformat` takes more forms than RFC 3339 has.
    Text(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Time<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Time<'a>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a number or a string")
            }
            fn visit_f64<E: serde::de::Error>(self, seconds: f64) -> Result<Self::Value, E> {
                Ok(Time::Seconds(seconds))
            }
            fn visit_u64<E: serde::de::Error>(self, seconds: u64) -> Result<Self::Value, E> {
                Ok(Time::Seconds(seconds as f64))
            }
            fn visit_i64<E: serde::de::Error>(self, seconds: i64) -> Result<Self::Value, E> {
                Ok(Time::Seconds(seconds as f64))
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Time::Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Time::Text(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_any(Visit(std::marker::PhantomData))
    }
}

impl ToolCall<'_> {
    /// `(started, ended)` in epoch seconds when the event's times are numbers: `ts`, and for a
    /// call with an outcome its `ended`, else `ts`. None when one of them is text.
    pub fn seconds(&self) -> Option<(Option<f64>, Option<f64>)> {
        let number = |time: Option<&Time<'_>>| match time {
            None => Some(None),
            Some(Time::Seconds(seconds)) => Some(Some(*seconds)),
            Some(Time::Text(_)) => None,
        };
        let started = number(self.started.as_ref())?;
        let ended = match self.outcome.as_ref() {
            None => None,
            Some(outcome) => number(outcome.ended.as_ref())?.or(started),
        };
        Some((started, ended))
    }
}

/// The fields of an event that the rules read, as the line gives them. A field of a type the
/// rules report (a `session` that is a number, a `ts` that is `true`) fails the parse, and so
/// does a field given twice: either way the line is declined.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    v: Option<&'a RawValue>,
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    session: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "present")]
    run: Option<&'a RawValue>,
    #[serde(borrow)]
    tool: Option<Cow<'a, str>>,
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    thought: Option<&'a RawValue>,
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    #[serde(borrow)]
    ts: Option<Time<'a>>,
    #[serde(borrow)]
    ended: Option<Time<'a>>,
    // `result` and `error` are there even when null (a call with an outcome of nothing); a
    // value that is not a string fails the parse.
    #[serde(borrow, default, deserialize_with = "present_text")]
    result: Option<Option<Cow<'a, str>>>,
    #[serde(borrow, default, deserialize_with = "present_text")]
    error: Option<Option<Cow<'a, str>>>,
    #[serde(borrow)]
    returncode: Option<&'a RawValue>,
    #[serde(borrow)]
    is_error: Option<&'a RawValue>,
}

/// An event's `usage`: the counts under either API's names.
#[derive(Deserialize)]
struct Usage<'a> {
    #[serde(borrow)]
    input_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    prompt_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    output_tokens: Option<&'a RawValue>,
    #[serde(borrow)]
    completion_tokens: Option<&'a RawValue>,
}

/// A field that is there, null or not: its JSON text.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// A field that is there: None for null, else its string.
fn present_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<Cow<'de, str>>>, D::Error> {
    Option::<Text<'de>>::deserialize(deserializer).map(|text| Some(text.map(|text| text.0)))
}

/// A string, borrowed from the line when it has no escapes (serde's own `Cow` always copies).
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Text<'de>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

/// Read one line of a file (see the module's documentation): None to decline it.
pub fn read(raw: &[u8]) -> Option<ToolCall<'_>> {
    // serde_json's limits decline what the Python decoder may still read (a number past f64's
    // range): those lines go to it, which reports or reads them.
    let event: Event<'_> = serde_json::from_slice(raw).ok()?;
    // `v` exactly the integer 1 (the Python reader also takes 1.0 and true, as equal to 1).
    if event.v?.get() != "1" || event.kind? != "tool_call" {
        return None;
    }
    let (input_tokens, output_tokens) = match event.usage {
        Some(usage) if usage.get().starts_with('{') => tokens(serde_json::from_str(usage.get()).ok()?),
        _ => (None, None),
    };
    let outcome = if event.result.is_some() || event.error.is_some() {
        let (result, error) = (event.result.flatten(), event.error.flatten());
        let returncode = event.returncode.and_then(integer);
        let is_error = error.is_some()
            || returncode.is_some_and(|code| code != 0)
            || event.is_error.is_some_and(|flag| flag.get() == "true");
        Some(Outcome {
            result,
            error,
            returncode,
            is_error,
            ended: event.ended,
        })
    } else {
        None
    };
    Some(ToolCall {
        session: event.session,
        run: event.run.and_then(string),
        tool: event.tool?,
        call_id: event.call_id,
        arguments: event.arguments,
        thought: event.thought.and_then(string),
        input_tokens,
        output_tokens,
        started: event.ts,
        outcome,
    })
}

/// The string a field's text holds; None for any other value.
fn string(text: &RawValue) -> Option<Cow<'_, str>> {
    serde_json::from_str::<Text<'_>>(text.get()).ok().map(|text| text.0)
}

/// `(input, output)` tokens; a count that is not a non-negative integer is None.
fn tokens(usage: Usage<'_>) -> (Option<u64>, Option<u64>) {
    let count = |text: &RawValue| serde_json::from_str::<u64>(text.get()).ok();
    (
        usage.input_tokens.or(usage.prompt_tokens).and_then(count),
        usage.output_tokens.or(usage.completion_tokens).and_then(count),
    )
}

/// A JSON integer's value, within what a JSON integer decodes to exactly (past `u64`, the
/// Python decoders give a float).
fn integer(text: &RawValue) -> Option<i128> {
    let text = text.get();
    serde_json::from_str::<i64>(text)
        .map(i128::from)
        .or_else(|_| serde_json::from_str::<u64>(text).map(i128::from))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(raw: &str) -> ToolCall<'_> {
        read(raw.as_bytes()).unwrap_or_else(|| panic!("declined: {raw}"))
    }

    #[test]
    fn a_complete_call_is_read_with_every_field() {
        let call = call(
            r#"{"v":1,"type":"tool_call","session":"s","run":"r","tool":"bash","call_id":"c1",
            "arguments":{"cmd":"ls"},"thought":"lo\nok","ts":10,"ended":12.5,"result":"ok",
            "returncode":2,"usage":{"prompt_tokens":7,"output_tokens":3},"other":[1,{"x":null}]}"#,
        );
        assert_eq!(
            (call.session.as_deref(), call.run.as_deref(), &*call.tool),
            (Some("s"), Some("r"), "bash")
        );
        assert_eq!(call.call_id.as_deref(), Some("c1"));
        assert_eq!(call.arguments.map(RawValue::get), Some(r#"{"cmd":"ls"}"#));
        assert_eq!(call.thought.as_deref(), Some("lo\nok"));
        assert_eq!(call.seconds(), Some((Some(10.0), Some(12.5))));
        assert_eq!((call.input_tokens, call.output_tokens), (Some(7), Some(3)));
        let outcome = call.outcome.expect("an outcome");
        assert_eq!(
            (outcome.result.as_deref(), outcome.error, outcome.returncode),
            (Some("ok"), None, Some(2))
        );
        assert!(outcome.is_error, "a nonzero return code is an error");
    }

    #[test]
    fn a_call_without_an_outcome_awaits_its_result_and_ends_when_it_starts_otherwise() {
        let waiting = call(r#"{"v":1,"type":"tool_call","tool":"t","arguments":null}"#);
        assert!(waiting.outcome.is_none() && waiting.arguments.is_none());
        let ended = call(r#"{"v":1,"type":"tool_call","tool":"t","ts":3,"error":null}"#);
        assert_eq!(ended.seconds(), Some((Some(3.0), Some(3.0))), "ended when it started");
        let outcome = ended.outcome.expect("an outcome");
        assert_eq!(
            (outcome.result, outcome.error, outcome.is_error, outcome.ended),
            (None, None, false, None)
        );
        let outcome =
            call(r#"{"v":1,"type":"tool_call","tool":"t","result":"x","is_error":true,"returncode":true}"#).outcome;
        assert_eq!(
            outcome.map(|outcome| (outcome.returncode, outcome.is_error)),
            Some((None, true))
        );
    }

    #[test]
    fn fields_of_other_types_follow_the_python_reader() {
        // Dropped as the reader drops them: a thought, a run or a count of another type.
        let call = call(
            r#"{"v":1,"type":"tool_call","tool":"t","thought":3,"run":[],"usage":{"input_tokens":-1,"output_tokens":true}}"#,
        );
        assert_eq!(
            (call.thought, call.run, call.input_tokens, call.output_tokens),
            (None, None, None, None)
        );
        assert_eq!(
            self::call(r#"{"v":1,"type":"tool_call","tool":"t","usage":[1]}"#).input_tokens,
            None
        );
        let both = self::call(
            r#"{"v":1,"type":"tool_call","tool":"t","usage":{"input_tokens":null,"prompt_tokens":5,"output_tokens":2.0}}"#,
        );
        assert_eq!((both.input_tokens, both.output_tokens), (Some(5), None));
        for (code, expected) in [
            ("18446744073709551615", Some(u64::MAX as i128)),
            ("-9223372036854775808", Some(i64::MIN as i128)),
            ("18446744073709551616", None),
            ("1e2", None),
        ] {
            let raw = format!(r#"{{"v":1,"type":"tool_call","tool":"t","result":"","returncode":{code}}}"#);
            assert_eq!(
                self::call(&raw).outcome.and_then(|outcome| outcome.returncode),
                expected,
                "{code}"
            );
        }
    }

    #[test]
    fn every_line_the_rules_would_report_or_convert_otherwise_is_declined() {
        for raw in [
            "",
            "not json",
            "[1]",
            r#"{"v":1,"type":"user","text":"hi"}"#,
            r#"{"v":2,"type":"tool_call","tool":"t"}"#,
            r#"{"v":1.0,"type":"tool_call","tool":"t"}"#,
            r#"{"v":true,"type":"tool_call","tool":"t"}"#,
            r#"{"v":null,"type":"tool_call","tool":"t"}"#,
            r#"{"type":"tool_call","tool":"t"}"#,
            r#"{"v":1,"type":3,"tool":"t"}"#,
            r#"{"v":1,"type":"tool_call"}"#,
            r#"{"v":1,"type":"tool_call","tool":null}"#,
            r#"{"v":1,"type":"tool_call","tool":1}"#,
            r#"{"v":1,"type":"tool_call","tool":"t","session":5}"#,
            r#"{"v":1,"type":"tool_call","tool":"t","call_id":5}"#,
            r#"{"v":1,"type":"tool_call","tool":"t","ts":false}"#,
            r#"{"v":1,"type":"tool_call","tool":"t","result":{"a":1}}"#,
            r#"{"v":1,"type":"tool_call","tool":"t","error":["x"]}"#,
            r#"{"v":1,"type":"tool_call","tool":"t","result":"x","ended":{}}"#,
            r#"{"v":1,"type":"tool_call","tool":"t","ts":1e400}"#,
            r#"{"v":1,"type":"tool_call","tool":"\ud800"}"#,
            r#"{"v":1,"type":"tool_call","tool":"a","tool":"b"}"#,
            r#"{"v":1,"type":"tool_call","tool":"t","usage":{"input_tokens":1,"input_tokens":2}}"#,
            r#"{"v":1,"type":"tool_call","tool":"t"} x"#,
        ] {
            assert!(read(raw.as_bytes()).is_none(), "{raw}");
        }
        assert!(
            read(b"{\"v\":1,\"type\":\"tool_call\",\"tool\":\"\xff\"}").is_none(),
            "not UTF-8"
        );
    }

    #[test]
    fn times_as_text_are_read_for_the_python_reader_to_convert() {
        let call = call(r#"{"v":1,"type":"tool_call","tool":"t","ts":"2026-01-01T00:00:00Z","result":"x"}"#);
        assert_eq!(call.seconds(), None);
        assert_eq!(call.started, Some(Time::Text(Cow::Borrowed("2026-01-01T00:00:00Z"))));
        assert_eq!(
            call.outcome.and_then(|outcome| outcome.ended),
            None,
            "no ended of its own"
        );
        let later = self::call(r#"{"v":1,"type":"tool_call","tool":"t","ts":1,"result":"x","ended":"later"}"#);
        assert_eq!(later.seconds(), None);
        // Without an outcome, `ended` is not read: the numbers stand.
        let waiting = self::call(r#"{"v":1,"type":"tool_call","tool":"t","ts":1,"ended":"later"}"#);
        assert_eq!(waiting.seconds(), Some((Some(1.0), None)));
    }

    #[test]
    fn strings_with_escapes_are_unescaped() {
        let call = call(r#"{"v":1,"type":"tool_call","tool":"t\u00e9\"","result":"a\tb"}"#);
        assert_eq!(&*call.tool, "t\u{e9}\"");
        assert_eq!(call.outcome.and_then(|outcome| outcome.result).as_deref(), Some("a\tb"));
    }
}
