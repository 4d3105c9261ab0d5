//! What the storage under a database allows: whether its file or folder can be written here
//! (read-only media: a read-only mount, or a file or folder this user may not write), why not in
//! words, and when SQLite's `immutable` open is a safe way to read it (docs/read-only-media.md).

use std::path::Path;

/// Whether the database's file or folder cannot be written by this process, or sits on a
/// read-only mount: then a failure to open it for writing is that, whatever SQLite called it.
pub fn read_only_media(path: &Path) -> bool {
    let folder = folder_of(path);
    !writable(path) || !writable(folder)
}

/// Whether the database may be read with SQLite's `immutable=1` (no locks, no `-shm`, the
/// `-wal` ignored) after a read-only open failed. Only when nothing can change the file while
/// it is read and nothing committed lies outside it: its folder cannot be written (a read-only
/// mount or folder: no process can create the `-wal` or `-journal` file a write needs) and
/// there is no `-wal` file with content (a WAL's commits are invisible to an immutable read).
/// docs/read-only-media.md says why this is safe.
pub fn immutable_is_safe(path: &Path) -> bool {
    let folder = folder_of(path);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal_empty = match std::fs::metadata(&wal) {
        Ok(meta) => meta.len() == 0,
        Err(error) => error.kind() == std::io::ErrorKind::NotFound,
    };
    !writable(folder) && wal_empty && hot_journal(path).is_none()
}

/// The first bytes of a rollback journal that holds a transaction (SQLite's journal header
/// magic, `0xd9d505f920a163d7`): a journal that starts otherwise (absent, empty, zeroed) is
/// not hot.
const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];

/// The database's rollback journal (`<database>-journal`) when it holds a transaction a writer
/// left unfinished (killed mid-transaction in `journal_mode = DELETE`): SQLite rolls it back
/// at the next open that may write, and a read-only open cannot read the file until then.
pub fn hot_journal(path: &Path) -> Option<std::path::PathBuf> {
    use std::io::Read;
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    let journal = std::path::PathBuf::from(journal);
    let mut head = [0u8; 8];
    let read = std::fs::File::open(&journal).and_then(|mut file| file.read_exact(&mut head));
    (read.is_ok() && head == JOURNAL_MAGIC).then_some(journal)
}

/// `file:` URI of `path` with `immutable=1`: every byte outside `A-Z a-z 0-9 / . _ ~ -` is
/// percent-encoded, as SQLite's URI filenames require.
pub fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'/' | b'.' | b'_' | b'~' | b'-') {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Whether this process may write `path` (`access(2)` with `W_OK`, which also answers `EROFS`
/// for a read-only mount).
pub fn writable(path: &Path) -> bool {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}

/// Why the database cannot be written, in words: a read-only mount, a file or a folder this user
/// may not write.
pub fn read_only_cause(path: &Path) -> String {
    let folder = folder_of(path);
    let cause = match rustix::fs::access(path, rustix::fs::Access::WRITE_OK) {
        Err(rustix::io::Errno::ROFS) => "it is on a read-only mount".to_string(),
        Err(_) => "the file is not writable by this user".to_string(),
        Ok(()) => match rustix::fs::access(folder, rustix::fs::Access::WRITE_OK) {
            Err(rustix::io::Errno::ROFS) => "it is on a read-only mount".to_string(),
            Err(_) => format!(
                "its folder {} is not writable by this user (SQLite needs to create its -wal, -shm or -journal file there)",
                folder.display()
            ),
            Ok(()) => "SQLite opened it read-only".to_string(),
        },
    };
    cause
}

/// The folder a file sits in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}
