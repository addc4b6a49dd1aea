"""The memcached front-end: binary + text subset over UDP, in software (server.py) or bridged
to the virtual board's RTL data plane (bridge.py); docs/frontend.md."""
