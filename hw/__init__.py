"""The hardware sources, installed with pynq-kv as the package ``pynq_kv.hw``.

Only data goes in (setup.py's HW_DATA: the RTL, the Verilator harness, the register-map source).
The ``rtl`` backend (`pynq_kv.sim`) finds them through importlib.resources, so an installed
package builds the Verilated engine without a checkout. The rest of hw/ (tools.py, Makefiles,
testbenches) is the repository's hardware flow and is not installed.
"""
