"""The workbench's screens: one per area (profiles, run, volatility) plus modals."""
