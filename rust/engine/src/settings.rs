//! Every detector setting in one table per detector: its name, its default, the values it
//! accepts, and the one check that enforces them. The Python config classes read their
//! defaults from these tables and hand every value to [`check`]; nothing restates a default
//! or a range.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// The largest `history_size` of the tool-loop detector (its ring is allocated up front).
pub const MAX_HISTORY_SIZE: u64 = 10_000;
/// The largest tool-loop threshold (`i32::MAX`): the engine's `u32` counters keep room to
/// raise an unordered `critical` or `global` threshold above the one below it.
pub const MAX_THRESHOLD: u64 = i32::MAX as u64;
/// The largest post-compaction guard window.
pub const MAX_GUARD_WINDOW: u64 = 1_000;
/// The largest backoff delay in seconds (`time.sleep` cannot sleep much longer).
pub const MAX_BACKOFF: f64 = 1e9;

/// What a setting accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// A whole number in `min..=max`.
    Count { min: u64, max: u64 },
    /// A number (int or float, never NaN) `>= min` (`> min` when `exclusive`) and `<= max`.
    Number { min: f64, exclusive: bool, max: f64 },
    /// `true` or `false`.
    Switch,
    /// `true`, `false` or unset.
    OptionalSwitch,
    /// A whole number in `min..=max`, or unset.
    OptionalCount { min: u64, max: u64 },
}

/// A checked setting value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Count(u64),
    Number(f64),
    Switch(bool),
    Unset,
}

impl Value {
    pub fn count(self) -> u64 {
        match self {
            Value::Count(n) => n,
            _ => 0,
        }
    }

    pub fn number(self) -> f64 {
        match self {
            Value::Number(x) => x,
            Value::Count(n) => n as f64,
            _ => 0.0,
        }
    }

    /// The count, or `None` when unset.
    pub fn optional_count(self) -> Option<u64> {
        match self {
            Value::Count(n) => Some(n),
            _ => None,
        }
    }

    pub fn switch(self) -> Option<bool> {
        match self {
            Value::Switch(b) => Some(b),
            _ => None,
        }
    }
}

/// One setting of a detector.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Value,
}

/// The settings of one detector, in their declared (constructor) order.
#[derive(Debug)]
pub struct Schema {
    /// The config class named in messages (`DoomLoopConfig`).
    pub owner: &'static str,
    pub settings: &'static [Setting],
}

impl Schema {
    pub fn index(&self, name: &str) -> Option<usize> {
        self.settings.iter().position(|s| s.name == name)
    }

    pub fn defaults(&self) -> Vec<Value> {
        self.settings.iter().map(|s| s.default).collect()
    }
}

/// Distinct value lists kept by [`shared`] (a process builds its detectors from a few configs).
const SHARED_LISTS: usize = 8;

/// `values` as a list shared with every detector built from equal values: a gateway builds
/// thousands of sessions from one config, and each keeps its settings for its snapshots.
/// The most recently used lists are kept; a list past them is allocated on its own.
pub fn shared(values: Vec<Value>) -> Arc<[Value]> {
    static RECENT: Mutex<Vec<Arc<[Value]>>> = Mutex::new(Vec::new());
    // A panic cannot leave the list half-updated: recover it rather than fail.
    let mut recent = RECENT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(i) = recent.iter().position(|list| **list == *values) {
        let list = recent.remove(i);
        recent.push(Arc::clone(&list));
        return list;
    }
    let list: Arc<[Value]> = values.into();
    if recent.len() == SHARED_LISTS {
        recent.remove(0);
    }
    recent.push(Arc::clone(&list));
    list
}

const fn count(name: &'static str, default: u64, min: u64, max: u64) -> Setting {
    Setting {
        name,
        kind: Kind::Count { min, max },
        default: Value::Count(default),
    }
}

const fn number(name: &'static str, default: f64, min: f64, exclusive: bool, max: f64) -> Setting {
    Setting {
        name,
        kind: Kind::Number { min, exclusive, max },
        default: Value::Number(default),
    }
}

