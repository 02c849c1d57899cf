#!/usr/bin/env bash
# Run a command inside an unlocked, throwaway gnome-keyring (call under dbus-run-session).
# The keyring files live in a temporary folder, so the tests never touch a user's real keyrings.
set -euo pipefail
keyring_home=$(mktemp -d)
trap 'rm -rf "$keyring_home"' EXIT
# The password only unlocks this private, temporary login keyring.
eval "$(printf 'driftdesk-tests' | XDG_DATA_HOME="$keyring_home" gnome-keyring-daemon --unlock --components=secrets 2>/dev/null)"
export GNOME_KEYRING_CONTROL
export DRIFTDESK_REQUIRE_KEYRING=1
"$@"
