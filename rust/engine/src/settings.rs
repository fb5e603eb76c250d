//! The shape of a detector's settings table (each setting's name, default and the values it
//! accepts, and the table's joint check) and the one check that enforces it. Each detector
//! module owns its table; the Python config classes read their defaults from the tables and
//! hand every value to [`check_all`]; nothing restates a default or a range.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

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

/// A table's joint check: given every value (each within its own range, in the table's order),
/// the setting to blame and the range it accepts given the others, when they do not go
/// together.
pub type JointCheck = fn(&[Value]) -> Option<(&'static str, String)>;

/// The settings of one detector, in their declared (constructor) order.
#[derive(Debug)]
pub struct Schema {
    /// The config class named in messages (`DoomLoopConfig`).
    pub owner: &'static str,
    pub settings: &'static [Setting],
    /// What only the detector knows: the limits of its settings taken together (`None` when
    /// each setting's own range is all).
    pub joint: Option<JointCheck>,
    /// The digest of the table's shape (`snapshot::schema_digest`), once computed: build a
    /// table with `OnceLock::new()` here.
    pub shape_digest: OnceLock<u64>,
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

pub const fn count(name: &'static str, default: u64, min: u64, max: u64) -> Setting {
    Setting {
        name,
        kind: Kind::Count { min, max },
        default: Value::Count(default),
    }
}

pub const fn number(name: &'static str, default: f64, min: f64, exclusive: bool, max: f64) -> Setting {
    Setting {
        name,
        kind: Kind::Number { min, exclusive, max },
        default: Value::Number(default),
    }
}

pub const fn switch(name: &'static str, default: bool) -> Setting {
    Setting {
        name,
        kind: Kind::Switch,
        default: Value::Switch(default),
    }
}

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
    let joint = schema.joint.and_then(|joint| joint(&values));
    match joint {
        Some((name, problem)) => Err(SettingError::OutOfRange {
            path: format!("{}.{name}", schema.owner),
            problem,
        }),
        None => Ok(values),
    }
}

/// Tests of every table: its defaults pass its own check.
#[cfg(test)]
pub fn assert_defaults_pass(schema: &'static Schema) {
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

#[cfg(test)]
mod tests {
    use super::*;

    static PROBE: Schema = Schema {
        owner: "Probe",
        settings: &[
            count("window", 3, 1, 10),
            number("backoff", 5.0, 0.0, false, 1e9),
            number("time", 60.0, 0.0, true, f64::INFINITY),
            switch("cycles", true),
        ],
        joint: Some(window_within_backoff),
        shape_digest: OnceLock::new(),
    };

    /// A joint limit to check: `window` at most `backoff`.
    fn window_within_backoff(values: &[Value]) -> Option<(&'static str, String)> {
        let (window, backoff) = (values[0].count(), values[1].number());
        (window as f64 > backoff).then(|| {
            (
                "window",
                format!("must be <= backoff ({}), got {window}", py_float(backoff)),
            )
        })
    }

    #[test]
    fn equal_value_lists_are_shared() {
        let defaults = shared(PROBE.defaults());
        assert!(Arc::ptr_eq(&defaults, &shared(PROBE.defaults())));
        let mut other = PROBE.defaults();
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
        let i = PROBE.index(name).unwrap();
        &PROBE.settings[i]
    }

    #[test]
    fn defaults_pass_their_own_check() {
        assert_defaults_pass(&PROBE);
    }

    #[test]
    fn messages_name_the_setting_and_the_bound() {
        let err = check(&PROBE, setting("window"), Given::Int(0)).unwrap_err();
        assert_eq!(err.to_string(), "Probe.window: must be >= 1, got 0");
        let err = check(&PROBE, setting("backoff"), Given::Float(1e300)).unwrap_err();
        assert_eq!(err.to_string(), "Probe.backoff: must be <= 1000000000.0, got 1e+300");
        let err = check(&PROBE, setting("time"), Given::Int(0)).unwrap_err();
        assert_eq!(err.problem(), "must be > 0.0, got 0");
        let err = check(&PROBE, setting("cycles"), Given::Int(1)).unwrap_err();
        assert!(matches!(err, SettingError::TypeMismatch { .. }));
        assert_eq!(err.problem(), "must be a bool, got int");
        let huge = Given::HugeInt {
            negative: false,
            bits: 20_001,
        };
        let err = check(&PROBE, setting("window"), huge).unwrap_err();
        assert_eq!(err.problem(), "must be <= 10, got an int of 20001 bits");
        let err = check(&PROBE, setting("backoff"), Given::Float(f64::NAN)).unwrap_err();
        assert_eq!(err.problem(), "must not be NaN");
    }

    #[test]
    fn the_joint_check_runs_after_each_value_is_checked() {
        let given = |window, backoff| {
            [
                Given::Int(window),
                Given::Float(backoff),
                Given::Float(1.0),
                Given::Bool(true),
            ]
        };
        assert!(check_all(&PROBE, &given(3, 3.0)).is_ok());
        let err = check_all(&PROBE, &given(4, 3.0)).unwrap_err();
        assert_eq!(err.to_string(), "Probe.window: must be <= backoff (3.0), got 4");
        // A value out of its own range is named first.
        let err = check_all(&PROBE, &given(0, -1.0)).unwrap_err();
        assert_eq!(err.to_string(), "Probe.window: must be >= 1, got 0");
        let err = check_all(&PROBE, &given(3, 3.0)[..3]).unwrap_err();
        assert!(matches!(err, SettingError::UnknownSetting { .. }));
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
