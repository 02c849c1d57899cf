"""Moving provider keys out of a ``.env`` file into the OS keyring (``switch --move-key``).

A ``.env`` switch changes OPENAI_BASE_URL; a key line left in the file would then go to the new
endpoint with any tool that loads it. The key belongs to the provider the file pointed at before
the switch, so: if a profile already holds it in the keyring, the line just goes; otherwise a
profile is made for that old provider (its base URL and model read from the file, or from the
backup of the file as it was before driftdesk first wrote it) and the key is stored there.
Either way the file is backed up first, so ``driftdesk restore`` undoes it.
"""

from __future__ import annotations

from pathlib import Path

from driftdesk.providers import backupvault, importer, state, targets
from driftdesk.providers.dotenv import assigned_values, parse_env_lines
from driftdesk.providers.errors import ImportProblem
from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.secrets import mask_key


def move_env_keys(path: Path, switching_to: Profile) -> list[str]:
    """Take every provider key out of ``path``; returns what was done (keys masked)."""
    text = targets.read_text(path) or ""
    found = targets.env_key_lines(text)
    if not found:
        return []
    held = targets.keys_in_keyring({value for _, value in found})
    done = []
    store = ProfileStore()
    for name, value in found:
        if value in held:
            done.append(f"{name} ({mask_key(value)}): a profile holds it in the keyring already")
            continue
        base_url, model = _old_provider(path, text, switching_to)
        profile = Profile(
            name=importer._default_name(store, "env", base_url),
            protocol="anthropic" if name.startswith("ANTHROPIC_") else "openai",
            base_url=base_url,
            model=model,
            notes=f"moved out of {path} by driftdesk switch --move-key",
        )
        profile.validate()
        set_key(profile.name, value)
        store.save(profile)
        held.add(value)
        done.append(
            f"{name} ({mask_key(value)}) stored in the OS keyring as profile {profile.name} "
            f"({base_url})"
        )
    names = {name for name, _ in found}
    kept = "".join(line.text for line in parse_env_lines(text, path) if line.key not in names)
    targets.apply_edit(path, "env", text, kept, None, "move-key")
    done.append(f"removed {', '.join(sorted(names))} from {path} (backed up first)")
    return done


def _old_provider(path: Path, text: str, switching_to: Profile) -> tuple[str, str]:
    """The base URL and model the key was used with: the file's, unless it already points at
    the profile being switched in; then the file's as it was before driftdesk first wrote it."""
    values = dict(assigned_values(parse_env_lines(text, path)))
    url, model = values.get("OPENAI_BASE_URL"), values.get("OPENAI_MODEL")
    if url and url != switching_to.base_url and model:
        return url, model
    original = state.backup_folder(path) / "original"
    if original.is_file():
        before = backupvault.read_copy(original).decode("utf-8", "surrogateescape")
        values = dict(assigned_values(parse_env_lines(before, path)))
        url, model = values.get("OPENAI_BASE_URL"), values.get("OPENAI_MODEL")
        if url and model:
            return url, model
    raise ImportProblem(
        f"cannot tell which provider the key in {path} belongs to (no earlier OPENAI_BASE_URL "
        "and OPENAI_MODEL): make a profile for it (driftdesk profile add NAME ... --key-stdin), "
        "then run this switch with --move-key again"
    )