const fn switch(name: &'static str, default: bool) -> Setting {
    Setting {
        name,
        kind: Kind::Switch,
        default: Value::Switch(default),
    }
}

/// The engine's counters are u64.
const ANY: u64 = u64::MAX;

/// `DoomLoopConfig`: PraisonAI's settings (its documented defaults), doomloop's CIRCULAR_PLAN
/// settings, and doomloop's own rules, whose defaults keep PraisonAI's behaviour (the
/// argument rules off; responses repeated as often as upstream's chunk counts allow). Only
/// doomloop's rules read `similarity_threshold`.
pub static SESSION: Schema = Schema {
    owner: "DoomLoopConfig",
    settings: &[
        count("max_identical_actions", 3, 1, ANY),
        count("max_similar_actions", 5, 1, ANY),
        count("max_consecutive_failures", 3, 1, ANY),
        count("max_no_progress_steps", 5, 1, ANY),
        number("similarity_threshold", 0.85, 0.0, false, 1.0),
        number("max_time_per_action", 60.0, 0.0, true, f64::INFINITY),
        number("max_total_time", 300.0, 0.0, true, f64::INFINITY),
        switch("enable_auto_recovery", true),
        count("max_recovery_attempts", 2, 0, ANY),
        switch("escalate_on_loop", true),
        number("initial_backoff", 1.0, 0.0, false, MAX_BACKOFF),
        number("backoff_multiplier", 2.0, 1.0, false, MAX_BACKOFF),
        number("max_backoff", 30.0, 0.0, false, MAX_BACKOFF),
        count("max_repeated_chunks", 8, 1, ANY),
        count("content_chunk_size", 50, 1, ANY),
        switch("detect_cycles", true),
        count("max_cycle_period", 4, 2, crate::session::MAX_CYCLE_PERIOD),
        count("min_cycle_repeats", 3, 2, crate::session::MAX_CYCLE_REPEATS),
        switch("similar_by_arguments", false),
        switch("failures_by_arguments", false),
        switch("no_progress_by_arguments", false),
        count("max_repeated_responses", 8, 2, ANY),
        switch("detailed_descriptions", false),
    ],
};

/// `LoopDetectionConfig`: OpenClaw's `tools.loopDetection` settings (its defaults and caps),
/// then doomloop's own switches, appended so positional arguments keep their meaning.
/// `enabled` defaults to true for a config built in Python; an OpenClaw block without the
/// key leaves it unset. The doomloop switches (`hash_plain_results`, `cycle`,
/// `argument_churn`) are on for a config built in Python; OpenClaw has no such keys, so
/// the OpenClaw-shaped paths turn them off and keep its recorded behaviour.
pub static TOOL_LOOP: Schema = Schema {
    owner: "LoopDetectionConfig",
    settings: &[
        Setting {
            name: "enabled",
            kind: Kind::OptionalSwitch,
            default: Value::Switch(true),
        },
        count("history_size", 30, 1, MAX_HISTORY_SIZE),
        count("warning_threshold", 10, 1, MAX_THRESHOLD),
        count("critical_threshold", 20, 1, MAX_THRESHOLD),
        count("unknown_tool_threshold", 10, 1, MAX_THRESHOLD),
        count("global_circuit_breaker_threshold", 30, 1, MAX_THRESHOLD),
        switch("generic_repeat", true),
        switch("known_poll_no_progress", true),
        switch("ping_pong", true),
        count("post_compaction_window_size", 3, 1, MAX_GUARD_WINDOW),
        switch("hash_plain_results", true),
        switch("cycle", true),
        switch("argument_churn", true),
    ],
};

/// `PostCompactionGuard`, the guard on its own.
pub static GUARD: Schema = Schema {
    owner: "PostCompactionGuard",
    settings: &[count("window_size", 3, 1, MAX_GUARD_WINDOW)],
};

