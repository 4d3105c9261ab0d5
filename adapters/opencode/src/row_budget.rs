//! Rows over the row budget: how a read takes a `data` column larger than 16 MiB without
//! loading it (docs/ARCHITECTURE.md, "Rows over the budget").
//!
//! OpenCode stores each row's JSON whole (`part.data`, `event.data`, `message.data`,
//! `session_message.data`), and one tool part can hold hundreds of MB. SQLite's JSON functions
//! load a value whole and keep a parse of it beside, and so does a Rust `get`, so a listing that
//! parses every row would hold its largest row several times over. Every read that parses or
//! searches `data` therefore goes through [`data`]: a row within [`ROW_BYTES`] as it is, a larger
//! one as its *abridged* JSON, made by [`ABRIDGED`] from SQLite's incremental blob I/O 64 KiB at
//! a time: the same members and items in the same order, where every string over
//! [`LONG_STRING_BYTES`] keeps its first and last [`KEPT_BYTES`] around a marker that says how
//! many bytes were cut.
//!
//! What stays exact: a row's size (`octet_length` reads the record header, never the value),
//! every field a rule reads (types, ids, statuses, times: short strings and numbers), and
//! whether the row is JSON (the stream is checked to its end). What is approximate: the bytes
//! of one V2 `content` entry inside such a row, counted by [`UNCUT_BYTES`] as the abridged
//! entry plus the bytes its markers say were cut (unescaped bytes, where the stored text may
//! spell a character with an escape). Nothing is ever written from an abridged row: its
//! message is over the contract's 16 MiB, so a prune refuses it before reading it.

use std::io::{self, Read};
use std::sync::{Arc, Mutex};

use rusqlite::blob::Blob;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::{Connection, MAIN_DB};
use struson::reader::{JsonReader, JsonStreamReader, ReaderSettings, ValueType};
use struson::writer::{JsonStreamWriter, JsonWriter};

/// Largest `data` value, in bytes, a read loads whole: the contract's message budget
/// ([`pruning_engine::contract::MAX_MESSAGE_BYTES`], 16 MiB), so any row a prune could take
/// is read as stored.
pub const ROW_BYTES: usize = pruning_engine::contract::MAX_MESSAGE_BYTES;

/// A string longer than this, in bytes of UTF-8, is cut in an abridged row.
pub const LONG_STRING_BYTES: usize = 4096;

/// Bytes kept at each end of a cut string (fewer when a character would be split).
pub const KEPT_BYTES: usize = 1024;

/// Items of an array (members of an object) an abridged row keeps: the rest are read through
/// and left out, so a row whose bulk is millions of short values (a listing of files in a tool's
/// metadata) still has a small abridged form.
pub const MAX_ITEMS: usize = 1000;

/// Largest abridged row, in bytes: a row that still has no small abridged form (deep nesting of
/// many containers) reads as not JSON, which every rule refuses.
pub const MAX_ABRIDGED_BYTES: usize = 4 * 1024 * 1024;

/// Name of the SQL function `session_prune_abridged(table, rowid)`: the abridged JSON of
/// `data` in that row of that table (`part`, `event`, `message` or `session_message`), or `''`
/// (not JSON) when the stored text is not JSON or has no small abridged form. Errors when the
/// table is another or the row does not exist.
pub const ABRIDGED: &str = "session_prune_abridged";

/// Name of the SQL function `session_prune_uncut_bytes(text)`: the bytes of `text` plus the
/// bytes its cut markers say were cut: the size of a V2 `content` entry (or a diff body) of an
/// abridged row as stored, to within escapes.
pub const UNCUT_BYTES: &str = "session_prune_uncut_bytes";

/// The tables whose `data` [`ABRIDGED`] reads: the OpenCode tables with a JSON `data` column.
const TABLES: [&str; 4] = ["part", "event", "message", "session_message"];

