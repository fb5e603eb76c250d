//! Per-tool policies: a tool's name, or a glob of names, mapped to thresholds of its own or to
//! `exempt` (a profile's `tool_policies`). The first rule whose pattern matches a tool's name
//! is its policy; a tool no rule matches keeps the profile's thresholds.
//!
//! Patterns are shell globs as Python's `fnmatch.fnmatchcase` reads them: `*` matches any
//! run of characters, `?` one character, `[seq]` one character of the set (ranges such as
//! `a-z`; `[!seq]` one not in it), and anything else itself, case-sensitively. A `[` with no
//! closing `]` is itself.

/// The session detector's thresholds under a policy, each complete (the profile's where the
/// policy sets none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionLimits {
    pub identical: u64,
    pub similar: u64,
    pub failures: u64,
    pub no_progress: u64,
}

/// The tool-loop detector's thresholds under a policy, complete and ordered
/// (`warning < critical < global`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolLimits {
    pub warning: u32,
    pub critical: u32,
    pub global: u32,
}

/// What a policy does to its tool's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Neither detector sees the calls.
    Exempt,
    /// Both see them, each with these thresholds.
    Limits { session: ActionLimits, tool: ToolLimits },
}

/// A profile's rules, in order.
#[derive(Clone, Debug, Default)]
pub struct Policies {
    rules: Vec<(Glob, Policy)>,
}

impl Policies {
    pub fn new(rules: Vec<(Glob, Policy)>) -> Self {
        Policies { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The policy of the tool named `name`: the first rule matching it.
    pub fn find(&self, name: &str) -> Option<&Policy> {
        self.rules
            .iter()
            .find(|(glob, _)| glob.matches(name))
            .map(|(_, policy)| policy)
    }
}

/// One piece of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Char(char),
    /// `?`: any one character.
    Any,
    /// `*`: any run of characters (consecutive stars are one).
    Star,
    /// `[...]`: one character in (or, negated, not in) the ranges, each `(low, high)`.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Char(own) => *own == c,
            Token::Any => true,
            Token::Star => false,
            Token::Class { negated, ranges } => ranges.iter().any(|&(low, high)| low <= c && c <= high) != *negated,
        }
    }
}

/// A parsed shell glob (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    /// Parse `pattern`; every pattern is valid (an unclosed `[` is a literal).
    pub fn new(pattern: &str) -> Self {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut at = 0;
        while let Some(&c) = chars.get(at) {
            at += 1;
            match c {
                '*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                }
                '?' => tokens.push(Token::Any),
                '[' => match class(&chars, at) {
                    Some((token, next)) => {
                        tokens.push(token);
                        at = next;
                    }
                    None => tokens.push(Token::Char('[')),
                },
                other => tokens.push(Token::Char(other)),
            }
        }
        Glob { tokens }
    }

    /// Whether the whole of `name` matches. Iterative: a star is retried one character
    /// further at each mismatch after it, so the work is at most the product of the lengths.
    pub fn matches(&self, name: &str) -> bool {
        let tokens = &self.tokens;
        let (mut token, mut at) = (0, 0);
        // The last star met, and where in `name` its run ends for now.
        let mut star: Option<(usize, usize)> = None;
        loop {
            let next = name.get(at..).and_then(|rest| rest.chars().next());
            match tokens.get(token) {
                Some(Token::Star) => {
                    star = Some((token, at));
                    token += 1;
                    continue;
                }
                Some(one) => {
                    if let Some(c) = next.filter(|&c| one.matches(c)) {
                        token += 1;
                        at += c.len_utf8();
                        continue;
                    }
                }
                None if next.is_none() => return true,
                None => {}
            }
            // A mismatch: the last star takes one more character, or there is no match.
            let Some((star_token, star_end)) = star else {
                return false;
            };
            let Some(c) = name.get(star_end..).and_then(|rest| rest.chars().next()) else {
                return false;
            };
            star = Some((star_token, star_end + c.len_utf8()));
            token = star_token + 1;
            at = star_end + c.len_utf8();
        }
    }
}

/// The class opening at `chars[start - 1]` (a `[`): the token and the index after its `]`,
/// or `None` when it has no closing `]` (the `[` is then a literal), as `fnmatch` reads it.
fn class(chars: &[char], start: usize) -> Option<(Token, usize)> {
    let mut at = start;
    let negated = chars.get(at) == Some(&'!');
    if negated {
        at += 1;
    }
    // A `]` first in the set is a member, not its end.
    let first = at;
    let mut close = at;
    loop {
        match chars.get(close) {
            None => return None,
            Some(']') if close > first => break,
            Some(_) => close += 1,
        }
    }
    let members = chars.get(at..close)?;
    let mut ranges = Vec::new();
    let mut index = 0;
    while let Some(&low) = members.get(index) {
        // `a-z` is a range; a `-` first or last is itself.
        match (members.get(index + 1), members.get(index + 2)) {
            (Some('-'), Some(&high)) => {
                // A reversed range (`z-a`) matches nothing, as in `fnmatch`.
                if low <= high {
                    ranges.push((low, high));
                }
                index += 3;
            }
            _ => {
                ranges.push((low, low));
                index += 1;
            }
        }
    }
    Some((Token::Class { negated, ranges }, close + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, name: &str) -> bool {
        Glob::new(pattern).matches(name)
    }

    #[test]
    fn globs_match_as_fnmatchcase() {
        assert!(matches("wait_*", "wait_for_job") && matches("wait_*", "wait_"));
        assert!(!matches("wait_*", "await_job") && !matches("Wait_*", "wait_x"));
        assert!(matches("process", "process") && !matches("process", "processes"));
        assert!(matches("*_status", "job_status") && matches("a*b*c", "aXbYbc") && !matches("a*b*c", "aXbYb"));
        assert!(matches("t?ol", "tool") && matches("t?ol", "tÿol") && !matches("t?ol", "tol"));
        assert!(matches("[bc]at", "cat") && !matches("[!bc]at", "cat") && matches("[!bc]at", "hat"));
        assert!(matches("v[0-9]", "v7") && !matches("v[0-9]", "vx") && !matches("v[9-0]", "v5"));
        assert!(matches("[]]", "]") && matches("[!]]", "x") && matches("[-a]", "-") && matches("[a-]", "-"));
        // An unclosed class is a literal `[`.
        assert!(matches("[abc", "[abc") && !matches("[abc", "a"));
        assert!(matches("*", "") && matches("**", "x") && !matches("?", ""));
    }

    #[test]
    fn the_first_matching_rule_is_the_policy() {
        let limits = Policy::Limits {
            session: ActionLimits {
                identical: 9,
                similar: 9,
                failures: 9,
                no_progress: 9,
            },
            tool: ToolLimits {
                warning: 30,
                critical: 60,
                global: 90,
            },
        };
        let policies = Policies::new(vec![
            (Glob::new("wait_for_deploy"), limits),
            (Glob::new("wait_*"), Policy::Exempt),
        ]);
        assert_eq!(policies.find("wait_for_deploy"), Some(&limits));
        assert_eq!(policies.find("wait_for_job"), Some(&Policy::Exempt));
        assert_eq!(policies.find("bash"), None);
        assert!(Policies::default().is_empty() && Policies::default().find("x").is_none());
    }

    #[test]
    fn a_long_name_against_many_stars_stays_bounded() {
        let name = "a".repeat(2000);
        assert!(!matches("*a*a*a*a*a*b", &name));
        assert!(matches("*a*a*a*a*a*", &name));
    }
}
