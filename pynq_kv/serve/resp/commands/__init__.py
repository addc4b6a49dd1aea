"""The Redis commands pynq-kv answers, one module per family: connection, strings, keyspace,
server (with info), wildcard (KV.*); base holds what they share and table assembles them."""
