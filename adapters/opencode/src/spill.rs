//! Spill files: tool output OpenCode wrote to `<data>/tool-output/tool_*` because it was too
//! long for the part, and that the part points at (V1 `state.metadata.outputPath`, V2
//! `state.outputPaths`). The data folder is the database's folder.
//!
//! A file is removed only when asked, only from that folder, only under its own `tool_` name,
//! and only when no remaining `part` or `session_message` row names it (a fork copies parts
//! with the paths they point at).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::row_budget;
use super::schema::Schema;

/// The folder OpenCode spills tool output to, beside the database.
pub fn folder(database: &Path) -> PathBuf {
    database
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("tool-output")
}

/// The spill file name a stored path ends in (`tool_...`), if it is one.
pub fn file_name(stored_path: &str) -> Option<&str> {
    let name = stored_path.rsplit(['/', '\\']).next()?;
    let plain = name.starts_with("tool_")
        && name.len() > "tool_".len()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    plain.then_some(name)
}

/// Every spill file in the folder: `(name, bytes)`, by name.
pub fn list(folder: &Path) -> std::io::Result<Vec<(String, u64)>> {
    let mut files = Vec::new();
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata()?;
        if meta.is_file() && file_name(&name) == Some(name.as_str()) {
            files.push((name, meta.len()));
        }
    }
    files.sort();
    Ok(files)
}

/// The spill file names any `part` or `session_message` row still names.
///
/// Errors: SQLite's.
pub fn referenced(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    Ok(reference_counts(conn)?.into_keys().collect())
}

/// How many `part` and `session_message` rows name each spill file (a row counts once).
///
/// Errors: SQLite's.
pub fn reference_counts(conn: &Connection) -> rusqlite::Result<HashMap<String, u64>> {
    let schema = Schema::read(conn)?;
    let mut counts = HashMap::new();
    for table in ["part", "session_message"] {
        if !schema.has(table) {
            continue;
        }
        let mut stmt = conn.prepare(&naming_rows_sql(table, ""))?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            for name in names_in(conn, table, row, 0)? {
                *counts.entry(name).or_insert(0) += 1;
            }
        }
    }
    Ok(counts)
}

/// The rows of `part` and `session_message` (id, session) whose tool output names a spill file
/// `folder` does not hold, with that file's name; only of sessions `admits` takes; sorted by
/// session, row id and file. Nothing when `folder` is not a folder that can be listed (a
/// database copied without its spill files names none of them as missing).
///
/// Errors: SQLite's.
pub fn missing(
    conn: &Connection,
    folder: &Path,
    admits: &dyn Fn(&str) -> bool,
) -> rusqlite::Result<Vec<(String, String, String)>> {
    let present: HashSet<String> = match list(folder) {
        Ok(files) if folder.is_dir() => files.into_iter().map(|(name, _)| name).collect(),
        _ => return Ok(Vec::new()),
    };
    let schema = Schema::read(conn)?;
    let mut found = Vec::new();
    for table in ["part", "session_message"] {
        if !schema.has(table) {
            continue;
        }
        let sql = naming_rows_sql(table, "CAST(id AS TEXT), CAST(session_id AS TEXT), ");
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let session: String = row.get::<_, Option<String>>(1)?.unwrap_or_default();
            if !admits(&session) {
                continue;
            }
            let id: String = row.get::<_, Option<String>>(0)?.unwrap_or_default();
            for name in names_in(conn, table, row, 2)? {
                if !present.contains(&name) {
                    found.push((id.clone(), session.clone(), name));
                }
            }
        }
    }
    found.sort_by(|a, b| (&a.1, &a.0, &a.2).cmp(&(&b.1, &b.0, &b.2)));
    Ok(found)
}

/// What [`remove_unreferenced`] would remove after prunes whose parts name `pruned` (stored
/// paths, once per part): the spill files of `folder` that no row names, or that only those
/// parts name. Returns `(files, bytes)`; removes nothing.
///
/// Errors: the folder's I/O errors, and SQLite's as [`std::io::Error::other`].
pub fn would_remove(
    conn: &Connection,
    folder: &Path,
    pruned: &[String],
) -> std::io::Result<(u64, u64)> {
    let counts = reference_counts(conn).map_err(std::io::Error::other)?;
    let mut going: HashMap<&str, u64> = HashMap::new();
    for path in pruned {
        if let Some(name) = file_name(path) {
            *going.entry(name).or_insert(0) += 1;
        }
    }
    let mut removed = (0, 0);
    for (name, bytes) in list(folder)? {
        let named = counts.get(&name).copied().unwrap_or(0);
        if named <= going.get(name.as_str()).copied().unwrap_or(0) {
            removed.0 += 1;
            removed.1 += bytes;
        }
    }
    Ok(removed)
}

