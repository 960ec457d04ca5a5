#!/bin/sh
# Install Debian's chromium and chromium-driver for the browser tests, if missing.
# The browser tests skip with a clear message when this was not possible.
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_chromium: apt-get not found; install Chromium yourself (browser tests will be skipped)" >&2
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
  echo "ensure_chromium: not root and no sudo; browser tests will be skipped" >&2
  exit 0
fi
echo "ensure_chromium: installing chromium and chromium-driver with apt-get ..."
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q chromium chromium-driver >/tmp/ensure_chromium.log 2>&1 \
  || { $SUDO apt-get update -q >>/tmp/ensure_chromium.log 2>&1 && $SUDO apt-get install -y -q chromium chromium-driver >>/tmp/ensure_chromium.log 2>&1; } \
  || echo "ensure_chromium: apt-get failed (see /tmp/ensure_chromium.log); browser tests will be skipped" >&2
exit 0
