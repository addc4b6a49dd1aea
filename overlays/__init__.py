"""The board overlays, installed with pynq-kv as the package ``pynq_kv.overlays``.

Each board's manifest.json goes in, with the outputs it names (kv.bit, kv.hwh, kv.xclbin) when
the Vivado flow has built them here (setup.py's DATA_PACKAGES); they are never committed. Found
at run time through ``importlib.resources.files("pynq_kv.overlays")``.
"""
