"""driftdesk's own config file under concurrent writers: no profile is ever lost.

Seen: concurrent `profile add` of two names lost 8 profiles of 40 while both printed `added`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

from driftdesk.filelock import locked
from driftdesk.providers.profiles import Profile, ProfileStore

ADD = (sys.executable, "-m", "driftdesk", "profile", "add")
PROFILE_FLAGS = (
    *("--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1"),
    *("--model", "m", "--no-key"),
)


def test_concurrent_profile_adds_from_many_processes_lose_nothing(home: Any) -> None:
    names = [f"p{i}" for i in range(16)]
    procs = [
        subprocess.Popen(
            [*ADD, name, *PROFILE_FLAGS],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for name in names
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert sorted(ProfileStore().names()) == sorted(names)


def test_concurrent_saves_from_threads_lose_nothing(home: Any) -> None:
    # The TUI saves from worker threads: the lock must hold between threads of one process too.
    store = ProfileStore()
    barrier = threading.Barrier(12)

    def add(i: int) -> None:
        barrier.wait()
        store.save(Profile(f"t{i}", "openai", "http://127.0.0.1:9/v1", "m", no_key=True))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(store.names()) == sorted(f"t{i}" for i in range(12))


def test_the_lock_excludes_another_thread_and_is_reentrant_in_one(home: Any) -> None:
    inside: list[str] = []
    entered = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with locked("x"), locked("x"):  # re-entrant within a thread
            inside.append("holder")
            entered.set()
            release.wait(10)
            inside.append("holder leaves")

    def other() -> None:
        entered.wait(10)
        with locked("x"):
            inside.append("other")

    threads = [threading.Thread(target=holder), threading.Thread(target=other)]
    for thread in threads:
        thread.start()
    entered.wait(10)
    threading.Event().wait(0.3)  # give the other thread time to (wrongly) get in
    release.set()
    for thread in threads:
        thread.join(10)
    assert inside == ["holder", "holder leaves", "other"]
