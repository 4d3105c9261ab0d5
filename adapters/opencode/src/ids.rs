//! OpenCode ascending ids, as OpenCode mints them for the `event` rows a V1 prune appends.
//!
//! Source: OpenCode `id/id.ts` (docs/ARCHITECTURE.md, "OpenCode's ids and paths"), checked against
//! OpenCode 1.18.34's own
//! `message.part.removed.1` rows: `<prefix>_` + 12 lowercase hex digits of the low 48 bits of
//! `ms * 0x1000 + counter` (the counter restarts at 1 each millisecond) + 14 random base62
//! characters: 30 characters for `evt`.

use std::sync::Mutex;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Last millisecond and counter handed out in this process.
static LAST: Mutex<(i64, i64)> = Mutex::new((0, 0));

/// A new ascending id with `prefix` (e.g. `evt`) at `now_ms` (ms since the Unix epoch).
pub fn ascending(prefix: &str, now_ms: i64) -> String {
    let counter = {
        let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.0 == now_ms {
            last.1 += 1;
        } else {
            *last = (now_ms, 1);
        }
        last.1
    };
    let value = (now_ms.wrapping_mul(0x1000).wrapping_add(counter)) as u64 & 0xffff_ffff_ffff;
    let mut id = format!("{prefix}_{value:012x}");
    for byte in random_bytes(14) {
        id.push(char::from(BASE62[usize::from(byte) % BASE62.len()]));
    }
    id
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        out.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    }
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_opencode_shape_and_ascend_within_a_millisecond() {
        let a = ascending("evt", 1_795_941_099_745);
        let b = ascending("evt", 1_795_941_099_745);
        assert_eq!(a.len(), 30);
        assert!(a.starts_with("evt_2266e68e1"), "{a}");
        assert!(a[4..16] < b[4..16], "{a} {b}");
        assert!(a[16..].bytes().all(|c| c.is_ascii_alphanumeric()));
    }
}