/// `ChantDetector`: the chant rule's window, repeats, whitespace filter and proximity bound
/// (each within what the engine's compact chain table holds; `check_all` adds the joint
/// limits of `ChantConfig::problem`), and the seed of its hash key (unset: a secret random
/// key per detector).
pub static CHANT: Schema = Schema {
    owner: "ChantDetector",
    settings: &[
        count("content_chunk_size", 50, 1, crate::chant::MAX_PERIOD),
        count("max_repeated_chunks", 8, 1, crate::chant::MAX_REPEATS),
        switch("ignore_whitespace", true),
        count("max_period", 1000, 1, crate::chant::MAX_PERIOD),
        Setting {
            name: "seed",
            kind: Kind::OptionalCount { min: 0, max: u64::MAX },
            default: Value::Unset,
        },
    ],
};

/// A value as the binding read it, before any check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Given<'a> {
    Int(i128),
    /// An int beyond `i128`: its sign and size in bits.
    HugeInt {
        negative: bool,
        bits: u64,
    },
    Float(f64),
    Bool(bool),
    None,
    /// Anything else, by type name.
    Other(&'a str),
}

/// Why a setting was refused. `TypeMismatch` maps to `TypeError` at the Python boundary,
/// every other kind to `doomloop.ConfigError` (a `ValueError`).
#[derive(Clone, Debug, PartialEq)]
pub enum SettingError {
    UnknownSetting {
        owner: &'static str,
        name: String,
    },
    TypeMismatch {
        path: String,
        expected: &'static str,
        got: String,
    },
    OutOfRange {
        path: String,
        problem: String,
    },
}

impl SettingError {
    /// The dotted name of what was wrong (`DoomLoopConfig.max_identical_actions`).
    pub fn path(&self) -> String {
        match self {
            SettingError::UnknownSetting { owner, name } => format!("{owner}.{name}"),
            SettingError::TypeMismatch { path, .. } | SettingError::OutOfRange { path, .. } => path.clone(),
        }
    }

    /// What was wrong with it.
    pub fn problem(&self) -> String {
        match self {
            SettingError::UnknownSetting { .. } => "is not a setting".to_owned(),
            SettingError::TypeMismatch { expected, got, .. } => format!("must be {expected}, got {got}"),
            SettingError::OutOfRange { problem, .. } => problem.clone(),
        }
    }
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path(), self.problem())
    }
}

impl std::error::Error for SettingError {}

/// A float as Python prints it (`1.0`, `1e+300`, `inf`), for messages.
pub fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rust's Debug form switches to an exponent where Python's repr does (1e16, 1e-5).
    let debug = format!("{x:?}");
    match debug.split_once('e') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(digits) => ('-', digits),
                None => ('+', exponent),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => debug,
    }
}

fn shown(given: Given<'_>) -> String {
    match given {
        Given::Int(n) => n.to_string(),
        Given::HugeInt { negative, bits } => format!("{}an int of {bits} bits", if negative { "-" } else { "" }),
        Given::Float(x) => py_float(x),
        Given::Bool(b) => if b { "True" } else { "False" }.to_owned(),
        Given::None => "None".to_owned(),
        Given::Other(type_name) => type_name.to_owned(),
    }
}

fn type_of(given: Given<'_>) -> String {
    match given {
        Given::Int(_) | Given::HugeInt { .. } => "int".to_owned(),
        Given::Float(_) => "float".to_owned(),
        Given::Bool(_) => "bool".to_owned(),
        Given::None => "NoneType".to_owned(),
        Given::Other(type_name) => type_name.to_owned(),
    }
}

