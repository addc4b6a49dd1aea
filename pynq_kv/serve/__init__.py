"""The front-ends of the appliance: Redis/RESP (resp/), memcached/UDP (memcached/), and the
runner that starts them, with the admin service, over one `pynq_kv.appliance.Appliance`."""
