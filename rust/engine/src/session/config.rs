//! `DoomLoopConfig`'s settings: the `SESSION` table and the `SessionConfig` read from it.

use std::sync::OnceLock;

use crate::chant::ChantConfig;
use crate::settings::{count, number, switch, Schema, Value};

use super::{MAX_CYCLE_PERIOD, MAX_CYCLE_REPEATS};

/// The largest backoff delay in seconds (`time.sleep` cannot sleep much longer).
pub const MAX_BACKOFF: f64 = 1e9;

/// Thresholds; [`SessionConfig::problem`] says whether they are usable (`Session::new` clamps
/// an unusable one defensively, so callers check first).
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub max_identical_actions: u64,
    pub max_similar_actions: u64,
    pub max_consecutive_failures: u64,
    pub max_no_progress_steps: u64,
    pub max_time_per_action: f64,
    pub max_total_time: f64,
    pub max_recovery_attempts: u64,
    pub escalate_on_loop: bool,
    pub initial_backoff: f64,
    pub backoff_multiplier: f64,
    pub max_backoff: f64,
    pub detect_cycles: bool,
    pub max_cycle_period: u64,
    pub min_cycle_repeats: u64,
    /// REPEATED_OUTPUT: window length and chained repeats (see `chant`).
    pub content_chunk_size: u64,
    pub max_repeated_chunks: u64,
    /// Two actions (same type) or two responses are alike at this similarity or above.
    pub similarity_threshold: f64,
    /// REPEATED_ACTION's similar case: alike actions with the same result, not the same type.
    pub similar_by_arguments: bool,
    /// REPEATED_FAILURE: alike actions failing with the same result, not any failures.
    pub failures_by_arguments: bool,
    /// NO_PROGRESS: alike actions with the same result, not any actions with the same result.
    pub no_progress_by_arguments: bool,
    /// REPEATED_OUTPUT across responses: this many alike responses in a row.
    pub max_repeated_responses: u64,
    /// Upstream's descriptions name what repeated too (doomloop's own rules always do).
    pub detailed_descriptions: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            max_identical_actions: 3,
            max_similar_actions: 5,
            max_consecutive_failures: 3,
            max_no_progress_steps: 5,
            max_time_per_action: 60.0,
            max_total_time: 300.0,
            max_recovery_attempts: 2,
            escalate_on_loop: true,
            initial_backoff: 1.0,
            backoff_multiplier: 2.0,
            max_backoff: 30.0,
            detect_cycles: true,
            max_cycle_period: 4,
            min_cycle_repeats: 3,
            content_chunk_size: 50,
            max_repeated_chunks: 8,
            similarity_threshold: 0.85,
            similar_by_arguments: false,
            failures_by_arguments: false,
            no_progress_by_arguments: false,
            max_repeated_responses: 8,
            detailed_descriptions: false,
        }
    }
}

impl SessionConfig {
    /// The engine's settings from checked [`SESSION`] values (in the schema's order).
    pub fn from_values(values: &[Value]) -> Self {
        let get = |name: &str| {
            SESSION
                .index(name)
                .and_then(|i| values.get(i).copied())
                .unwrap_or(Value::Unset)
        };
        SessionConfig {
            max_identical_actions: get("max_identical_actions").count(),
            max_similar_actions: get("max_similar_actions").count(),
            max_consecutive_failures: get("max_consecutive_failures").count(),
            max_no_progress_steps: get("max_no_progress_steps").count(),
            max_time_per_action: get("max_time_per_action").number(),
            max_total_time: get("max_total_time").number(),
            max_recovery_attempts: get("max_recovery_attempts").count(),
            escalate_on_loop: get("escalate_on_loop").switch().unwrap_or(true),
            initial_backoff: get("initial_backoff").number(),
            backoff_multiplier: get("backoff_multiplier").number(),
            max_backoff: get("max_backoff").number(),
            detect_cycles: get("detect_cycles").switch().unwrap_or(true),
            max_cycle_period: get("max_cycle_period").count(),
            min_cycle_repeats: get("min_cycle_repeats").count(),
            content_chunk_size: get("content_chunk_size").count(),
            max_repeated_chunks: get("max_repeated_chunks").count(),
            similarity_threshold: get("similarity_threshold").number(),
            similar_by_arguments: get("similar_by_arguments").switch().unwrap_or(false),
            failures_by_arguments: get("failures_by_arguments").switch().unwrap_or(false),
            no_progress_by_arguments: get("no_progress_by_arguments").switch().unwrap_or(false),
            max_repeated_responses: get("max_repeated_responses").count(),
            detailed_descriptions: get("detailed_descriptions").switch().unwrap_or(false),
        }
    }

