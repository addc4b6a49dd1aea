"""The front-ends of the appliance (Redis/RESP in resp/) and the runner that starts them, with
the admin service, over one `pynq_kv.appliance.Appliance`."""