/// The rows of `table` that may name a spill file, selecting `columns` then (from column
/// `at`) the row's `data` within the row budget (else NULL), its row number and its size: a
/// row over the budget is searched in pieces by [`names_in`], never loaded.
fn naming_rows_sql(table: &str, columns: &str) -> String {
    let budget = row_budget::ROW_BYTES;
    format!(
        "SELECT {columns}CASE WHEN octet_length(data) <= {budget} THEN data END, rowid \
         FROM {table} \
         WHERE octet_length(data) > {budget} OR session_prune_contains(data, 'tool-output')"
    )
}

/// The spill file names `row` of [`naming_rows_sql`] names, its `data` at column `at`.
fn names_in(
    conn: &Connection,
    table: &str,
    row: &rusqlite::Row<'_>,
    at: usize,
) -> rusqlite::Result<HashSet<String>> {
    let mut names = HashSet::new();
    match row.get_ref(at)? {
        rusqlite::types::ValueRef::Text(bytes) | rusqlite::types::ValueRef::Blob(bytes) => {
            collect_names(&String::from_utf8_lossy(bytes), &mut names);
        }
        rusqlite::types::ValueRef::Null => {
            let rowid: i64 = row.get(at + 1)?;
            row_budget::windows(conn, table, rowid, NAMED_BYTES, |window, last| {
                let text = String::from_utf8_lossy(window);
                // A name cut by the window's end is found whole in the next window.
                let whole = if last {
                    text.len()
                } else {
                    text.len() - NAMED_BYTES.min(text.len())
                };
                collect_names_before(&text, whole, &mut names);
            })?;
        }
        _ => {}
    }
    Ok(names)
}

/// Longest `tool-output/tool_...` reference searched for across the pieces of a row over the
/// budget, in bytes (OpenCode's names are under 64).
const NAMED_BYTES: usize = 1024;

/// Adds every `tool-output/tool_...` name in `text` (JSON escapes `/` at most as `\/`).
fn collect_names(text: &str, names: &mut HashSet<String>) {
    collect_names_before(text, text.len(), names);
}

/// [`collect_names`] of the references that start before byte `end` of `text` (the rest of a
/// window of a row read in pieces is read again with the next piece).
fn collect_names_before(text: &str, end: usize, names: &mut HashSet<String>) {
    for (at, _) in text
        .match_indices("tool-output")
        .filter(|(at, _)| *at < end)
    {
        let rest = text[at + "tool-output".len()..].trim_start_matches(['/', '\\']);
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len());
        if let Some(name) = file_name(&rest[..end]) {
            names.insert(name.to_string());
        }
    }
}

/// Removes every spill file of `folder` that no row names: those of parts just pruned, and
/// any a killed run or an earlier clean without spill files left. Returns
/// `(files removed, bytes removed)`.
pub fn remove_unreferenced(conn: &Connection, folder: &Path) -> std::io::Result<(u64, u64)> {
    let referenced = referenced(conn).map_err(std::io::Error::other)?;
    let mut removed = (0, 0);
    for (name, _) in list(folder)? {
        if referenced.contains(&name) {
            continue;
        }
        let path = folder.join(name);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => {
                std::fs::remove_file(&path)?;
                removed.0 += 1;
                removed.1 += meta.len();
            }
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_in_stored_json_and_nothing_else_is_a_name() {
        let mut names = HashSet::new();
        collect_names(
            r#"{"outputPath":"/d/opencode/tool-output/tool_2266d3fe5001","x":"tool-output\/tool_b2"}"#,
            &mut names,
        );
        let mut found: Vec<_> = names.into_iter().collect();
        found.sort();
        assert_eq!(found, vec!["tool_2266d3fe5001", "tool_b2"]);
        assert_eq!(file_name("/a/tool-output/../../etc/passwd"), None);
        assert_eq!(file_name("/a/tool-output/tool_"), None);
        assert_eq!(file_name("C:\\d\\tool-output\\tool_x1"), Some("tool_x1"));
    }
}