    /// Whether a rule compares actions by their arguments (the binding then sketches them).
    pub fn compares_arguments(&self) -> bool {
        self.similar_by_arguments || self.failures_by_arguments || self.no_progress_by_arguments
    }

    /// Whether descriptions name the newest action (the binding then passes its first string
    /// argument).
    pub fn names_actions(&self) -> bool {
        self.compares_arguments() || self.detailed_descriptions
    }

    /// Why these settings are unusable together, if they are: the setting to blame (as
    /// `DoomLoopConfig` calls it) and the range it accepts. Each setting's own range is
    /// [`SESSION`]'s; this is what only the output detector knows: how long a window
    /// and how many chained repeats fit its buffers.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        for (name, value) in [
            ("max_identical_actions", self.max_identical_actions),
            ("max_similar_actions", self.max_similar_actions),
            ("max_consecutive_failures", self.max_consecutive_failures),
            ("max_no_progress_steps", self.max_no_progress_steps),
        ] {
            if value == 0 {
                return Some((name, "must be >= 1, got 0".to_owned()));
            }
        }
        for (name, value, most) in [
            ("max_cycle_period", self.max_cycle_period, MAX_CYCLE_PERIOD),
            ("min_cycle_repeats", self.min_cycle_repeats, MAX_CYCLE_REPEATS),
        ] {
            if !(2..=most).contains(&value) {
                return Some((name, format!("must be in 2..={most}, got {value}")));
            }
        }
        // The chant detector's own max_period is not a session setting: name only these two.
        let chant = self.chant_config();
        if !(1..=chant.most_window()).contains(&chant.window) {
            return Some((
                "content_chunk_size",
                format!(
                    "must be in 1..={}, got {}",
                    chant.most_window(),
                    self.content_chunk_size
                ),
            ));
        }
        if !(1..=chant.most_repeats()).contains(&chant.min_repeats) {
            return Some((
                "max_repeated_chunks",
                format!(
                    "must be in 1..={} with content_chunk_size={}, got {}",
                    chant.most_repeats(),
                    self.content_chunk_size,
                    self.max_repeated_chunks
                ),
            ));
        }
        None
    }

    /// The REPEATED_OUTPUT detector's settings (check `problem()` before trusting them:
    /// `Session::new` clamps an unusable one).
    pub fn chant_config(&self) -> ChantConfig {
        ChantConfig {
            window: self.content_chunk_size,
            min_repeats: self.max_repeated_chunks,
            ..ChantConfig::default()
        }
    }
}

/// The engine's counters are u64.
const ANY: u64 = u64::MAX;

/// `DoomLoopConfig`: PraisonAI's settings (its documented defaults), doomloop's CIRCULAR_PLAN
/// settings, and doomloop's own rules, whose defaults keep PraisonAI's behaviour (the
/// argument rules off; responses repeated as often as upstream's chunk counts allow). Only
/// doomloop's rules read `similarity_threshold`. The joint check is
/// [`SessionConfig::problem`].
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
        count("max_cycle_period", 4, 2, MAX_CYCLE_PERIOD),
        count("min_cycle_repeats", 3, 2, MAX_CYCLE_REPEATS),
        switch("similar_by_arguments", false),
        switch("failures_by_arguments", false),
        switch("no_progress_by_arguments", false),
        count("max_repeated_responses", 8, 2, ANY),
        switch("detailed_descriptions", false),
    ],
    joint: Some(|values| SessionConfig::from_values(values).problem()),
    shape_digest: OnceLock::new(),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{assert_defaults_pass, check, Given, Setting, SettingError};

    fn setting(name: &str) -> &'static Setting {
        let i = SESSION.index(name).unwrap();
        &SESSION.settings[i]
    }

    #[test]
    fn messages_name_the_setting_and_the_bound() {
        assert_defaults_pass(&SESSION);
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
        let huge = Given::HugeInt {
            negative: false,
            bits: 20_001,
        };
        let err = check(&SESSION, setting("max_identical_actions"), huge).unwrap_err();
        assert_eq!(
            err.problem(),
            format!("must be <= {}, got an int of 20001 bits", u64::MAX)
        );
    }
}
