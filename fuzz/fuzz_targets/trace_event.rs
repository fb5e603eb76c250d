//! The event format's line reader (`trace_event.rs`) on arbitrary bytes.
//!
//! Properties:
//! - it never panics, whatever the line;
//! - a line it reads is JSON (serde_json parses it as a value), an object whose `v` is 1 and
//!   whose `type` is `tool_call`, with the `tool` it gives;
//! - a call's arguments are JSON text, and its outcome is there exactly when the line has a
//!   `result` or an `error`.
#![no_main]

use doomloop_engine::trace_event;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some(call) = trace_event::read(data) else {
        return;
    };
    let value: Value = serde_json::from_slice(data).expect("a line read is JSON");
    let event = value.as_object().expect("a line read is an object");
    assert_eq!(event.get("v"), Some(&Value::from(1)));
    assert_eq!(event.get("type").and_then(Value::as_str), Some("tool_call"));
    assert_eq!(event.get("tool").and_then(Value::as_str), Some(&*call.tool));
    if let Some(arguments) = call.arguments {
        serde_json::from_str::<&serde_json::value::RawValue>(arguments.get()).expect("arguments are JSON text");
    }
    assert_eq!(call.outcome.is_some(), event.contains_key("result") || event.contains_key("error"));
});
