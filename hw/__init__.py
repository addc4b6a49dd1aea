"""The hardware sources, installed with pynq-kv as the package ``pynq_kv.hw`` (setup.py).

Only data goes in: rtl/*.v and rtl/kv_regs.vh, the Verilator harness sim/kv_sim.cpp and the
register map source regmap/kv_regs.json. The ``rtl`` backend (`pynq_kv.sim`) finds them through
importlib.resources, so an installed package builds the Verilated engine without a checkout.
The rest of hw/ (tools.py, Makefiles, testbenches) is the repository's hardware flow and is not
installed.
"""
