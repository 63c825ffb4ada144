#!/bin/sh
# The console tests drive a real headless Chromium: Debian's package (Playwright cannot download
# browsers here). Installs it when it is missing: as root directly, otherwise through sudo.
set -e
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
