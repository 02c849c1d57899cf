#!/usr/bin/env bash
# Run a command inside an unlocked, throwaway gnome-keyring (call under dbus-run-session).
# The keyring files live in a temporary folder, so the tests never touch a user's real keyrings.
set -euo pipefail
keyring_home=$(mktemp -d)
trap 'rm -rf "$keyring_home"' EXIT
# The daemon gets a session of its own (setsid): left in ours, it shared the process group of
# the tests, so a signal meant for a group of test processes could take it down, and D-Bus then
# starts a fresh, empty daemon whose every store fails ("Prompt dismissed"). tests/keyring_guard.py
# restarts it from these two variables if it dies anyway. Its control socket stays in the same
# folder: the default, $XDG_RUNTIME_DIR/keyring, is shared with every other gnome-keyring of the
# user, whose socket ours would take over.
export DRIFTDESK_TEST_KEYRING_HOME="$keyring_home"
export DRIFTDESK_TEST_KEYRING_PASSWORD=driftdesk-tests  # unlocks only this throwaway keyring
eval "$(printf '%s' "$DRIFTDESK_TEST_KEYRING_PASSWORD" \
    | XDG_DATA_HOME="$keyring_home" setsid gnome-keyring-daemon --unlock --components=secrets \
        --control-directory="$keyring_home/control" 2>/dev/null)"
export GNOME_KEYRING_CONTROL
export DRIFTDESK_REQUIRE_KEYRING=1
"$@"
