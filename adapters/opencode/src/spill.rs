//! Spill files: output OpenCode wrote to a file because it was too long for the row, and that
//! the row points at. OpenCode 1.x writes `<data>/tool-output/tool_*` (named by V1
//! `state.metadata.outputPath`, V2 `state.outputPaths`); OpenCode 2 writes every shell
//! command's whole output to `<data>/shell/<project>/sh_<id>.out` (named, when the output was
//! cut, by the `[... full output saved to PATH]` marker at its end; OpenCode 2 itself keeps only
//! the newest 25). The data folder is the database's folder.
//!
//! A file is removed only when asked, only from those folders, only under its own `tool_` or
//! `sh_*.out` name, and only when no remaining `part` or `session_message` row names it (a fork
//! copies parts with the paths they point at).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::row_budget;
use super::schema::Schema;

/// The data folder OpenCode keeps its spill folders in: the database's folder.
pub fn folder(database: &Path) -> PathBuf {
    database
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf()
}

/// OpenCode 1.x's spill folder in data folder `data`.
const TOOL_OUTPUT: &str = "tool-output";
/// OpenCode 2's spill folder in data folder `data` (one folder per project inside).
const SHELL: &str = "shell";

/// The spill file name a stored path ends in (`tool_...`, or OpenCode 2's `sh_....out`), if it
/// is one.
pub fn file_name(stored_path: &str) -> Option<&str> {
    let name = stored_path.rsplit(['/', '\\']).next()?;
    let plain = |stem: &str| {
        !stem.is_empty()
            && stem
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    let ours = match name
        .strip_prefix("sh_")
        .and_then(|rest| rest.strip_suffix(".out"))
    {
        Some(stem) => plain(stem),
        None => name.strip_prefix("tool_").is_some_and(plain),
    };
    ours.then_some(name)
}

/// One spill file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillFile {
    /// Its name (what rows name it by).
    pub name: String,
    /// Where it is.
    pub path: PathBuf,
    /// Its size, bytes.
    pub bytes: u64,
}

/// Every spill file of data folder `data`: `tool-output/tool_*` and `shell/<project>/sh_*.out`,
/// by name.
pub fn list(data: &Path) -> std::io::Result<Vec<SpillFile>> {
    let mut files = Vec::new();
    list_into(&data.join(TOOL_OUTPUT), &mut files)?;
    let projects = match std::fs::read_dir(data.join(SHELL)) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            files.sort_by(|a, b| a.name.cmp(&b.name));
            return Ok(files);
        }
        Err(error) => return Err(error),
    };
    for project in projects {
        let project = project?;
        if project.file_type()?.is_dir() {
            list_into(&project.path(), &mut files)?;
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// Adds the spill files directly in `folder` (none when it does not exist).
fn list_into(folder: &Path, files: &mut Vec<SpillFile>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata()?;
        if meta.is_file() && file_name(&name) == Some(name.as_str()) {
            files.push(SpillFile {
                path: entry.path(),
                name,
                bytes: meta.len(),
            });
        }
    }
    Ok(())
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

/// The rows of `part` and `session_message` (id, session) whose tool output names an OpenCode
/// 1.x spill file (`tool-output/tool_*`) data folder `data` does not hold, with that file's
/// name; only of sessions `admits` takes; sorted by session, row id and file. Nothing when the
/// `tool-output` folder is not one that can be listed (a database copied without its spill
/// files names none of them as missing). OpenCode 2's files are not looked for: it removes all
/// but the newest 25 itself.
///
/// Errors: SQLite's.
pub fn missing(
    conn: &Connection,
    data: &Path,
    admits: &dyn Fn(&str) -> bool,
) -> rusqlite::Result<Vec<(String, String, String)>> {
    let present: HashSet<String> = match list(data) {
        Ok(files) if data.join(TOOL_OUTPUT).is_dir() => {
            files.into_iter().map(|file| file.name).collect()
        }
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
                if name.starts_with("tool_") && !present.contains(&name) {
                    found.push((id.clone(), session.clone(), name));
                }
            }
        }
    }
    found.sort_by(|a, b| (&a.1, &a.0, &a.2).cmp(&(&b.1, &b.0, &b.2)));
    Ok(found)
}

/// What [`remove_unreferenced`] would remove after prunes whose parts name `pruned` (stored
/// paths, once per part): the spill files of data folder `data` that no row names, or that only
/// those parts name. Returns `(files, bytes)`; removes nothing.
///
/// Errors: the folders' I/O errors, and SQLite's as [`std::io::Error::other`].
pub fn would_remove(
    conn: &Connection,
    data: &Path,
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
    for file in list(data)? {
        let named = counts.get(&file.name).copied().unwrap_or(0);
        if named <= going.get(file.name.as_str()).copied().unwrap_or(0) {
            removed.0 += 1;
            removed.1 += file.bytes;
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
         WHERE octet_length(data) > {budget} OR session_prune_contains(data, 'tool-output') \
            OR session_prune_contains(data, '.out')"
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

/// Adds every `tool-output/tool_...` and `sh_....out` name in `text` (JSON escapes `/` at most
/// as `\/`).
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
    for (at, _) in text.match_indices("sh_").filter(|(at, _)| *at < end) {
        let rest = &text[at..];
        let stem_end = rest["sh_".len()..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map_or(rest.len(), |n| n + "sh_".len());
        if rest[stem_end..].starts_with(".out") {
            let name = &rest[..stem_end + ".out".len()];
            if file_name(name) == Some(name) {
                names.insert(name.to_string());
            }
        }
    }
}

/// Removes every spill file of data folder `data` that no row names: those of parts just
/// pruned, and any a killed run or an earlier clean without spill files left. Returns
/// `(files removed, bytes removed)`.
pub fn remove_unreferenced(conn: &Connection, data: &Path) -> std::io::Result<(u64, u64)> {
    let referenced = referenced(conn).map_err(std::io::Error::other)?;
    let mut removed = (0, 0);
    for file in list(data)? {
        if referenced.contains(&file.name) {
            continue;
        }
        let path = file.path;
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
        let mut names = HashSet::new();
        collect_names(
            r#"{"text":"...\n[showing lines 1-2 of 9; full output saved to /d/shell/ab12/sh_24e97e0e4001msXg.out]","shellID":"sh_24e97e0e4001msXg"}"#,
            &mut names,
        );
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            vec!["sh_24e97e0e4001msXg.out"]
        );
        assert_eq!(file_name("/d/shell/p/sh_.out"), None);
        assert_eq!(file_name("/d/shell/p/sh_x/../y.out"), None);
        assert_eq!(file_name("/a/tool-output/../../etc/passwd"), None);
        assert_eq!(file_name("/a/tool-output/tool_"), None);
        assert_eq!(file_name("C:\\d\\tool-output\\tool_x1"), Some("tool_x1"));
    }
}
