"""`pynq-kv serve`: the appliance — one engine, its front-ends and the admin service."""

from .appliance import Appliance

__all__ = ["Appliance"]
