//! The browsing half of the contract: bounded, read-only views of one session for a client that
//! shows it (docs/ARCHITECTURE.md, "Browsing"). The request and answer shapes, their bounds and
//! their parsing mirror CodeNomad's session-pruning RPC methods `window`, `outline`,
//! `outlinePreview`, `assets` and `assetRead` (its `navigation-contract.ts`,
//! `outline-index.ts`, `outline-preview.ts`, `assets-contract.ts`). This module knows no SQL:
//! the adapters read the rows.

pub mod answer;
pub mod request;

pub use answer::{
    AssetEntry, AssetResult, AssetsResult, BrowseReason, Checkpoint, Excerpt, OutlineEntry,
    OutlineResult, PreviewsResult, WindowResult,
};
pub use request::{
    AssetReadRequest, AssetTarget, AssetsRequest, KnownCheckpoint, OutlineCursor,
    OutlinePreviewRequest, OutlineRequest, Target, WindowRequest,
};

/// Most messages in one window.
pub const WINDOW_MESSAGES: usize = 200;
/// A window `around` a message: this many messages before it...
pub const AROUND_BEFORE: usize = 80;
/// ...and this many from it on (it included).
pub const AROUND_FROM: usize = 120;
/// Messages a window `before`/`after` a message repeats from the window it pages from.
pub const PAGE_OVERLAP: usize = 16;
/// Largest message a window or an asset read loads: 16 MiB of stored `data`.
pub const MESSAGE_BYTES: u64 = 16 * 1024 * 1024;
/// Largest window: 24 MiB of stored `data` over its messages.
pub const WINDOW_BYTES: u64 = 24 * 1024 * 1024;
/// Most entries (and rows read) in one outline page.
pub const OUTLINE_ENTRIES: usize = 16_384;
/// Most rows in one outline chunk (one checkpoint).
pub const CHUNK_ROWS: usize = 512;
/// Most checkpoints one outline request may send back, and one page may answer.
pub const MAX_CHECKPOINTS: usize = 512;
/// Most message ids in one `outlinePreview` request.
pub const PREVIEW_IDS: usize = 12;
/// Longest excerpt (`text` or `tools`) of an `outlinePreview` entry, in UTF-16 code units.
pub const EXCERPT_UNITS: usize = 4096;
/// Most entries in one page of assets.
pub const ASSET_PAGE: usize = 64;
/// Most messages one page of assets reads.
pub const ASSET_SCAN_MESSAGES: usize = 32;
/// Most stored bytes one page of assets parses (then it answers a cursor).
pub const ASSET_SCAN_BYTES: u64 = 32 * 1024 * 1024;
/// Longest `data:` URI an asset read answers, in characters.
pub const ASSET_URI_CHARS: usize = 8 * 1024 * 1024;
/// Largest part or file index an asset target may name.
pub const MAX_ASSET_INDEX: u32 = 100_000;
/// Longest assets cursor, in characters.
pub const ASSETS_CURSOR_CHARS: usize = 4096;
/// Longest tool or asset name an answer carries, in UTF-16 code units.
pub const NAME_UNITS: usize = 256;
/// Longest MIME type of an asset, in characters.
pub const MIME_CHARS: usize = 128;
/// Most sessions in one page of `GET .../sessions`.
pub const SESSIONS_PAGE: usize = 100;

/// The bytes of a browsing answer, as the HTTP API sends them and `--json` prints them: compact
/// JSON and a newline. Not pretty-printed, unlike the contract's answers: a window carries
/// stored JSON, whose nesting indentation would multiply far past the window's 24 MiB bound.
///
/// Errors: serde_json's (none for the browsing answers).
pub fn document<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut text = serde_json::to_vec(value)?;
    text.push(b'\n');
    Ok(text)
}

/// `text` cut to at most `units` UTF-16 code units, without leaving half of a surrogate pair at
/// its end (CodeNomad's `boundedToolName`).
pub fn cut_utf16(text: &str, units: usize) -> &str {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += c.len_utf16();
        if used > units {
            return &text[..at];
        }
    }
    text
}

/// Whether `mime` is `type/subtype` of word characters, `.`, `+` and `-` only, at most 128
/// characters (CodeNomad's asset MIME rule: no parameters).
pub fn valid_mime(mime: &str) -> bool {
    let ok = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'+' | b'-'))
    };
    mime.len() <= MIME_CHARS && mime.split_once('/').is_some_and(|(a, b)| ok(a) && ok(b))
}

/// Whether `uri` is an embedded asset of type `mime`: `data:<mime>;base64,<body>` with a
/// non-empty base64 body (padded, standard alphabet) and at most [`ASSET_URI_CHARS`]
/// characters (CodeNomad's `isEmbeddedAsset`).
pub fn embedded(mime: &str, uri: &str) -> bool {
    if uri.len() > ASSET_URI_CHARS {
        return false;
    }
    let Some(body) = uri
        .strip_prefix("data:")
        .and_then(|rest| rest.strip_prefix(mime))
        .and_then(|rest| rest.strip_prefix(";base64,"))
    else {
        return false;
    };
    let data = body.trim_end_matches('=');
    !body.is_empty()
        && body.len() % 4 == 0
        && body.len() - data.len() <= 2
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_whole_surrogate_pairs() {
        let wrench = "🔧".repeat(256);
        assert_eq!(cut_utf16(&wrench, 256), "🔧".repeat(128));
        assert_eq!(cut_utf16(&"a🔧".repeat(2), 2), "a");
        assert_eq!(cut_utf16("abc", 256), "abc");
    }

    #[test]
    fn mime_types_without_parameters_only() {
        assert!(valid_mime("image/png"));
        assert!(valid_mime("application/vnd.api+json"));
        assert!(!valid_mime("text/plain; charset=utf-8"));
        assert!(!valid_mime("image"));
        assert!(!valid_mime("/png"));
        assert!(!valid_mime(&format!("a/{}", "b".repeat(127))));
    }

    #[test]
    fn embedded_needs_the_exact_type_and_base64() {
        assert!(embedded("image/png", "data:image/png;base64,iVBORw=="));
        assert!(!embedded("image/png", "data:image/jpeg;base64,iVBORw=="));
        assert!(!embedded("image/png", "data:image/png;base64,"));
        assert!(!embedded("image/png", "data:image/png;base64,abc"));
        assert!(!embedded("image/png", "data:image/png;base64,ab=c"));
        assert!(!embedded("image/png", "data:image/png;base64,a==="));
        assert!(!embedded("image/png", "file:///tmp/a.png"));
    }
}
