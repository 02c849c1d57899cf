"""The run-dir format, owned here and nowhere else (as inspect_ai's ``log/`` owns its logs).

Everything that reads, writes, lists or identifies a run dir goes through this package: file
names (``layout``), the typed manifest and its one serialisation (``manifest``), the
last-row-per-slot rule (``slots``), run ids and safe names (``ids``), the recordings' gzip
framing (``framing``), the runs catalog (``catalog``) and the writes of a run dir (``writes``).
No other module opens ``manifest.json`` or ``attempts.jsonl`` by hand.
"""
