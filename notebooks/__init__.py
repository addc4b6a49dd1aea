"""The notebooks, installed with pynq-kv as the package ``pynq_kv.notebooks``.

Only the notebooks go in (setup.py's DATA_PACKAGES). pyproject.toml registers this package under
the ``pynq.notebooks`` entry point, so on a board ``pynq get-notebooks pynq-kv`` copies this
folder (less this file) into ./pynq-notebooks/pynq-kv/. Elsewhere:
``importlib.resources.files("pynq_kv.notebooks")``.
"""
