"""The shareable page: one self-contained HTML file of a run report, a comparison or a trend.

``build`` makes the three pages from the cores' own results (one owner each: the report JSON,
``Comparison``, the trend JSON); ``run_data`` and ``volatile`` add what a reader without the
run dir needs (identity, attempts, a pass beside a fail); ``scrub`` is what may go in;
``headline`` the static HTML; ``plots`` the matplotlib SVGs (the ``page`` extra);
``document`` the file itself (CSP by hashes, data as escaped JSON). Imports no Textual.
"""
