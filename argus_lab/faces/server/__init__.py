"""The Jupyter server extension: authenticated, read-only REST handlers over evidence stores.

``routes.setup_handlers`` is called by ``argus_lab._load_jupyter_server_extension``; the handlers live in
``handlers`` (the store look-ups they answer with in :mod:`argus_lab.report.browse`), and the rules for which store
files a request may name in ``paths``.
"""
