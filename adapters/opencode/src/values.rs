//! Reading SQLite values leniently: a damaged row (an id stored as a number, bytes that are
//! not UTF-8) still lists and compares, and never matches what it is not.

/// A column as text, whatever it holds (a damaged id still lists, with `\u{FFFD}` for bytes
/// that are not UTF-8).
pub(crate) fn lenient_text(value: rusqlite::types::ValueRef<'_>) -> String {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            String::from_utf8_lossy(bytes).into_owned()
        }
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(x) => x.to_string(),
        ValueRef::Null => String::new(),
    }
}
