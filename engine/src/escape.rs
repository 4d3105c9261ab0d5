//! JSON string escaping exactly as JavaScript's `JSON.stringify` writes it, fast enough for the
//! revision of a 16 MiB message.
//!
//! Rules (ECMA-262 `QuoteJSONString` for well-formed strings): `"` and `\` are escaped with a
//! backslash; U+0008, U+0009, U+000A, U+000C and U+000D as `\b \t \n \f \r`; every other code
//! point below U+0020 as `\u00xx` with lowercase hex; everything else, non-ASCII included, is
//! written raw. Runs of bytes that need nothing are found eight bytes at a time. A lone
//! surrogate, held as its placeholder (`crate::lone_surrogates`), is written as JavaScript
//! writes it: `\ud800`, lowercase hex.

const HEX: &[u8; 16] = b"0123456789abcdef";
const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;
/// The first byte of U+FDD0 in UTF-8 (`EF B7 90`).
const MARKER_LEAD: u8 = 0xEF;

/// Appends `s` as a quoted JSON string to `out`.
pub fn escape_into(s: &str, out: &mut Vec<u8>) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0; // first byte not yet copied
    let mut i = 0;
    while i < bytes.len() {
        if i + 8 <= bytes.len() {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[i..i + 8]);
            let mask = escape_mask(u64::from_le_bytes(word));
            if mask == 0 {
                i += 8;
                continue;
            }
            // The lowest flagged byte always needs escaping (false flags only sit above a true
            // one), so jump straight to it.
            i += (mask.trailing_zeros() / 8) as usize;
        }
        let b = bytes[i];
        // The first byte of U+FDD0, which may begin a lone surrogate's placeholder.
        if b == MARKER_LEAD {
            if let Some(unit) = crate::lone_surrogates::unit_at(s, i) {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[usize::from((unit >> shift) & 0x0f)]);
                }
                i += crate::lone_surrogates::PLACEHOLDER_LEN;
                start = i;
                continue;
            }
            i += 1;
            continue;
        }
        let named: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            0x08 => Some(b"\\b"),
            0x09 => Some(b"\\t"),
            0x0a => Some(b"\\n"),
            0x0c => Some(b"\\f"),
            0x0d => Some(b"\\r"),
            0x00..=0x1f => Some(b""),
            _ => None,
        };
        if let Some(named) = named {
            out.extend_from_slice(&bytes[start..i]);
            if named.is_empty() {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0x0f)]);
            } else {
                out.extend_from_slice(named);
            }
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The high bit of each byte of `word` (little-endian) that is below 0x20, `"`, `\\` or the
/// first byte of a placeholder's U+FDD0 (0xEF, also the first byte of other characters, which
/// are then copied one byte at a time), plus possibly false flags above a true one (borrows
/// propagate upward). Zero means the whole word can be copied as it is.
fn escape_mask(word: u64) -> u64 {
    let below_space = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = zero_bytes(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_bytes(word ^ (ONES * u64::from(b'\\')));
    let marker = zero_bytes(word ^ (ONES * u64::from(MARKER_LEAD)));
    (below_space | quote | backslash | marker) & HIGHS
}

/// High bits flagging the zero bytes of `v` (exact for the lowest one).
fn zero_bytes(v: u64) -> u64 {
    v.wrapping_sub(ONES) & !v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = Vec::new();
        escape_into(s, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_code_point_below_0x80_matches_serde_json() {
        // serde_json's escaping is JSON.stringify's; check every ASCII byte in every position of
        // an eight-byte word.
        for b in 0u8..0x80 {
            for pad in 0..10 {
                let s = format!(
                    "{}{}{}",
                    "a".repeat(pad),
                    char::from(b),
                    "z".repeat(9 - pad)
                );
                assert_eq!(
                    escaped(&s),
                    serde_json::to_string(&s).unwrap(),
                    "byte {b:#x} pad {pad}"
                );
            }
        }
    }

    #[test]
    fn mixed_text_matches_serde_json() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let alphabet: Vec<char> = "ab\"\\\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}é✓😀\u{2028} ，\u{fdd0}"
            .chars()
            .collect();
        for len in 0..200 {
            let s: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn named_escapes_and_lowercase_hex() {
        assert_eq!(escaped("\u{1}\u{1a}\u{7f}"), "\"\\u0001\\u001a\u{7f}\"");
        assert_eq!(
            escaped("\u{8}\u{9}\n\u{c}\r\"\\/"),
            "\"\\b\\t\\n\\f\\r\\\"\\\\/\""
        );
    }

    #[test]
    fn a_lone_surrogates_placeholder_is_written_as_javascript_writes_it() {
        let value = crate::lone_surrogates::parse(r#"["a\ud83d b，\uDFFF"]"#).unwrap();
        assert_eq!(
            escaped(value[0].as_str().unwrap()),
            "\"a\\ud83d b，\\udfff\""
        );
    }
}
