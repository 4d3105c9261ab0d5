//! Naming many snapshots at once, for the compaction's survey: what each snapshot's `data`
//! names, read by [`super::snapshot::named`] on two threads where the snapshots are large
//! enough to be worth a second one (the survey reads and parses every snapshot of a session,
//! the largest share of a clean of coding work), and asked of SQLite, in order, where that
//! reading is not sure to answer as SQLite would (`super::compact::named_by_sqlite`). The
//! answers are the ones [`super::compact::named`] gives one snapshot at a time.

use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

use super::compact::{self, SnapshotKind};
use super::snapshot::{self, Named};

/// Bytes of snapshot data a survey reads before it names them: 4 MiB, so that its memory stays
/// bounded whatever the session's size (a snapshot is at most the row budget).
pub(crate) const CHUNK_BYTES: usize = 4 << 20;

/// Bytes a row read for naming counts for beside its data (its id, seq and length): so that a
/// chunk of rows without data (a damaged session's NULLs) is bounded too.
pub(crate) const ROW_BYTES: usize = 64;

/// Bytes of data below which a chunk is named on the calling thread alone: 256 KiB, which takes
/// a few hundred µs to parse, against tens of µs to start a thread.
const TWO_THREADS_FROM: usize = 256 << 10;

/// A snapshot's `data` as read, owned: text as its bytes (which need not be UTF-8), any other
/// value as SQLite gave it.
#[derive(Debug, Clone)]
pub(crate) enum Data {
    Text(Vec<u8>),
    Other(Value),
}

impl Data {
    /// The data of `value`.
    pub(crate) fn of(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Text(bytes) => Self::Text(bytes.to_vec()),
            ValueRef::Null => Self::Other(Value::Null),
            ValueRef::Integer(n) => Self::Other(Value::Integer(n)),
            ValueRef::Real(r) => Self::Other(Value::Real(r)),
            ValueRef::Blob(bytes) => Self::Other(Value::Blob(bytes.to_vec())),
        }
    }

    /// The data as a value to read or bind.
    fn value(&self) -> ValueRef<'_> {
        match self {
            Self::Text(bytes) => ValueRef::Text(bytes),
            Self::Other(value) => ValueRef::from(value),
        }
    }

    /// Bytes it holds (text and blobs; 0 for the rest).
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Text(bytes) | Self::Other(Value::Blob(bytes)) => bytes.len(),
            Self::Other(_) => 0,
        }
    }
}

/// What each of `snapshots` (its kind and data) names, in their order.
///
/// Errors: SQLite's, of the snapshots it asks.
pub(crate) fn name_all(
    conn: &Connection,
    snapshots: &[(SnapshotKind, Data)],
) -> rusqlite::Result<Vec<Named>> {
    let quick = read_quickly(snapshots);
    snapshots
        .iter()
        .zip(quick)
        .map(|((kind, data), named)| match named {
            Some(named) => Ok(named),
            None => compact::named_by_sqlite(conn, *kind, data.value()),
        })
        .collect()
}

/// [`snapshot::named`] of each of `snapshots`, on two threads when they hold at least
/// [`TWO_THREADS_FROM`] bytes: the second takes the later half of the bytes. Where no second
/// thread can be started, or it failed, this thread reads its half too.
fn read_quickly(snapshots: &[(SnapshotKind, Data)]) -> Vec<Option<Named>> {
    let bytes: usize = snapshots.iter().map(|(_, data)| data.len()).sum();
    if bytes < TWO_THREADS_FROM || snapshots.len() < 2 {
        return read_here(snapshots);
    }
    let mut before = 0;
    let half = snapshots
        .iter()
        .position(|(_, data)| {
            before += data.len();
            before >= bytes / 2
        })
        .map_or(snapshots.len() / 2, |at| at + 1)
        .clamp(1, snapshots.len() - 1);
    let (first, second) = snapshots.split_at(half);
    std::thread::scope(|scope| {
        let other = std::thread::Builder::new()
            .name("snapshot-naming".into())
            .spawn_scoped(scope, || read_here(second));
        let mut named = read_here(first);
        let rest = match other {
            Ok(other) => other.join().unwrap_or_else(|_| read_here(second)),
            Err(_) => read_here(second),
        };
        named.extend(rest);
        named
    })
}

/// [`snapshot::named`] of each of `snapshots`, on this thread.
fn read_here(snapshots: &[(SnapshotKind, Data)]) -> Vec<Option<Named>> {
    snapshots
        .iter()
        .map(|(kind, data)| snapshot::named(data.value(), *kind == SnapshotKind::Part))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(id: &str, filler: usize) -> (SnapshotKind, Data) {
        let data = format!(
            "{{\"part\":{{\"id\":\"{id}\",\"messageID\":\"msg_{id}\",\"output\":\"{}\"}}}}",
            "line\\n".repeat(filler)
        );
        (SnapshotKind::Part, Data::Text(data.into_bytes()))
    }

    /// Many large snapshots, named on two threads, come back in their order with the names
    /// each names alone; those the quick reading leaves (not JSON to it, a blob) are SQLite's.
    #[test]
    fn snapshots_named_together_are_named_as_each_alone() {
        let conn = Connection::open_in_memory().expect("memory database");
        let mut snapshots: Vec<(SnapshotKind, Data)> =
            (0..40).map(|n| part(&format!("p{n}"), 2_000)).collect();
        snapshots.insert(
            7,
            (SnapshotKind::Part, Data::Text(b"{part:{id:'j'}}".to_vec())),
        );
        snapshots.insert(
            30,
            (
                SnapshotKind::Part,
                Data::Other(Value::Blob(br#"{"part":{"id":"b"}}"#.to_vec())),
            ),
        );
        snapshots.push((SnapshotKind::Part, Data::Other(Value::Null)));
        let bytes: usize = snapshots.iter().map(|(_, data)| data.len()).sum();
        assert!(
            bytes >= TWO_THREADS_FROM,
            "{bytes} bytes name on one thread"
        );
        let together = name_all(&conn, &snapshots).expect("named");
        let alone: Vec<Named> = snapshots
            .iter()
            .map(|(kind, data)| compact::named(&conn, *kind, data.value()).expect("named"))
            .collect();
        assert_eq!(together, alone);
        assert_eq!(together[0].entity.as_deref(), Some("p0"));
        assert_eq!(together[0].message.as_deref(), Some("msg_p0"));
        assert_eq!(together[40].entity.as_deref(), Some("p38"));
        assert_eq!(together.len(), 43);
    }

    /// A few small snapshots are named on this thread, in order.
    #[test]
    fn a_few_small_snapshots_are_named_in_order() {
        let conn = Connection::open_in_memory().expect("memory database");
        let snapshots = vec![part("a", 1), part("b", 1)];
        let named = name_all(&conn, &snapshots).expect("named");
        let entities: Vec<Option<&str>> = named.iter().map(|n| n.entity.as_deref()).collect();
        assert_eq!(entities, [Some("a"), Some("b")]);
    }
}
