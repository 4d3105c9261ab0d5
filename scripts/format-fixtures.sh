#!/usr/bin/env bash
# format-fixtures.sh OUTDIR: write what this build stores beside a database (its prune journal and
# its prune archive) for tests/e2e/formats_of_an_earlier_build_are_read_back.rs to read back.
#
# It copies the OpenCode 1.18.34 fixture into OUTDIR, cleans two of its sessions with --archive
# (2 compactions and 11 message prunes: 13 receipts, 13 journaled events, 13 archive entries),
# then vacuums the copy (smaller to commit). Run it to add a folder for a new format version,
# e.g. `bash scripts/format-fixtures.sh tests/fixtures/formats-0.2.0`; never over a folder that
# is committed: those pin what earlier builds wrote.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: format-fixtures.sh OUTDIR" >&2
  exit 2
fi
WORKSPACE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$1
if [ -e "$OUT" ]; then
  echo "format-fixtures.sh: $OUT exists; pick a new folder (committed ones pin earlier builds)" >&2
  exit 2
fi
mkdir -p "$OUT"
cargo build --release --quiet --manifest-path "$WORKSPACE/Cargo.toml"
BIN=$WORKSPACE/target/release/session-prune
cp "$WORKSPACE/tests/fixtures/opencode-1.18.34/opencode.db" "$OUT/opencode.db"
"$BIN" --db "$OUT/opencode.db" --quiet-period 0 clean \
  ses_dd992af4dffe56B7kwrH3SftqX ses_dd9927d77ffeCzugJZ3vDGPMn9 \
  --keep-last-turns 2 --apply --archive
"$BIN" --db "$OUT/opencode.db" vacuum
rm -f "$OUT/opencode.db-wal" "$OUT/opencode.db-shm"
git -C "$WORKSPACE" rev-parse HEAD > "$OUT/BUILD"
