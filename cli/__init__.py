"""The ``driftdesk`` command line (``driftdesk.cli``): a face over the cores, beside the TUI.

``main`` builds the parser; each area registers its sub-commands from ``<area>.py``.
"""
