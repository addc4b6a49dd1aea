"""pynq-kv admin service (FastAPI); installed as pynq_kv_api."""
