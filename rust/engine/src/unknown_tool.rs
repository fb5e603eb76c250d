//! The unknown tool an error message names, found as OpenClaw's two regexes find it, but
//! written out by hand: no regex engine, linear in the text, JavaScript's whitespace rules.

/// JavaScript's `\s` (what OpenClaw's regexes and `trim()` use).
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

/// `text` without leading or trailing JavaScript whitespace (`String.prototype.trim`). ASCII
/// ends are trimmed byte by byte, so the usual text needs no char decoding; a non-ASCII end
/// falls back to the char rule.
pub fn trim_js_space(text: &str) -> &str {
    let ascii_space = |b: &u8| matches!(b, b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r' | b' ');
    let bytes = text.as_bytes();
    let start = bytes.iter().position(|b| !ascii_space(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !ascii_space(b))
        .map_or(start, |last| last + 1);
    // Both cuts are next to ASCII bytes, so on char boundaries.
    let rest = text.get(start..end).unwrap_or("");
    let ascii_ends =
        rest.as_bytes().first().is_none_or(u8::is_ascii) && rest.as_bytes().last().is_none_or(u8::is_ascii);
    if ascii_ends {
        rest
    } else {
        rest.trim_matches(is_js_space)
    }
}

/// [`trim_js_space`] of text that may hold lone surrogates encoded as such (`surrogatepass`
/// UTF-8, which is not valid UTF-8): a surrogate is not whitespace, so a trim stops there.
pub fn trim_js_space_bytes(text: &[u8]) -> &[u8] {
    if let Ok(valid) = std::str::from_utf8(text) {
        return trim_js_space(valid).as_bytes();
    }
    let mut chunks = text.utf8_chunks();
    let start = chunks.next().map_or(0, |first| {
        first.valid().len() - first.valid().trim_start_matches(is_js_space).len()
    });
    // Trailing space can only follow the last invalid sequence.
    let (mut offset, mut tail) = (0, None);
    for chunk in text.utf8_chunks() {
        tail = Some((offset, chunk.valid(), chunk.invalid().is_empty()));
        offset += chunk.valid().len() + chunk.invalid().len();
    }
    let end = match tail {
        Some((at, valid, true)) => at + valid.trim_end_matches(is_js_space).len(),
        _ => text.len(),
    };
    text.get(start..end.max(start)).unwrap_or_default()
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

fn starts_with_ci(text: &str, at: usize, pattern: &str) -> bool {
    text.as_bytes()
        .get(at..at + pattern.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(pattern.as_bytes()))
}

/// Skip chars matching `pred` from byte `at`; returns the new position and how many.
fn skip_while(text: &str, at: usize, pred: impl Fn(char) -> bool) -> (usize, usize) {
    let rest = text.get(at..).unwrap_or("");
    let mut end = at;
    let mut n = 0;
    for c in rest.chars() {
        if !pred(c) {
            break;
        }
        end += c.len_utf8();
        n += 1;
    }
    (end, n)
}

fn skip_quote(text: &str, at: usize) -> usize {
    match text.as_bytes().get(at) {
        Some(b'"' | b'\'') => at + 1,
        _ => at,
    }
}

/// The unknown tool an error text names, lowercased: OpenClaw's two regexes,
/// `/unknown tool[:\s]+["']?([a-z0-9_.-]+)["']?/i`, else
/// `/tool\s+["']?([a-z0-9_.-]+)["']?\s+(?:not found|is not available)/i`.
pub fn unknown_tool_name(text: &str) -> Option<String> {
    let starts = |pattern: &'static str| {
        text.char_indices()
            .map(|(i, _)| i)
            .filter(move |&i| starts_with_ci(text, i, pattern))
    };
    for i in starts("unknown tool") {
        let (at, separators) = skip_while(text, i + "unknown tool".len(), |c| c == ':' || is_js_space(c));
        if separators == 0 {
            continue;
        }
        let name_start = skip_quote(text, at);
        let (name_end, n) = skip_while(text, name_start, is_name_char);
        if n > 0 {
            return text.get(name_start..name_end).map(str::to_ascii_lowercase);
        }
    }
    for i in starts("tool") {
        let (at, spaces) = skip_while(text, i + "tool".len(), is_js_space);
        if spaces == 0 {
            continue;
        }
        let name_start = skip_quote(text, at);
        let (name_end, n) = skip_while(text, name_start, is_name_char);
        if n == 0 {
            continue;
        }
        let (tail, spaces) = skip_while(text, skip_quote(text, name_end), is_js_space);
        if spaces > 0 && (starts_with_ci(text, tail, "not found") || starts_with_ci(text, tail, "is not available")) {
            return text.get(name_start..name_end).map(str::to_ascii_lowercase);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{is_js_space, trim_js_space, trim_js_space_bytes, unknown_tool_name};

    #[test]
    fn trim_matches_the_char_rule() {
        for text in [
            "",
            " ",
            "\n\t x \r\n",
            "def main():\n    return 0\n",
            "\u{a0}x\u{3000}",
            " \u{feff} é \u{2028}",
            "\u{a0}",
            "é",
            " a\u{a0} b ",
        ] {
            assert_eq!(trim_js_space(text), text.trim_matches(is_js_space), "{text:?}");
        }
    }

    #[test]
    fn first_pattern_unknown_tool() {
        assert_eq!(unknown_tool_name("Unknown tool: Foo_Bar"), Some("foo_bar".into()));
        assert_eq!(
            unknown_tool_name("error: unknown tool \"web.search\" requested"),
            Some("web.search".into())
        );
        assert_eq!(unknown_tool_name("unknown tool:\u{a0}'x-1'"), Some("x-1".into()));
        // The separator is required, and so is a name.
        assert_eq!(unknown_tool_name("unknown toolfoo"), None);
        assert_eq!(unknown_tool_name("unknown tool: !!"), None);
    }

    #[test]
    fn second_pattern_not_found_or_not_available() {
        assert_eq!(unknown_tool_name("Tool grep not found"), Some("grep".into()));
        assert_eq!(
            unknown_tool_name("tool 'Deploy' is not available"),
            Some("deploy".into())
        );
        assert_eq!(unknown_tool_name("tool grep was found"), None);
        assert_eq!(unknown_tool_name("toolgrep not found"), None);
    }

    #[test]
    fn first_pattern_wins_and_odd_text_is_safe() {
        assert_eq!(unknown_tool_name("tool a not found; unknown tool: b"), Some("b".into()));
        assert_eq!(unknown_tool_name(""), None);
        assert_eq!(unknown_tool_name("ünknown tool: ß tool"), None);
        assert_eq!(unknown_tool_name("unknown tool: 漢字"), None);
        assert_eq!(unknown_tool_name("tool"), None);
    }

    #[test]
    fn trims_around_lone_surrogates() {
        // "\u{dcff}" as surrogatepass encodes it: ED B3 BF.
        let surrogate = [0xED, 0xB3, 0xBF];
        let text = [" \u{a0}x".as_bytes(), &surrogate, b"y \n"].concat();
        assert_eq!(trim_js_space_bytes(&text), [b"x".as_slice(), &surrogate, b"y"].concat());
        let edges = [surrogate.as_slice(), b"  ", &surrogate].concat();
        assert_eq!(trim_js_space_bytes(&edges), edges);
        let padded = [b"\t".as_slice(), &surrogate, b"\t"].concat();
        assert_eq!(trim_js_space_bytes(&padded), surrogate);
        assert_eq!(trim_js_space_bytes(b"  plain  "), b"plain");
    }
}
