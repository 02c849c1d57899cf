"""Hostile or broken input around a run: a Secret Service that D-Bus can activate but that never
starts, a bad PYTHON_KEYRING_BACKEND, a bad ``max_turns``. Each gets one clear line, no hang and
no traceback. Real dbus-daemon, real CLI subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftdesk.reruns.suites import SuiteError, load_suite

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={dir}</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{services}</servicedir>
  <limit name="service_start_timeout">300000</limit>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


@pytest.fixture
def hung_secret_service(tmp_path: Path) -> Iterator[str]:
    """A private session bus on which org.freedesktop.secrets is activatable, but its
    activation starts a process that never takes the name."""
    services = tmp_path / "services"
    services.mkdir()
    (services / "org.freedesktop.secrets.service").write_text(
        textwrap.dedent(
            """
            [D-BUS Service]
            Name=org.freedesktop.secrets
            Exec=/bin/sleep 600
            """
        )
    )
    config = tmp_path / "bus.conf"
    config.write_text(BUS_CONFIG.format(dir=tmp_path, services=services))
    daemon = subprocess.Popen(
        ["dbus-daemon", "--config-file", str(config), "--print-address", "--nofork"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert daemon.stdout is not None
    address = daemon.stdout.readline().strip()
    try:
        yield address
    finally:
        daemon.kill()
        daemon.wait()


def _with_profile(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """A config home holding a keyed profile ``anything`` (for an unknown name `driftdesk key`
    says "no profile named", before any keyring problem)."""
    config = tmp_path / "config" / "driftdesk" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '[profiles.anything]\nprotocol = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'model = "m"\n'
    )
    return dict(env, XDG_CONFIG_HOME=str(tmp_path / "config"))


def _env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_KEYRING_BACKEND"}
    env.update(changes)
    return env


def test_a_secret_service_that_never_starts_gives_the_keyring_message_fast(
    hung_secret_service: str, tmp_path: Path
) -> None:
    # The fixture's bus has no running Secret Service: only the activatable, hung one.
    env = _env(DBUS_SESSION_BUS_ADDRESS=hung_secret_service, DRIFTDESK_KEYRING_TIMEOUT="3")
    env.pop("GNOME_KEYRING_CONTROL", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "key", "anything"],
        capture_output=True,
        text=True,
        env=_with_profile(tmp_path, env),
        timeout=100,  # the bus would make it wait 300 s
    )
    waited = time.monotonic() - started
    assert done.returncode != 0
    assert "did not answer within 3s" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert waited < 60  # the deadline, not the bus's activation timeout


def test_a_bad_python_keyring_backend_is_one_clear_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "key", "anything"],
        capture_output=True,
        text=True,
        env=_with_profile(tmp_path, _env(PYTHON_KEYRING_BACKEND="no.such.Backend")),
        timeout=60,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr.split("(")[0]
    assert "PYTHON_KEYRING_BACKEND='no.such.Backend'" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ['"four"', "0", "-2", "2.5", "true", "[4]"])
def test_a_bad_max_turns_names_the_file_and_line(tmp_path: Path, value: str) -> None:
    suite = tmp_path / "suite.jsonl"
    good = json.dumps({"task_id": "ok", "prompt": "p", "expected": {"equals": "x"}})
    bad = (
        f'{{"task_id": "bad", "prompt": "p", "expected": {{"equals": "x"}}, "max_turns": {value}}}'
    )
    suite.write_text(good + "\n" + bad + "\n")
    with pytest.raises(SuiteError) as error:
        load_suite(suite)
    message = str(error.value)
    assert message.startswith(f"{suite}:2: task 'bad': max_turns must be a whole number")
    assert "invalid literal" not in message
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "run", "--profile", "x", "--suite", str(suite)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr
