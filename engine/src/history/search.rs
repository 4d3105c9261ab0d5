//! Case-insensitive search of message text, and the excerpt shown for a hit.
//!
//! Source: docs/ARCHITECTURE.md, "Contract", and CodeNomad's `history.test.ts` (`history`:
//! case-insensitive search over text,
//! optionally over technical parts; a search for `RÉFLEXION` finds `réflexion`; an excerpt is at
//! most 320 characters). Query and text are folded the same way, one character at a time:
//! Unicode lowercase (`char::to_lowercase`), with the final sigma `ς` read as `σ`, so that
//! `ΟΔΟΣ` finds `οδος` and itself. The excerpt is cut from the original text, never the folded
//! one.

use memchr::memmem;
use serde_json::Value;

use crate::contract::PartKind;

/// Longest excerpt, in UTF-16 code units (zod `.max(320)`).
pub const MAX_EXCERPT_LEN: usize = 320;
/// How much text, in characters, an excerpt keeps before the match when it can.
const CONTEXT_BEFORE: usize = 80;

/// A lowercase query, ready to search many texts.
#[derive(Debug, Clone)]
pub struct Matcher {
    needle: String,
}

impl Matcher {
    /// A matcher for `query`; `None` for an empty query, which finds nothing.
    pub fn new(query: &str) -> Option<Self> {
        (!query.is_empty()).then(|| {
            let mut needle = String::with_capacity(query.len());
            query.chars().for_each(|ch| fold_into(ch, &mut needle));
            Self { needle }
        })
    }

    /// The excerpt around the first case-insensitive occurrence of the query in `text`.
    pub fn excerpt(&self, text: &str) -> Option<String> {
        let start = self.find(text)?;
        Some(excerpt_at(text, start))
    }

    /// Byte offset in `text` of the first character of the first occurrence.
    fn find(&self, text: &str) -> Option<usize> {
        if text.is_ascii() && self.needle.is_ascii() {
            let folded = text.to_ascii_lowercase();
            return memmem::find(folded.as_bytes(), self.needle.as_bytes());
        }
        // Folding may change a character's length ('İ' folds to two), so remember where each
        // folded character came from.
        let mut folded = String::with_capacity(text.len());
        let mut origins: Vec<(usize, usize)> = Vec::new();
        for (offset, ch) in text.char_indices() {
            origins.push((folded.len(), offset));
            fold_into(ch, &mut folded);
        }
        let at = memmem::find(folded.as_bytes(), self.needle.as_bytes())?;
        let index = origins.partition_point(|&(folded_at, _)| folded_at <= at);
        origins
            .get(index.checked_sub(1)?)
            .map(|&(_, offset)| offset)
    }
}

/// Appends the folded form of `ch` to `out`.
fn fold_into(ch: char, out: &mut String) {
    for lower in ch.to_lowercase() {
        out.push(if lower == 'ς' { 'σ' } else { lower });
    }
}

/// Up to 320 UTF-16 units of `text` starting a little before byte offset `start`.
fn excerpt_at(text: &str, start: usize) -> String {
    let before: Vec<usize> = text[..start]
        .char_indices()
        .rev()
        .take(CONTEXT_BEFORE)
        .map(|(offset, _)| offset)
        .collect();
    let from = before.last().copied().unwrap_or(start);
    let mut units = 0;
    let mut excerpt = String::new();
    for ch in text[from..].chars() {
        units += ch.len_utf16();
        if units > MAX_EXCERPT_LEN {
            break;
        }
        excerpt.push(ch);
    }
    excerpt
}

/// The texts of a part a search looks at: a text part's `text`; a reasoning part's `text`; a
/// tool part's name (`tool` in V1, `name` in V2) and every string under its `state` (input,
/// output, error, title, V2 `content[].text`) except the `status` and `type` tags.
pub fn part_texts(part: &Value, kind: SearchKind) -> Vec<&str> {
    let mut texts = Vec::new();
    match kind {
        SearchKind::Text | SearchKind::Reasoning => {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                texts.push(text);
            }
        }
        SearchKind::Tool => {
            for key in ["tool", "name"] {
                if let Some(name) = part.get(key).and_then(Value::as_str) {
                    texts.push(name);
                }
            }
            if let Some(state) = part.get("state") {
                strings(state, &mut texts);
            }
        }
    }
    texts
}

fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        // `status` and `type` are tags, not text anyone searches for.
        Value::Object(map) => map
            .iter()
            .filter(|(key, _)| !matches!(key.as_str(), "status" | "type"))
            .for_each(|(_, item)| strings(item, out)),
        _ => {}
    }
}

/// What kind of part a hit is in: the contract's `kind` (`text`, `tool`, `reasoning`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchKind {
    /// A text part (or a V2 message's own `text`).
    Text,
    /// A tool part.
    Tool,
    /// A reasoning part.
    Reasoning,
}

impl From<PartKind> for SearchKind {
    fn from(kind: PartKind) -> Self {
        match kind {
            PartKind::Tool => Self::Tool,
            PartKind::Reasoning => Self::Reasoning,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_ignores_case_beyond_ascii() {
        let matcher = Matcher::new("RÉFLEXION").unwrap();
        assert_eq!(
            matcher.excerpt("Une réflexion profonde"),
            Some("Une réflexion profonde".into())
        );
        assert_eq!(matcher.excerpt("reflexion"), None);
        let ascii = Matcher::new("Canary").unwrap();
        assert_eq!(
            ascii.excerpt("the CANARY sings"),
            Some("the CANARY sings".into())
        );
        assert!(Matcher::new("").is_none());
    }

    #[test]
    fn greek_final_sigma_finds_itself_in_either_case() {
        let text = "ΟΔΟΣ ΣΟΦΙΑΣ";
        for query in ["ΟΔΟΣ", "ΟΔΟΣ ΣΟΦΙΑΣ", "οδος", "σοφιας"] {
            assert_eq!(
                Matcher::new(query).unwrap().excerpt(text),
                Some(text.to_string()),
                "{query}"
            );
        }
    }

    #[test]
    fn folding_that_changes_length_maps_back_to_the_original_text() {
        // 'İ' lowercases to two characters; the match after it must still start at "x".
        let matcher = Matcher::new("x").unwrap();
        assert_eq!(matcher.excerpt("İİx"), Some("İİx".into()));
    }

    #[test]
    fn an_excerpt_is_at_most_320_units_and_starts_before_the_match() {
        let text = format!("{}NEEDLE{}", "a".repeat(500), "🚀".repeat(400));
        let excerpt = Matcher::new("needle").unwrap().excerpt(&text).unwrap();
        assert!(excerpt.starts_with(&format!("{}NEEDLE", "a".repeat(80))));
        assert_eq!(excerpt.encode_utf16().count(), 320);
    }

    #[test]
    fn tool_texts_cover_name_input_and_output_of_both_generations() {
        let v1 = serde_json::json!({"type":"tool","tool":"bash","state":{"status":"completed","input":{"command":"ls"},"output":"OUT"}});
        assert_eq!(part_texts(&v1, SearchKind::Tool), vec!["bash", "ls", "OUT"]);
        let v2 = serde_json::json!({"type":"tool","name":"read","state":{"status":"error","input":"{}","content":[{"type":"text","text":"T"}],"error":"E"}});
        assert_eq!(
            part_texts(&v2, SearchKind::Tool),
            vec!["read", "{}", "T", "E"]
        );
    }
}
