//! A profile's `tool_policies` as the monitor's tool hooks read them: built once per profile
//! in Python, shared (behind an `Arc`) by every monitor of that profile.

use std::sync::Arc;

use doomloop_engine::policy::{ActionLimits, Glob, Policies, Policy, ToolLimits};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The session thresholds of a rule, then the tool-loop ones (`None`: the tool is exempt).
type RuleLimits = Option<((u64, u64, u64, u64), (u32, u32, u32))>;

/// A profile's tool policies, in order (the first rule matching a tool's name is its policy).
#[pyclass(module = "doomloop._core", frozen)]
pub struct ToolPolicies {
    pub(crate) table: Arc<Policies>,
}

#[pymethods]
impl ToolPolicies {
    /// `rules`: `(pattern, limits)` each, `limits` being `None` for an exempt tool, else the
    /// session detector's `(max_identical_actions, max_similar_actions,
    /// max_consecutive_failures, max_no_progress_steps)` and the tool-loop detector's
    /// `(warning, critical, global)` thresholds, complete (``Profile`` checks them).
    #[new]
    fn new(rules: Vec<(String, RuleLimits)>) -> PyResult<Self> {
        let mut table = Vec::with_capacity(rules.len());
        for (pattern, limits) in rules {
            let policy = match limits {
                None => Policy::Exempt,
                Some(((identical, similar, failures, no_progress), (warning, critical, global))) => {
                    let session = [identical, similar, failures, no_progress];
                    if session.contains(&0) || warning == 0 || warning > critical || critical >= global {
                        return Err(PyValueError::new_err(format!(
                            "the policy of {pattern:?} has thresholds out of order or 0: {session:?}, \
                             ({warning}, {critical}, {global})"
                        )));
                    }
                    Policy::Limits {
                        session: ActionLimits {
                            identical,
                            similar,
                            failures,
                            no_progress,
                        },
                        tool: ToolLimits {
                            warning,
                            critical,
                            global,
                        },
                    }
                }
            };
            table.push((Glob::new(&pattern), policy));
        }
        Ok(ToolPolicies {
            table: Arc::new(Policies::new(table)),
        })
    }

    /// The policy the rules give the tool named `name`: `None` (no rule matches it),
    /// `"exempt"` or `"limits"` (to check which rule a name falls under).
    fn policy_of(&self, name: &str) -> Option<&'static str> {
        self.table.find(name).map(|policy| match policy {
            Policy::Exempt => "exempt",
            Policy::Limits { .. } => "limits",
        })
    }
}