/// What stands where a string was cut: `…[N bytes cut K]…`, N in decimal, K this process's
/// [`cut_key`], so that text in a row that spells a marker is not taken for one.
const CUT_OPEN: &str = "\u{2026}[";
const CUT_MIDDLE: &str = " bytes cut ";
const CUT_CLOSE: &str = "]\u{2026}";

/// 16 random hex digits, drawn once per process.
fn cut_key() -> &'static str {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..16].to_string())
}

/// SQL for the `data` of row alias `alias` of `table`, bounded: the text itself within
/// [`ROW_BYTES`], the abridged JSON above. `table` must be the alias's table.
pub fn data(alias: &str, table: &str) -> String {
    let column = if alias.is_empty() {
        "data".to_string()
    } else {
        format!("{alias}.data")
    };
    let rowid = if alias.is_empty() {
        "rowid".to_string()
    } else {
        format!("{alias}.rowid")
    };
    format!(
        "(CASE WHEN octet_length({column}) <= {ROW_BYTES} THEN {column} \
              ELSE {ABRIDGED}('{table}', {rowid}) END)"
    )
}

/// SQL for the bytes of `value`, JSON text taken from the bounded `data` of row alias `alias`
/// (a V2 `content` entry, a quoted diff body): `octet_length` within the budget, [`UNCUT_BYTES`]
/// above.
pub fn uncut_bytes(alias: &str, value: &str) -> String {
    format!(
        "(CASE WHEN octet_length({alias}.data) <= {ROW_BYTES} THEN octet_length({value}) \
              ELSE {UNCUT_BYTES}({value}) END)"
    )
}

/// Bytes of a row read at a time by [`windows`].
const PIECE_BYTES: usize = 64 * 1024;

/// Reads `data` of row `rowid` of `table` through incremental blob I/O, [`PIECE_BYTES`] at a
/// time, and gives `f` each piece after the last `overlap` bytes of the piece before, and
/// whether it is the last: a search for a needle of at most `overlap + 1` bytes finds every
/// occurrence in some window (an occurrence inside an overlap is given twice), and one that
/// runs to the end of a window that is not the last is found whole in the next. At most
/// `PIECE_BYTES + overlap` bytes of the row are in memory at once.
///
/// Errors: SQLite's (no such row, a table without row numbers, a read that failed).
pub fn windows(
    conn: &Connection,
    table: &str,
    rowid: i64,
    overlap: usize,
    mut f: impl FnMut(&[u8], bool),
) -> rusqlite::Result<()> {
    let mut blob = conn.blob_open(MAIN_DB, table, "data", rowid, true)?;
    let total = blob.len();
    let mut done = 0usize;
    let mut window: Vec<u8> = Vec::with_capacity(PIECE_BYTES + overlap);
    let mut piece = vec![0u8; PIECE_BYTES];
    loop {
        let n = blob
            .read(&mut piece)
            .map_err(|e| rusqlite::Error::UserFunctionError(e.into()))?;
        if n == 0 {
            return Ok(());
        }
        let kept = window.len().min(overlap);
        window.drain(..window.len() - kept);
        window.extend_from_slice(&piece[..n]);
        done += n;
        f(&window, done >= total);
    }
}

/// Registers [`ABRIDGED`] and [`UNCUT_BYTES`] on `conn`.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    // Not deterministic: the same row reads differently once OpenCode rewrites it.
    let recent: Arc<Recent> = Arc::default();
    conn.create_scalar_function(ABRIDGED, 2, FunctionFlags::SQLITE_UTF8, move |ctx| {
        abridged_sql(ctx, &recent)
    })?;
    conn.create_scalar_function(
        UNCUT_BYTES,
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0).as_str() {
                Ok(text) => i64::try_from(text.len() + cut_bytes(text)).unwrap_or(i64::MAX),
                Err(_) => 0,
            })
        },
    )
}

