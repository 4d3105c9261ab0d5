#!/usr/bin/env bash
# install-opencode.sh [VERSION]: install an OpenCode binary under <workspace>/target/ and print the
# binary's path. OpenCode 1.x comes from npm opencode-linux-x64@VERSION (`--version` prints
# `1.18.34`); OpenCode 2 from @opencode/cli-linux-x64-baseline@VERSION (`--version` prints
# `opencode v2.1.2`).
#
# Without VERSION (or with the pinned 1.18.34): the pinned release into
# <workspace>/target/opencode-real/ (the interoperability test and CI use this). Any other VERSION
# goes into <workspace>/target/opencode-versions/VERSION/ (the fixture generator in
# scripts/opencode-fixtures/ uses this).
#
# Idempotent: when the binary is already there and reports the wanted version, nothing is
# downloaded (about 2 s: the version probe). npm is needed only for the first install.
# The version probe runs with its own throwaway HOME and XDG dirs, so it writes nothing into
# the caller's home. Exits non-zero when npm is missing or the binary does not report the version.
set -euo pipefail

PINNED=1.18.34
WORKSPACE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ $# -gt 1 ]; then
  echo "usage: install-opencode.sh [VERSION]" >&2
  exit 2
fi
VERSION=${1:-$PINNED}
if ! [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "install-opencode.sh: '$VERSION' is not a release version (X.Y.Z)" >&2
  exit 2
fi
if [[ "$VERSION" =~ ^1\. ]]; then
  PACKAGE=opencode-linux-x64
  PRINTED=$VERSION
else
  PACKAGE=@opencode/cli-linux-x64-baseline
  PRINTED="opencode v$VERSION"
fi
if [ "$VERSION" = "$PINNED" ]; then
  PREFIX=$WORKSPACE/target/opencode-real
else
  PREFIX=$WORKSPACE/target/opencode-versions/$VERSION
fi
BIN=$PREFIX/node_modules/$PACKAGE/bin/opencode

PROBE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/opencode-probe.XXXXXX")
trap 'rm -rf "$PROBE_HOME"' EXIT

installed_version() {
  [ -x "$BIN" ] || return 0
  # TMPDIR too: every start unpacks a native library there and leaves it.
  HOME=$PROBE_HOME XDG_DATA_HOME=$PROBE_HOME/data XDG_CONFIG_HOME=$PROBE_HOME/config \
    XDG_STATE_HOME=$PROBE_HOME/state XDG_CACHE_HOME=$PROBE_HOME/cache TMPDIR=$PROBE_HOME \
    OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 \
    "$BIN" --version 2>/dev/null </dev/null || true
}

if [ "$(installed_version)" != "$PRINTED" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-opencode.sh: npm is not on PATH; cannot install $PACKAGE@$VERSION" >&2
    exit 1
  fi
  echo "install-opencode.sh: installing $PACKAGE@$VERSION into $PREFIX" >&2
  mkdir -p "$PREFIX"
  npm install --prefix "$PREFIX" --no-save --no-audit --no-fund --loglevel=error \
    "$PACKAGE@$VERSION" >&2
fi

found=$(installed_version)
if [ "$found" != "$PRINTED" ]; then
  echo "install-opencode.sh: $BIN reports version '${found:-none}', expected '$PRINTED'" >&2
  exit 1
fi
echo "$BIN"
