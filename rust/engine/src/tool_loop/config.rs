//! `LoopDetectionConfig`'s and `PostCompactionGuard`'s settings tables, and the run-time
//! `LoopConfig` read from them.

use std::sync::OnceLock;

use crate::settings::{count, switch, Kind, Schema, Setting, Value};

/// The largest `history_size` of the tool-loop detector (its ring is allocated up front).
pub const MAX_HISTORY_SIZE: u64 = 10_000;
/// The largest tool-loop threshold (`i32::MAX`): the engine's `u32` counters keep room to
/// raise an unordered `critical` or `global` threshold above the one below it.
pub const MAX_THRESHOLD: u64 = i32::MAX as u64;
/// The largest post-compaction guard window.
pub const MAX_GUARD_WINDOW: u64 = 1_000;

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
    /// A cycle of 3 to 8 calls that the current call continues (doomloop's rule).
    pub cycle: bool,
    /// One tool cycling through a few argument sets whose results do not change (doomloop's
    /// rule, after OpenClaw's later releases).
    pub argument_churn: bool,
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
    /// The run-time settings from checked [`TOOL_LOOP`] values (in the schema's
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
            cycle: switch("cycle"),
            argument_churn: switch("argument_churn"),
            hash_plain_results: switch("hash_plain_results"),
            detect: enabled == Some(true),
            record_calls: enabled != Some(false),
            guard_enabled: enabled != Some(false),
            guard_window: u32::try_from(get("post_compaction_window_size").count()).unwrap_or(1),
        };
        (config, fixes)
    }
}

/// `LoopDetectionConfig`: OpenClaw's `tools.loopDetection` settings (its defaults and caps),
/// then doomloop's own switches, appended so positional arguments keep their meaning.
/// `enabled` defaults to true for a config built in Python; an OpenClaw block without the
/// key leaves it unset. The doomloop switches (`hash_plain_results`, `cycle`,
/// `argument_churn`) are on for a config built in Python; OpenClaw has no such keys, so
/// the OpenClaw-shaped paths turn them off and keep its recorded behaviour. The joint check
/// is `ordered_thresholds`.
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
    joint: Some(ordered_thresholds),
    shape_digest: OnceLock::new(),
};

/// The switches OpenClaw has no keys for: a config with all of them off is OpenClaw's.
const DOOMLOOP_SWITCHES: [&str; 3] = ["hash_plain_results", "cycle", "argument_churn"];

/// The thresholds in order: `warning < critical < global`, or the first one out of order,
/// named with the one below it and both values. Unordered thresholds would be raised at run
/// time (each above the one below it), so a config would say one thing and block at another:
/// only OpenClaw's configuration (doomloop's own switches all off, as `from_openclaw` reads
/// it) keeps OpenClaw's rule, that raise with a logged warning (see
/// [`LoopConfig::from_values`]).
fn ordered_thresholds(values: &[Value]) -> Option<(&'static str, String)> {
    let get = |name: &str| TOOL_LOOP.index(name).and_then(|i| values.get(i).copied());
    let openclaw = DOOMLOOP_SWITCHES
        .iter()
        .all(|&name| get(name).and_then(Value::switch) == Some(false));
    if openclaw {
        return None;
    }
    let threshold = |name: &str| get(name).map_or(0, Value::count);
    [
        ("warning_threshold", "critical_threshold"),
        ("critical_threshold", "global_circuit_breaker_threshold"),
    ]
    .into_iter()
    .find(|&(lower, higher)| threshold(higher) <= threshold(lower))
    .map(|(lower, higher)| {
        (
            higher,
            format!(
                "must be greater than {lower} ({}), got {}",
                threshold(lower),
                threshold(higher)
            ),
        )
    })
}

/// `PostCompactionGuard`, the guard on its own.
pub static GUARD: Schema = Schema {
    owner: "PostCompactionGuard",
    settings: &[count("window_size", 3, 1, MAX_GUARD_WINDOW)],
    joint: None,
    shape_digest: OnceLock::new(),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{assert_defaults_pass, check_all, Given};

    fn given(warning: i128, critical: i128, global: i128, doomloop: bool) -> Vec<Given<'static>> {
        TOOL_LOOP
            .settings
            .iter()
            .map(|setting| match setting.name {
                "warning_threshold" => Given::Int(warning),
                "critical_threshold" => Given::Int(critical),
                "global_circuit_breaker_threshold" => Given::Int(global),
                name if DOOMLOOP_SWITCHES.contains(&name) => Given::Bool(doomloop),
                _ => match setting.default {
                    Value::Count(n) => Given::Int(i128::from(n)),
                    Value::Switch(b) => Given::Bool(b),
                    _ => Given::None,
                },
            })
            .collect()
    }

    #[test]
    fn thresholds_are_ordered_except_in_openclaws_configuration() {
        assert_defaults_pass(&TOOL_LOOP);
        assert_defaults_pass(&GUARD);
        assert!(check_all(&TOOL_LOOP, &given(3, 4, 5, true)).is_ok());
        let err = check_all(&TOOL_LOOP, &given(10, 5, 30, true)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "LoopDetectionConfig.critical_threshold: must be greater than warning_threshold (10), got 5"
        );
        let err = check_all(&TOOL_LOOP, &given(10, 20, 20, true)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "LoopDetectionConfig.global_circuit_breaker_threshold: must be greater than critical_threshold (20), got 20"
        );
        // OpenClaw's configuration is checked value by value; the run time raises them.
        let values = check_all(&TOOL_LOOP, &given(10, 5, 3, false)).unwrap();
        let (config, fixes) = LoopConfig::from_values(&values);
        assert_eq!((config.critical, config.global, fixes.len()), (11, 12, 2));
        // One doomloop switch on is no longer OpenClaw's configuration.
        let mut one_on = given(10, 5, 3, false);
        if let Some(i) = TOOL_LOOP.index("cycle") {
            one_on[i] = Given::Bool(true);
        }
        assert!(check_all(&TOOL_LOOP, &one_on).is_err());
    }
}