/// The rows this connection abridged last, newest last, each under the key it was read at: a
/// listing reads `data` in several places of several statements, and a row is streamed once
/// while it stays the same.
type Recent = Mutex<Vec<(RowKey, Arc<str>)>>;

/// Rows [`Recent`] keeps.
const RECENT_ROWS: usize = 4;

/// A row as read: its table, row number and length, and the connection's `PRAGMA
/// data_version` (which changes when another connection commits) and `total_changes()` (which
/// changes with its own writes). The same key is the same bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct RowKey {
    table: &'static str,
    rowid: i64,
    len: u64,
    data_version: i64,
    own_changes: u64,
}

fn abridged_sql(ctx: &mut Context<'_>, recent: &Recent) -> rusqlite::Result<Arc<str>> {
    let table = ctx.get::<String>(0)?;
    let Some(table) = TABLES.into_iter().find(|t| *t == table) else {
        return Err(rusqlite::Error::UserFunctionError(
            format!("{ABRIDGED}: no JSON data column in table {table:?}").into(),
        ));
    };
    let rowid = ctx.get::<i64>(1)?;
    // SAFETY: SQLite calls this function on the thread that steps the statement, with the
    // connection that prepared it; the reference is used for the reads below and dropped before
    // the function returns, so no other reference to the connection is used meanwhile.
    let conn = unsafe { ctx.get_connection()? };
    let blob = conn.blob_open(MAIN_DB, table, "data", rowid, true)?;
    let key = RowKey {
        table,
        rowid,
        len: blob.len() as u64,
        data_version: conn.query_row("PRAGMA data_version", [], |row| row.get(0))?,
        own_changes: conn.total_changes(),
    };
    let mut recent = recent
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, text)) = recent.iter().find(|(seen, _)| *seen == key) {
        return Ok(text.clone());
    }
    let mut source = BlobReader { blob, failed: None };
    let abridged = abridge(&mut source);
    let text: Arc<str> = match (abridged, source.failed) {
        (_, Some(e)) => {
            return Err(rusqlite::Error::UserFunctionError(
                format!("{ABRIDGED}: reading row {rowid} of {table}: {e}").into(),
            ))
        }
        (Some(text), None) => text.into(),
        (None, None) => "".into(),
    };
    if recent.len() == RECENT_ROWS {
        recent.remove(0);
    }
    recent.push((key, text.clone()));
    Ok(text)
}

/// Reads a blob from its start, keeping the first error SQLite gave: a JSON reader reports
/// a failure of its source as its own, and a row that cannot be read is not a row that is not
/// JSON.
struct BlobReader<'conn> {
    blob: Blob<'conn>,
    failed: Option<io::Error>,
}

impl Read for BlobReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.blob.read(buf).inspect_err(|e| {
            if self.failed.is_none() {
                self.failed = Some(io::Error::new(e.kind(), e.to_string()));
            }
        })
    }
}

/// Reads JSON text with every escaped UTF-16 surrogate (`\uD800` to `\uDFFF`) read as
/// `\uFFFD`: JavaScript's `JSON.stringify` escapes a lone surrogate (a string cut inside an
/// emoji, say), which SQLite takes as JSON and the streaming reader would not. The escape keeps
/// its length, so every size stays the same.
struct Surrogates<R> {
    inner: R,
    /// Read from `inner`, not yet given out: `[..ready]` is checked, the rest waits for the
    /// bytes after it.
    held: Vec<u8>,
    ready: usize,
    /// The checked bytes end inside an escape (after an unescaped backslash).
    escaped: bool,
    eof: bool,
}

