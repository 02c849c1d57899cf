"""driftdesk: pin provider configs, rerun agent suites, measure per-task volatility.

This package holds the CLI face and the few helpers every core shares (atomic files,
durable JSONL, paths, redaction). It must stay import-light: no Textual here.
"""

__version__ = "0.1.0"
