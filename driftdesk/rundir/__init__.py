"""The run-dir format, owned here and nowhere else (as inspect_ai's ``log/`` owns its logs).

Everything that reads, writes, lists or identifies a run dir goes through this package: file
names (``layout``), the typed manifest and its one serialisation (``manifest``), the
last-row-per-slot rule (``slots``), run ids and safe names (``ids``), the recordings' gzip
framing (``framing``), the runs catalog (``catalog``) and the writes of a run dir (``writes``).
No other module opens ``manifest.json`` or ``attempts.jsonl`` by hand.

This ``__init__`` is the public surface: callers import from ``driftdesk.rundir``.
"""

from driftdesk.rundir import layout
from driftdesk.rundir.framing import (
    GZIP_WBITS,
    append_member,
    cut_torn_tail,
    gzip_member,
    record_lines,
    whole_members_end,
)
from driftdesk.rundir.ids import (
    RUN_ID_TIME_FORMAT,
    candidate_run_ids,
    import_run_id_base,
    run_id_base,
    safe_name,
)
from driftdesk.rundir.layout import (
    ATTEMPTS_DIR,
    ATTEMPTS_FILE,
    CALLS_FILE,
    CHECK_OUTPUT_SUFFIX,
    CLIENT_HOME_SUFFIX,
    CLIENT_OUTPUT_SUFFIX,
    CONTROL_DIR,
    CONTROL_FILE,
    INSPECT_LOG_DIR,
    MANIFEST_FILE,
    RECORDING_SUFFIX,
    TRAJECTORY_SUFFIX,
    TRANSCRIPT_SUFFIX,
    WORKSPACE_DIFF_SUFFIX,
    WORKSPACE_SUFFIX,
    attempt_file,
    attempt_folder,
    result_file,
    task_folder_name,
)
from driftdesk.rundir.manifest import (
    ManifestNotObject,
    ManifestUnparsable,
    RunManifest,
    read_manifest,
)
from driftdesk.rundir.slots import Slot, latest_rows, slot_of
from driftdesk.rundir.writes import (
    MANIFEST_RESERVE,
    MANIFEST_RESERVE_BYTES,
    create_run_dir,
    discard_unstarted_run_dir,
    drop_torn_tail,
    free_run_dir,
    missing_folders,
    open_private,
    release_manifest_space,
    reserve_manifest_space,
    write_final_manifest,
    write_manifest,
)

__all__ = [
    "ATTEMPTS_DIR",
    "ATTEMPTS_FILE",
    "CALLS_FILE",
    "CHECK_OUTPUT_SUFFIX",
    "CLIENT_HOME_SUFFIX",
    "CLIENT_OUTPUT_SUFFIX",
    "CONTROL_DIR",
    "CONTROL_FILE",
    "GZIP_WBITS",
    "INSPECT_LOG_DIR",
    "MANIFEST_FILE",
    "MANIFEST_RESERVE",
    "MANIFEST_RESERVE_BYTES",
    "RECORDING_SUFFIX",
    "RUN_ID_TIME_FORMAT",
    "TRAJECTORY_SUFFIX",
    "TRANSCRIPT_SUFFIX",
    "WORKSPACE_DIFF_SUFFIX",
    "WORKSPACE_SUFFIX",
    "ManifestNotObject",
    "ManifestUnparsable",
    "RunManifest",
    "Slot",
    "append_member",
    "attempt_file",
    "attempt_folder",
    "candidate_run_ids",
    "create_run_dir",
    "cut_torn_tail",
    "discard_unstarted_run_dir",
    "drop_torn_tail",
    "free_run_dir",
    "gzip_member",
    "import_run_id_base",
    "latest_rows",
    "layout",
    "missing_folders",
    "open_private",
    "read_manifest",
    "record_lines",
    "release_manifest_space",
    "reserve_manifest_space",
    "result_file",
    "run_id_base",
    "safe_name",
    "slot_of",
    "task_folder_name",
    "whole_members_end",
    "write_final_manifest",
    "write_manifest",
]
