"""A URL is never taken for a folder name, and a plain install given one says which extra to
add (issue 51's first item; before it, ``run --out s3://team/nightly`` wrote a local ``s3:``
folder and told the user to ``driftdesk report s3:/team/nightly/…``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_helpers import REAL_KEY, driftdesk, history, without_fsspec

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    server = SandboxServer(seed=3)
    server.start()
    yield server
    server.stop()


@pytest.mark.keyring
def test_run_out_url_on_a_plain_install_names_the_extra_and_writes_no_folder(
    home: object, sandbox: SandboxServer, tmp_path: Path
) -> None:
    ProfileStore().save(
        Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
    )
    set_key("sim", REAL_KEY)
    project = Path.cwd()
    result = driftdesk(
        "run", "--profile", "sim", "--suite", "basic", "--repeat", "1", "--no-probe",
        "--out", "s3://team/nightly", env=without_fsspec(tmp_path), cwd=project,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pip install 'driftdesk[remote]'" in result.stderr
    assert not (project / "s3:").exists() and list(project.iterdir()) == []


def test_readers_given_a_url_on_a_plain_install_name_the_extra(
    home: object, tmp_path: Path
) -> None:
    env = without_fsspec(tmp_path)
    for args in (
        ("report", "s3://team/nightly/run-1"),
        ("trend", "s3://team/nightly"),
        ("tui", "--runs", "s3://team/nightly"),
        ("compare", "s3://team/a", "s3://team/b"),
        ("pull", "s3://team/nightly/run-1"),
    ):
        result = driftdesk(*args, env=env)
        assert result.returncode == 2, (args, result.stderr)
        assert "driftdesk[remote]" in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_another_store_without_its_filesystem_names_the_package(home: object) -> None:
    result = driftdesk("report", "gs://team/nightly/run-1")
    assert result.returncode == 2
    assert "gcsfs" in result.stderr and "Traceback" not in result.stderr


def test_a_url_where_only_a_local_path_goes_is_refused_not_made_a_folder(
    home: object, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text('{"task_id": "a", "success": true}\n')
    project = Path.cwd()
    for args in (
        ("import", str(results), "--out", "s3://team/imports"),
        ("report", str(history(tmp_path / "runs", "a", 1)[0]), "--out", "s3://team/r.json"),
    ):
        result = driftdesk(*args, cwd=project)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "takes a local path, not a URL" in result.stderr
        assert not (project / "s3:").exists()


def test_a_url_with_a_credential_in_it_is_refused_without_echoing_it(home: object) -> None:
    result = driftdesk("trend", "s3://AKIAXXXX:topsecretvalue@team/nightly")
    assert result.returncode == 2
    assert "must not hold credentials" in result.stderr
    assert "topsecretvalue" not in result.stderr + result.stdout
