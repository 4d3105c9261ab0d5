//! Stored JSON that holds a lone UTF-16 surrogate escape (`"\ud800"`): JavaScript writes one
//! whenever it cuts a string inside a surrogate pair, and `JSON.parse` reads it back, so
//! OpenCode's rows and CodeNomad's revisions carry them. A Rust string cannot hold a lone
//! surrogate, so each one is read as a placeholder of two characters that `JSON.stringify`'s
//! writer (the private `escape` module) turns back into the escape JavaScript writes: `\ud800`,
//! lowercase hex (docs/ARCHITECTURE.md, "Revision").
//!
//! The placeholder is U+FDD0 (a noncharacter, which no text of OpenCode's holds) followed by
//! U+F0000 plus the unit's offset from U+D800 (a private-use character). A text that already
//! holds U+FDD0, raw or escaped, is not read at all: its own characters could not be told from
//! placeholders, and a revision or a row written from them would differ from JavaScript's.

use serde_json::Value;

/// The first character of a placeholder.
pub(crate) const MARKER: char = '\u{FDD0}';
/// The second character of a placeholder, for the unit U+D800; U+D801 is the next one, ...
const FIRST_UNIT_CHAR: u32 = 0xF0000;
/// UTF-16 surrogate units: U+D800 to U+DFFF.
const SURROGATES: std::ops::RangeInclusive<u32> = 0xD800..=0xDFFF;
/// Bytes of a placeholder in UTF-8: three for U+FDD0, four for the second character.
pub(crate) const PLACEHOLDER_LEN: usize = 7;

/// Parses JSON `text` as `JSON.parse` does: as serde_json does, and where that fails on a lone
/// surrogate escape, with each lone one read as its placeholder.
///
/// Errors: serde_json's, for text that is not JSON; a custom one for text that holds U+FDD0
/// (raw or escaped), which is not read (see above).
pub fn parse(text: &str) -> serde_json::Result<Value> {
    if text.contains(MARKER) || has_escaped_marker(text) {
        return Err(serde::de::Error::custom(
            "the text holds U+FDD0, which this reader keeps for lone surrogates",
        ));
    }
    match serde_json::from_str(text) {
        Ok(value) => Ok(value),
        Err(error) => match with_placeholders(text) {
            Some(placed) => serde_json::from_str(&placed),
            None => Err(error),
        },
    }
}

/// The unit a placeholder starting at byte `at` of `s` stands for, if one does.
pub(crate) fn unit_at(s: &str, at: usize) -> Option<u16> {
    let rest = s.get(at..)?;
    let mut chars = rest.chars();
    if chars.next()? != MARKER {
        return None;
    }
    let offset = u32::from(chars.next()?).checked_sub(FIRST_UNIT_CHAR)?;
    let unit = SURROGATES.start() + offset;
    if SURROGATES.contains(&unit) {
        u16::try_from(unit).ok()
    } else {
        None
    }
}

/// `text` (which holds no U+FDD0) with each lone surrogate escape replaced by its placeholder;
/// `None` when it holds none.
fn with_placeholders(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut at, mut replaced) = (0, 0, false);
    while at < bytes.len() {
        if bytes[at] != b'\\' {
            at += 1;
            continue;
        }
        let Some(unit) = escaped_unit(bytes, at) else {
            // Another escape: its character is never the start of one.
            at += 2;
            continue;
        };
        if (0xD800..=0xDBFF).contains(&unit)
            && escaped_unit(bytes, at + 6).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low))
        {
            // A whole pair: serde_json reads it.
            at += 12;
            continue;
        }
        if SURROGATES.contains(&u32::from(unit)) {
            out.push_str(&text[copied..at]);
            out.push(MARKER);
            let second = FIRST_UNIT_CHAR + (u32::from(unit) - SURROGATES.start());
            out.push(char::from_u32(second)?);
            at += 6;
            copied = at;
            replaced = true;
            continue;
        }
        at += 6;
    }
    if !replaced {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// The unit of a `\uXXXX` escape at byte `at` (its backslash), if one is there.
fn escaped_unit(bytes: &[u8], at: usize) -> Option<u16> {
    let escape = bytes.get(at..at + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

/// Whether `text` holds U+FDD0 written as an escape (`\ufdd0`, any case; an escaped backslash
/// before `ufdd0` counts too, which only refuses more).
fn has_escaped_marker(text: &str) -> bool {
    let bytes = text.as_bytes();
    // `\u` escapes are rare (JSON.stringify writes one only below U+0020 or for a lone
    // surrogate), where backslashes are not: every line break of a tool output has one.
    memchr::memmem::find_iter(bytes, b"\\u").any(|at| escaped_unit(bytes, at) == Some(0xFDD0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_is_read_as_its_placeholder_and_a_pair_as_its_character() {
        let value = parse(r#"{"a":"x\ud800y","b":"\uD83D\uDE00","c":"\udfff"}"#).unwrap();
        let a = value["a"].as_str().unwrap();
        assert_eq!(a.chars().count(), 4);
        assert_eq!(unit_at(a, 1), Some(0xD800));
        assert_eq!(value["b"], "😀");
        assert_eq!(unit_at(value["c"].as_str().unwrap(), 0), Some(0xDFFF));
    }

    #[test]
    fn an_escaped_backslash_before_u_is_not_an_escape() {
        let value = parse(r#"["\\ud800", "\ud800"]"#).unwrap();
        assert_eq!(value[0], "\\ud800");
        assert_eq!(unit_at(value[1].as_str().unwrap(), 0), Some(0xD800));
    }

    #[test]
    fn text_that_holds_the_marker_is_not_read() {
        assert!(parse("[\"\u{FDD0}\", \"\\ud800\"]").is_err());
        assert!(parse(r#"["\uFDD0", "\ud800"]"#).is_err());
        assert!(parse("[\"\u{FDD0}\u{F0000}\"]").is_err());
        assert!(parse(r#"["\ufdd0"]"#).is_err());
        assert!(parse(r#"{"a": 1"#).is_err());
        assert_eq!(parse(r#"{"a": "\u00e9"}"#).unwrap()["a"], "é");
    }
}