/// Check one value against its setting.
pub fn check(schema: &Schema, setting: &Setting, given: Given<'_>) -> Result<Value, SettingError> {
    let path = || format!("{}.{}", schema.owner, setting.name);
    let mismatch = |expected| SettingError::TypeMismatch {
        path: path(),
        expected,
        got: type_of(given),
    };
    let out_of_range = |problem: String| SettingError::OutOfRange { path: path(), problem };
    match setting.kind {
        Kind::OptionalCount { .. } if given == Given::None => Ok(Value::Unset),
        Kind::Count { min, max } | Kind::OptionalCount { min, max } => {
            let n = match given {
                Given::Int(n) => n,
                Given::HugeInt { negative, .. } => {
                    if negative {
                        i128::MIN
                    } else {
                        i128::MAX
                    }
                }
                _ if matches!(setting.kind, Kind::OptionalCount { .. }) => return Err(mismatch("an int or None")),
                _ => return Err(mismatch("an int")),
            };
            if n < i128::from(min) {
                return Err(out_of_range(format!("must be >= {min}, got {}", shown(given))));
            }
            if n > i128::from(max) {
                return Err(out_of_range(format!("must be <= {max}, got {}", shown(given))));
            }
            // In range, so within u64.
            Ok(Value::Count(u64::try_from(n).unwrap_or(max)))
        }
        Kind::Number { min, exclusive, max } => {
            let x = match given {
                Given::Int(n) => n as f64,
                Given::HugeInt { negative: true, .. } => f64::NEG_INFINITY,
                Given::HugeInt { negative: false, .. } => {
                    return Err(out_of_range(format!(
                        "must be <= {}, got an int too large for a float",
                        py_float(max)
                    )))
                }
                Given::Float(x) => x,
                _ => return Err(mismatch("a number")),
            };
            if x.is_nan() {
                return Err(out_of_range("must not be NaN".to_owned()));
            }
            if x < min || (exclusive && x == min) {
                let bound = if exclusive { ">" } else { ">=" };
                return Err(out_of_range(format!(
                    "must be {bound} {}, got {}",
                    py_float(min),
                    shown(given)
                )));
            }
            if x > max {
                return Err(out_of_range(format!(
                    "must be <= {}, got {}",
                    py_float(max),
                    shown(given)
                )));
            }
            Ok(Value::Number(x))
        }
        Kind::Switch => match given {
            Given::Bool(b) => Ok(Value::Switch(b)),
            _ => Err(mismatch("a bool")),
        },
        Kind::OptionalSwitch => match given {
            Given::Bool(b) => Ok(Value::Switch(b)),
            Given::None => Ok(Value::Unset),
            _ => Err(mismatch("a bool or None")),
        },
    }
}

