//! A detector's settings: `ChantConfig` and the `ChantDetector` settings table it is read from.

use std::sync::OnceLock;

use crate::settings::{count, switch, Kind, Schema, Setting, Value};

use super::{MAX_ANCHOR_SPAN, MAX_DISTANCE, MAX_HISTORY, MAX_PERIOD, MAX_REPEATS};

/// Settings of a detector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChantConfig {
    /// Window length in symbols (`content_chunk_size`).
    pub window: u64,
    /// Occurrences with identical gaps that make a chant (`max_repeated_chunks`).
    pub min_repeats: u64,
    /// Longest chant period caught: counted occurrences further apart than
    /// `max_period + window - 1` do not chain (the proximity bound).
    pub max_period: u64,
    /// Skip windows made only of whitespace (indentation, blank lines, padding).
    pub ignore_whitespace: bool,
}

impl Default for ChantConfig {
    fn default() -> Self {
        ChantConfig {
            window: 50,
            min_repeats: 8,
            max_period: 1000,
            ignore_whitespace: true,
        }
    }
}

impl ChantConfig {
    /// Largest distance between two chained occurrences.
    pub fn max_distance(&self) -> u64 {
        self.max_period + self.window - 1
    }

    /// How many previous windows an anchor's key is compared with: a power of two, at most
    /// `MAX_ANCHOR_SPAN` and at most `window + min_repeats`. A chant's tracked window may
    /// first become an anchor up to `span + period` symbols into the chant, and the latency
    /// bound leaves room for `window + min_repeats + period` of that.
    pub fn anchor_span(&self) -> usize {
        let limit = (self.window.saturating_add(self.min_repeats)).min(MAX_ANCHOR_SPAN as u64) as usize;
        1 << limit.max(1).ilog2()
    }

    /// Symbols of history kept: enough to compare two gaps and to confirm a whole chain.
    pub fn history(&self) -> u64 {
        (self.min_repeats + 1) * self.max_distance() + self.window
    }

    /// The configuration of a [`CHANT`] values row (checked: each in its range).
    pub fn from_values(values: &[Value]) -> ChantConfig {
        let get = |name| CHANT.index(name).and_then(|i| values.get(i).copied());
        let count = |name| get(name).map_or(0, Value::count);
        ChantConfig {
            window: count("content_chunk_size"),
            min_repeats: count("max_repeated_chunks"),
            max_period: count("max_period"),
            ignore_whitespace: get("ignore_whitespace").and_then(Value::switch).unwrap_or(true),
        }
    }

    /// Why this configuration is unusable, if it is: the setting to change (as
    /// `ChantDetector` calls it) and the range it accepts given the others.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        for (name, value) in [
            ("content_chunk_size", self.window),
            ("max_repeated_chunks", self.min_repeats),
            ("max_period", self.max_period),
        ] {
            if value == 0 {
                return Some((name, "must be >= 1, got 0".to_owned()));
            }
        }
        if self.max_period > MAX_PERIOD {
            return Some((
                "max_period",
                format!("must be <= {MAX_PERIOD}, got {}", self.max_period),
            ));
        }
        if self.window > self.most_window() {
            return Some((
                "content_chunk_size",
                format!(
                    "must be <= {} with max_period={}, got {}",
                    self.most_window(),
                    self.max_period,
                    self.window
                ),
            ));
        }
        if self.min_repeats > self.most_repeats() {
            return Some((
                "max_repeated_chunks",
                format!(
                    "must be <= {} with content_chunk_size={} and max_period={}, got {}",
                    self.most_repeats(),
                    self.window,
                    self.max_period,
                    self.min_repeats
                ),
            ));
        }
        None
    }

    /// The longest window this `max_period` (below `MAX_DISTANCE`) allows.
    pub fn most_window(&self) -> u64 {
        MAX_DISTANCE.saturating_sub(self.max_period)
    }

    /// The most repeats this window and period (within `MAX_DISTANCE`) allow: the history
    /// must fit `MAX_HISTORY` (at least one repeat always fits, since 3 * 65535 < 2^21).
    pub fn most_repeats(&self) -> u64 {
        let distance = (self.max_period + self.window).max(1);
        (MAX_HISTORY.saturating_sub(self.window) / distance)
            .saturating_sub(1)
            .min(MAX_REPEATS)
    }

    /// The nearest usable configuration (the session engine clamps instead of failing).
    pub fn clamped(self) -> ChantConfig {
        let mut c = ChantConfig {
            window: self.window.clamp(1, 4096),
            min_repeats: self.min_repeats.clamp(1, 256),
            max_period: self.max_period.clamp(1, 4096),
            ..self
        };
        while c.problem().is_some() && c.min_repeats > 1 {
            c.min_repeats /= 2;
        }
        c
    }
}

/// `ChantDetector`: the chant rule's window, repeats, whitespace filter and proximity bound
/// (each within what the engine's compact chain table holds; the joint check adds the joint
/// limits of `ChantConfig::problem`), and the seed of its hash key (unset: a secret random
/// key per detector).
pub static CHANT: Schema = Schema {
    owner: "ChantDetector",
    settings: &[
        count("content_chunk_size", 50, 1, MAX_PERIOD),
        count("max_repeated_chunks", 8, 1, MAX_REPEATS),
        switch("ignore_whitespace", true),
        count("max_period", 1000, 1, MAX_PERIOD),
        Setting {
            name: "seed",
            kind: Kind::OptionalCount { min: 0, max: u64::MAX },
            default: Value::Unset,
        },
    ],
    joint: Some(|values| ChantConfig::from_values(values).problem()),
    shape_digest: OnceLock::new(),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{assert_defaults_pass, check_all, Given};

    #[test]
    fn chant_settings_check_their_joint_limits() {
        assert_defaults_pass(&CHANT);
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
}