impl<R: Read> Surrogates<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            held: Vec::new(),
            ready: 0,
            escaped: false,
            eof: false,
        }
    }

    /// Checks the held bytes up to where an escape could still be incomplete.
    fn check(&mut self) {
        // `\uXXXX` is six bytes: a `u` is rewritten once its four digits are here.
        let safe = if self.eof {
            self.held.len()
        } else {
            self.held.len().saturating_sub(5)
        };
        let mut i = self.ready;
        while i < safe {
            if self.escaped {
                self.escaped = false;
                if self.held[i] == b'u' && i + 4 < self.held.len() {
                    let digits = &self.held[i + 1..i + 5];
                    let surrogate = matches!(digits[0], b'd' | b'D')
                        && matches!(digits[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
                        && digits[2..].iter().all(u8::is_ascii_hexdigit);
                    if surrogate {
                        self.held[i + 1..i + 5].copy_from_slice(b"FFFD");
                    }
                }
            } else if self.held[i] == b'\\' {
                self.escaped = true;
            }
            i += 1;
        }
        self.ready = safe.max(self.ready);
    }
}

impl<R: Read> Read for Surrogates<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.ready == 0 && !(self.eof && self.held.is_empty()) {
            let mut piece = [0u8; 8192];
            let n = self.inner.read(&mut piece)?;
            self.eof = n == 0;
            self.held.extend_from_slice(&piece[..n]);
            self.check();
        }
        let n = out.len().min(self.ready);
        out[..n].copy_from_slice(&self.held[..n]);
        self.held.drain(..n);
        self.ready -= n;
        Ok(n)
    }
}

/// The value is not JSON, has no small abridged form, or its source failed (which the caller
/// tells apart).
#[derive(Debug)]
struct NotJson;

impl From<struson::reader::ReaderError> for NotJson {
    fn from(_: struson::reader::ReaderError) -> Self {
        NotJson
    }
}

/// Whether a container is an object (members) or an array (items).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Object,
    Array,
}

/// The abridged JSON of the one JSON value `source` holds (see the module's first lines).
/// `None` when it is not one JSON value, has no small abridged form, or `source` failed.
fn abridge(source: impl Read) -> Option<String> {
    abridge_value(source).ok()
}

fn abridge_value(source: impl Read) -> Result<String, NotJson> {
    let settings = ReaderSettings {
        // SQLite's own limit (JSON_MAX_DEPTH): what json_valid takes, this takes.
        max_nesting_depth: Some(1000),
        restrict_number_values: false,
        ..ReaderSettings::default()
    };
    let source = Surrogates::new(io::BufReader::with_capacity(PIECE_BYTES, source));
    let mut reader = JsonStreamReader::new_custom(source, settings);
    let mut out = Bounded(Vec::new());
    let mut writer = JsonStreamWriter::new(&mut out);
    // Each open container with the items (members) of it taken so far.
    let mut open: Vec<(Open, usize)> = Vec::new();
    loop {
        if let Some((container, taken)) = open.last_mut() {
            let container = *container;
            if reader.has_next()? && *taken == MAX_ITEMS {
                // The rest is read through (checked, not kept).
                while reader.has_next()? {
                    if container == Open::Object {
                        reader.skip_name()?;
                    }
                    reader.skip_value()?;
                }
            }
            if !reader.has_next()? {
                match container {
                    Open::Object => {
                        reader.end_object()?;
                        writer.end_object().map_err(write_error)?;
                    }
                    Open::Array => {
                        reader.end_array()?;
                        writer.end_array().map_err(write_error)?;
                    }
                }
                open.pop();
                if open.is_empty() {
                    break;
                }
                continue;
            }
            *taken += 1;
            if container == Open::Object {
                writer.name(reader.next_name()?).map_err(write_error)?;
            }
        }
        match reader.peek()? {
            ValueType::Object => {
                reader.begin_object()?;
                writer.begin_object().map_err(write_error)?;
                open.push((Open::Object, 0));
                continue;
            }
            ValueType::Array => {
                reader.begin_array()?;
                writer.begin_array().map_err(write_error)?;
                open.push((Open::Array, 0));
                continue;
            }
            ValueType::String => {
                let text = cut_string(reader.next_string_reader()?)?;
                writer.string_value(&text).map_err(write_error)?;
            }
            ValueType::Number => {
                writer
                    .number_value_from_string(reader.next_number_as_str()?)
                    .map_err(|_| NotJson)?;
            }
            ValueType::Boolean => writer
                .bool_value(reader.next_bool()?)
                .map_err(write_error)?,
            ValueType::Null => {
                reader.next_null()?;
                writer.null_value().map_err(write_error)?;
            }
        }
        if open.is_empty() {
            break;
        }
    }
    reader.consume_trailing_whitespace()?;
    writer.finish_document().map_err(write_error)?;
    String::from_utf8(out.0).map_err(|_| NotJson)
}