/// Check every value of a config (in the schema's order), then the settings' joint limits.
pub fn check_all(schema: &'static Schema, given: &[Given<'_>]) -> Result<Vec<Value>, SettingError> {
    if given.len() != schema.settings.len() {
        return Err(SettingError::UnknownSetting {
            owner: schema.owner,
            name: format!("<{} values for {} settings>", given.len(), schema.settings.len()),
        });
    }
    // Sized up front: a collected `Result` iterator would grow the vector step by step.
    let mut values = Vec::with_capacity(given.len());
    for (setting, &given) in schema.settings.iter().zip(given) {
        values.push(check(schema, setting, given)?);
    }
    let joint = if std::ptr::eq(schema, &SESSION) {
        crate::session::SessionConfig::from_values(&values).problem()
    } else if std::ptr::eq(schema, &CHANT) {
        crate::chant::ChantConfig::from_values(&values).problem()
    } else {
        None
    };
    match joint {
        Some((name, problem)) => Err(SettingError::OutOfRange {
            path: format!("{}.{name}", schema.owner),
            problem,
        }),
        None => Ok(values),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_value_lists_are_shared() {
        let defaults = shared(TOOL_LOOP.defaults());
        assert!(Arc::ptr_eq(&defaults, &shared(TOOL_LOOP.defaults())));
        let mut other = TOOL_LOOP.defaults();
        other[0] = Value::Count(7);
        let other = shared(other);
        assert!(!Arc::ptr_eq(&defaults, &other) && *other != *defaults);
        // Past the lists kept, a list is still right, only no longer shared.
        let many: Vec<_> = (0..2 * SHARED_LISTS as u64)
            .map(|n| shared(vec![Value::Count(n)]))
            .collect();
        assert!(many
            .iter()
            .enumerate()
            .all(|(n, list)| **list == [Value::Count(n as u64)]));
    }

    fn setting(name: &str) -> &'static Setting {
        let i = SESSION.index(name).unwrap();
        &SESSION.settings[i]
    }

    #[test]
    fn defaults_pass_their_own_check() {
        for schema in [&SESSION, &TOOL_LOOP, &GUARD, &CHANT] {
            let given: Vec<Given<'_>> = schema
                .settings
                .iter()
                .map(|s| match s.default {
                    Value::Count(n) => Given::Int(i128::from(n)),
                    Value::Number(x) => Given::Float(x),
                    Value::Switch(b) => Given::Bool(b),
                    Value::Unset => Given::None,
                })
                .collect();
            assert_eq!(check_all(schema, &given).unwrap(), schema.defaults());
        }
    }

    #[test]
    fn messages_name_the_setting_and_the_bound() {
        let err = check(&SESSION, setting("max_identical_actions"), Given::Int(0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "DoomLoopConfig.max_identical_actions: must be >= 1, got 0"
        );
        let err = check(&SESSION, setting("max_backoff"), Given::Float(1e300)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "DoomLoopConfig.max_backoff: must be <= 1000000000.0, got 1e+300"
        );
        let err = check(&SESSION, setting("max_total_time"), Given::Int(0)).unwrap_err();
        assert_eq!(err.problem(), "must be > 0.0, got 0");
        let err = check(&SESSION, setting("detect_cycles"), Given::Int(1)).unwrap_err();
        assert!(matches!(err, SettingError::TypeMismatch { .. }));
        assert_eq!(err.problem(), "must be a bool, got int");
        let huge = Given::HugeInt {
            negative: false,
            bits: 20_001,
        };
        let err = check(&SESSION, setting("max_identical_actions"), huge).unwrap_err();
        assert_eq!(
            err.problem(),
            format!("must be <= {}, got an int of 20001 bits", u64::MAX)
        );
        let err = check(&SESSION, setting("initial_backoff"), Given::Float(f64::NAN)).unwrap_err();
        assert_eq!(err.problem(), "must not be NaN");
    }

    #[test]
    fn chant_settings_check_their_joint_limits() {
        let given = |window: i128, repeats: i128, period: i128, seed: Given<'static>| {
            [
                Given::Int(window),
                Given::Int(repeats),
                Given::Bool(true),
                Given::Int(period),
                seed,
            ]
        };
        let values = check_all(&CHANT, &given(50, 8, 1000, Given::None)).unwrap();
        assert_eq!(values, CHANT.defaults());
        let seeded = check_all(&CHANT, &given(50, 8, 1000, Given::Int(7))).unwrap();
        assert_eq!(seeded[4].optional_count(), Some(7));
        let err = check_all(&CHANT, &given(600, 8, 65_000, Given::None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ChantDetector.content_chunk_size: must be <= 535 with max_period=65000, got 600"
        );
        let err = check_all(&CHANT, &given(1000, 5000, 1000, Given::None)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("ChantDetector.max_repeated_chunks: must be <= 1047 "),
            "{err}"
        );
        let err = check_all(&CHANT, &given(50, 8, 70_000, Given::None)).unwrap_err();
        assert_eq!(err.to_string(), "ChantDetector.max_period: must be <= 65534, got 70000");
        let err = check_all(&CHANT, &given(50, 8, 1000, Given::Float(1.0))).unwrap_err();
        assert_eq!(err.to_string(), "ChantDetector.seed: must be an int or None, got float");
    }

    #[test]
    fn python_float_forms() {
        assert_eq!(py_float(1.0), "1.0");
        assert_eq!(py_float(0.85), "0.85");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(1e-5), "1e-05");
        assert_eq!(py_float(1e300), "1e+300");
        assert_eq!(py_float(f64::INFINITY), "inf");
    }
}
