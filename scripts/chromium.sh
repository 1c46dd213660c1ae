#!/usr/bin/env bash
# The browser tests' Chromium: Debian's package (no browser download). Installs it when missing
# (needs root, as PostgreSQL's install does); prints its path.
set -euo pipefail
chromium=${CROUPIER_CHROMIUM:-/usr/bin/chromium}
if [[ ! -x $chromium ]]; then
  [[ $EUID -eq 0 ]] || { echo "chromium is not installed and installing it needs root: apt-get install -y chromium" >&2; exit 1; }
  echo "installing Debian's chromium for the browser tests" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
echo "$chromium"
