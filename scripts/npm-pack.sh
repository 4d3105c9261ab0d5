#!/usr/bin/env bash
# Packs the npm packages of session-prune into OUTDIR (docs/npm.md):
#   session-prune-VERSION.tgz                 the launcher `session-prune` (bin), which runs the
#                                             binary of the platform package npm installed
#   session-prune-linux-x64-gnu-VERSION.tgz   that binary for Linux x86-64 with glibc
# Only linux-x64-gnu is built here; the launcher names every platform of
# npm/session-prune/platforms.json as an exact-version optional dependency.
#
# usage: scripts/npm-pack.sh OUTDIR [--binary PATH]
#   --binary PATH   pack this build of session-prune instead of `cargo build --release --locked`
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { echo "usage: scripts/npm-pack.sh OUTDIR [--binary PATH]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1
shift
binary=
while [ $# -gt 0 ]; do
  case $1 in
    --binary) [ $# -ge 2 ] || usage; binary=$2; shift 2 ;;
    *) usage ;;
  esac
done
if [ -n "$binary" ] && [ ! -x "$binary" ]; then
  echo "npm-pack: $binary is not an executable" >&2
  exit 2
fi
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  echo "npm-pack: only the linux-x64-gnu package is built, on Linux x86-64" >&2
  exit 2
fi
command -v npm >/dev/null || { echo "npm-pack: npm is needed (Node.js 18 or later)" >&2; exit 2; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
[ -n "$version" ] || { echo "npm-pack: no version in $root/Cargo.toml" >&2; exit 1; }
if [ -z "$binary" ]; then
  cargo build --release --locked --manifest-path "$root/Cargo.toml"
  binary=$root/target/release/session-prune
fi
[ -x "$binary" ] || { echo "npm-pack: $binary is not an executable" >&2; exit 2; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)

platform=$stage/platform
mkdir -p "$platform/bin"
cp "$binary" "$platform/bin/session-prune"
chmod 755 "$platform/bin/session-prune"
node "$root/npm/manifests.js" platform linux-x64-gnu "$version" > "$platform/package.json"

launcher=$stage/launcher
mkdir -p "$launcher"
cp -R "$root/npm/session-prune/." "$launcher/"
chmod 755 "$launcher/bin/session-prune.js"
cp "$root/README.md" "$launcher/README.md"
node "$root/npm/manifests.js" main "$version" > "$launcher/package.json"

for package in "$platform" "$launcher"; do
  (cd "$package" && npm pack --silent --pack-destination "$out" >/dev/null)
done
ls "$out"/session-prune-"$version".tgz "$out"/session-prune-linux-x64-gnu-"$version".tgz
