//! What an entry holds: the rows one prune removed, table by table, as SQLite values with their
//! exact bytes, and the entry hash (SHA-256 of the rows' encoding) a receipt records.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ArchiveError;

/// One SQLite value, exactly as stored: text keeps its bytes (SQLite does not check that text
/// is UTF-8), a real keeps its bits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SqlValue {
    /// `NULL`.
    Null,
    /// An integer.
    Integer(i64),
    /// A real, as the bits of its `f64`.
    Real(u64),
    /// Text, its bytes.
    Text(#[serde(with = "serde_bytes")] Vec<u8>),
    /// A blob.
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// The rows removed from one table, each with a value per column of `columns`, in the order
/// they are to be put back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRows {
    /// The table's name.
    pub table: String,
    /// Column names, in the order of each row's values.
    pub columns: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<SqlValue>>,
}

/// The rows one prune removed: every table it removed rows from (or rewrote a row of), in the
/// order the store chose.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchivedRows {
    /// The tables.
    pub tables: Vec<TableRows>,
}

impl ArchivedRows {
    /// The rows' encoding (postcard): what the entry hash covers and what is compressed.
    ///
    /// Errors: [`ArchiveError::Encode`].
    pub fn encode(&self) -> Result<Vec<u8>, ArchiveError> {
        postcard::to_allocvec(self).map_err(|e| ArchiveError::Encode(e.to_string()))
    }

    /// Reads rows back from [`ArchivedRows::encode`]'s bytes; `None` when they do not decode
    /// whole.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        match postcard::take_from_bytes::<Self>(bytes) {
            Ok((rows, [])) => Some(rows),
            _ => None,
        }
    }

    /// The number of rows, over all tables.
    pub fn row_count(&self) -> usize {
        self.tables.iter().map(|t| t.rows.len()).sum()
    }
}

/// The entry hash of encoded rows: their SHA-256.
pub fn content_hash(encoded: &[u8]) -> [u8; 32] {
    Sha256::digest(encoded).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_with_their_exact_bytes() {
        let rows = ArchivedRows {
            tables: vec![TableRows {
                table: "part".into(),
                columns: vec!["id".into(), "data".into(), "n".into(), "r".into()],
                rows: vec![vec![
                    SqlValue::Text(b"prt_1".to_vec()),
                    SqlValue::Text(vec![0xff, 0xfe, b'{']),
                    SqlValue::Null,
                    SqlValue::Real((-0.0f64).to_bits()),
                ]],
            }],
        };
        let encoded = rows.encode().unwrap();
        assert_eq!(ArchivedRows::decode(&encoded), Some(rows));
        let mut longer = encoded.clone();
        longer.push(0);
        assert_eq!(ArchivedRows::decode(&longer), None);
        assert_eq!(content_hash(&encoded), content_hash(&encoded.clone()));
    }
}