/// A writer's error: only [`Bounded`] refusing more bytes, so the row has no small form.
fn write_error(_: io::Error) -> NotJson {
    NotJson
}

/// A buffer that refuses to grow past [`MAX_ABRIDGED_BYTES`].
struct Bounded(Vec<u8>);

impl io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0.len() + buf.len() > MAX_ABRIDGED_BYTES {
            return Err(io::Error::other("abridged row over its bound"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A string value read to its end: whole when at most [`LONG_STRING_BYTES`], else its first
/// and last [`KEPT_BYTES`] around the cut marker.
fn cut_string(mut value: impl Read) -> Result<String, NotJson> {
    let mut head = Vec::with_capacity(LONG_STRING_BYTES + 1);
    (&mut value)
        .take(LONG_STRING_BYTES as u64 + 1)
        .read_to_end(&mut head)
        .map_err(string_error)?;
    if head.len() <= LONG_STRING_BYTES {
        return String::from_utf8(head).map_err(|_| NotJson);
    }
    // The last KEPT_BYTES seen, refilled from each chunk read after the head.
    let mut tail: Vec<u8> = head[head.len() - KEPT_BYTES..].to_vec();
    let mut escaped = escaped_len(&head);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = value.read(&mut chunk).map_err(string_error)?;
        if n == 0 {
            break;
        }
        escaped += escaped_len(&chunk[..n]);
        if n >= KEPT_BYTES {
            tail.clear();
            tail.extend_from_slice(&chunk[n - KEPT_BYTES..n]);
        } else {
            tail.drain(..n);
            tail.extend_from_slice(&chunk[..n]);
        }
    }
    head.truncate(KEPT_BYTES);
    let head = utf8_prefix(&head);
    let tail = utf8_suffix(&tail);
    let cut = escaped - escaped_len(head.as_bytes()) - escaped_len(tail.as_bytes());
    let key = cut_key();
    Ok(format!(
        "{head}{CUT_OPEN}{cut}{CUT_MIDDLE}{key}{CUT_CLOSE}{tail}"
    ))
}

/// Bytes of `text` (UTF-8 of a string's content) as `JSON.stringify` writes them, which is how
/// OpenCode stores them: a quote, a backslash and `\b\f\n\r\t` take two, the other control
/// characters six (`\u0000`), every other byte one.
fn escaped_len(text: &[u8]) -> usize {
    text.iter()
        .map(|&b| match b {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// A string reader's error: bad text (escapes, UTF-8), or a failed source the caller sees.
fn string_error(_: io::Error) -> NotJson {
    NotJson
}

/// The longest prefix of `bytes` (valid UTF-8 cut anywhere) that is whole characters.
fn utf8_prefix(bytes: &[u8]) -> &str {
    match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// The longest suffix of `bytes` (valid UTF-8 cut anywhere) that is whole characters.
fn utf8_suffix(bytes: &[u8]) -> &str {
    let start = bytes
        .iter()
        .position(|b| b & 0b1100_0000 != 0b1000_0000)
        .unwrap_or(bytes.len());
    std::str::from_utf8(&bytes[start..]).unwrap_or_default()
}

/// The bytes the cut markers of this process in `text` say were cut.
fn cut_bytes(text: &str) -> usize {
    let close = format!("{CUT_MIDDLE}{}{CUT_CLOSE}", cut_key());
    let mut sum = 0usize;
    let mut rest = text;
    while let Some(at) = rest.find(CUT_OPEN) {
        rest = &rest[at + CUT_OPEN.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if rest[digits..].starts_with(&close) {
            sum = sum.saturating_add(rest[..digits].parse::<usize>().unwrap_or(0));
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abridged(text: &str) -> Option<String> {
        abridge(text.as_bytes())
    }

    fn marker(cut: usize) -> String {
        format!("{CUT_OPEN}{cut}{CUT_MIDDLE}{}{CUT_CLOSE}", cut_key())
    }

    #[test]
    fn cut_bytes_are_counted_as_opencode_escapes_them_and_a_spelled_marker_counts_none() {
        // Stored as 10,000 bytes: `a\"b` 2,500 times, a quote escaped in each.
        let stored = "a\\\"b".repeat(2500);
        let text = abridged(&format!("\"{stored}\"")).unwrap();
        let content = "a\"b".repeat(2500);
        assert_eq!(escaped_len(content.as_bytes()), stored.len());
        let kept = escaped_len(&content.as_bytes()[..KEPT_BYTES])
            + escaped_len(&content.as_bytes()[content.len() - KEPT_BYTES..]);
        assert_eq!(cut_bytes(&text), stored.len() - kept);
        let spelled = format!("{CUT_OPEN}999{CUT_MIDDLE}0123456789abcdef{CUT_CLOSE}");
        assert_eq!(cut_bytes(&spelled), 0);
    }

    #[test]
    fn a_lone_surrogate_escape_is_json_as_sqlite_takes_it() {
        let long = format!("\"{}\\ud83d end\"", "x".repeat(10_000));
        let text = abridged(&format!("{{\"type\":\"tool\",\"output\":{long}}}")).unwrap();
        assert!(text.starts_with("{\"type\":\"tool\""), "{text}");
        assert!(text.ends_with("\u{fffd} end\"}"), "{text}");
        // An escaped backslash before `ud83d` is text, not an escape.
        assert_eq!(abridged(r#""\\ud83d""#).as_deref(), Some(r#""\\ud83d""#));
    }

    #[test]
    fn short_values_read_as_stored_minified() {
        assert_eq!(
            abridged(r#" {"type": "tool", "n": [1, 2.5e3, true, null], "s": "a\"é"} "#).as_deref(),
            Some(r#"{"type":"tool","n":[1,2.5e3,true,null],"s":"a\"é"}"#)
        );
        assert_eq!(abridged("12").as_deref(), Some("12"));
    }

    #[test]
    fn a_long_string_keeps_both_ends_and_says_what_was_cut() {
        let long = format!(
            "{}{}{}",
            "a".repeat(2000),
            "b".repeat(100_000),
            "c".repeat(2000)
        );
        let json =
            format!(r#"{{"type":"tool","state":{{"output":"{long}","status":"completed"}}}}"#);
        let text = abridged(&json).unwrap();
        let expected = format!(
            "{{\"type\":\"tool\",\"state\":{{\"output\":\"{}{}{}\",\"status\":\"completed\"}}}}",
            "a".repeat(KEPT_BYTES),
            marker(long.len() - 2 * KEPT_BYTES),
            "c".repeat(KEPT_BYTES)
        );
        assert_eq!(text, expected);
        assert_eq!(cut_bytes(&text), long.len() - 2 * KEPT_BYTES);
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        // 3-byte characters: 1024 is not a multiple of 3.
        let long = "✓".repeat(3000);
        let text = abridged(&format!("\"{long}\"")).unwrap();
        let kept = 1023 / 3 * 3;
        let expected = format!(
            "\"{}{}{}\"",
            "✓".repeat(kept / 3),
            marker(long.len() - 2 * kept),
            "✓".repeat(kept / 3)
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn text_that_is_not_one_json_value_has_no_abridged_form() {
        for bad in [
            "",
            "{",
            "{\"a\":1} x",
            "[1,]",
            "\"\u{1}\"",
            "{\"a\" 1}",
            "nul",
        ] {
            assert_eq!(abridge(bad.as_bytes()), None, "{bad:?}");
        }
        let broken_in_a_long_string = format!("\"{}\\q\"", "a".repeat(10_000));
        assert_eq!(abridge(broken_in_a_long_string.as_bytes()), None);
    }

    #[test]
    fn a_container_keeps_its_first_items_and_is_still_checked_to_its_end() {
        let many = format!(
            "{{\"type\":\"tool\",\"files\":[{}\"x\"]}}",
            "\"x\",".repeat(2_000_000)
        );
        let expected = format!(
            "{{\"type\":\"tool\",\"files\":[{}]}}",
            vec!["\"x\""; MAX_ITEMS].join(",")
        );
        assert_eq!(abridge(many.as_bytes()), Some(expected));
        let members: String = (0..MAX_ITEMS + 5)
            .map(|i| format!("\"k{i}\":{i},"))
            .collect();
        let text = abridge(format!("{{{members}\"last\":0}}").as_bytes()).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value.as_object().unwrap().len(), MAX_ITEMS);
        let broken_late = format!("[{}\"x\",]", "\"x\",".repeat(5000));
        assert_eq!(abridge(broken_late.as_bytes()), None);
    }

    #[test]
    fn the_sql_function_reads_a_row_over_the_budget_in_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("t.db")).unwrap();
        register(&conn).unwrap();
        conn.execute_batch("CREATE TABLE part (id TEXT PRIMARY KEY, data TEXT NOT NULL)")
            .unwrap();
        let output = "x".repeat(ROW_BYTES + 10);
        let row =
            format!(r#"{{"type":"tool","state":{{"status":"completed","output":"{output}"}}}}"#);
        conn.execute(
            "INSERT INTO part VALUES ('p1', ?1), ('p2', 'not json')",
            [&row],
        )
        .unwrap();
        let bounded = data("p", "part");
        let (kind, valid_bad, len): (String, i64, i64) = conn
            .query_row(
                &format!(
                    "SELECT json_extract({bounded}, '$.type'),
                        (SELECT json_valid({}) FROM part WHERE id = 'p2'),
                        octet_length(p.data)
                     FROM part p WHERE id = 'p1'",
                    data("", "part")
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((kind.as_str(), valid_bad), ("tool", 0));
        assert_eq!(len as usize, row.len());
        let text: String = conn
            .query_row(
                &format!("SELECT {ABRIDGED}('part', rowid) FROM part WHERE id = 'p1'"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(cut_bytes(&text), output.len() - 2 * KEPT_BYTES);
        let err = conn
            .query_row(&format!("SELECT {ABRIDGED}('session', 1)"), [], |r| {
                r.get::<_, String>(0)
            })
            .unwrap_err();
        assert!(err.to_string().contains("no JSON data column"), "{err}");
        // The same row rewritten to the same length reads anew.
        conn.execute(
            "UPDATE part SET data = replace(data, '\"tool\"', '\"tooL\"') WHERE id = 'p1'",
            [],
        )
        .unwrap();
        let kind: String = conn
            .query_row(
                &format!("SELECT json_extract({bounded}, '$.type') FROM part p WHERE id = 'p1'"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kind, "tooL");
        // A statement that deletes the row it reads: the read ends before the row goes.
        let deleted = conn
            .execute(
                &format!(
                    "DELETE FROM part WHERE CASE WHEN json_valid({d}) \
                       THEN json_extract({d}, '$.state.status') = 'completed' END",
                    d = data("", "part")
                ),
                [],
            )
            .unwrap();
        assert_eq!(deleted, 1);
    }
}
