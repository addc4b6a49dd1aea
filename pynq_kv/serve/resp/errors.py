"""Every error reply of the RESP front-end, worded as Redis 7.0 words it, in one place.

Clients match on these strings (redis-py maps "NOAUTH", "WRONGPASS", "OOM", "unknown command"
and the arity message to exception classes), so they are copied from Redis, not paraphrased.
The few that are pynq-kv's own (the hardware key/value format, expiry, rules) say so clearly
and keep Redis' "ERR " prefix. Messages are bytes without the leading "-" and trailing CRLF;
`error_reply` adds both and, as Redis' addReplyErrorFormat does, turns CR/LF into spaces so a
client-supplied byte can never break the framing.
"""

from __future__ import annotations

# -- protocol errors (connection closes after the reply) ---------------------------------------
PROTO_TOO_BIG_INLINE = b"ERR Protocol error: too big inline request"
PROTO_TOO_BIG_MBULK = b"ERR Protocol error: too big mbulk count string"
PROTO_TOO_BIG_BULK = b"ERR Protocol error: too big bulk count string"
PROTO_UNBALANCED = b"ERR Protocol error: unbalanced quotes in request"
PROTO_INVALID_MBULK = b"ERR Protocol error: invalid multibulk length"
PROTO_INVALID_BULK = b"ERR Protocol error: invalid bulk length"
PROTO_UNAUTH_MBULK = b"ERR Protocol error: unauthenticated multibulk length"
PROTO_UNAUTH_BULK = b"ERR Protocol error: unauthenticated bulk length"


def proto_expected_dollar(got: bytes) -> bytes:
    """Redis prints the offending byte itself with %c."""
    return b"ERR Protocol error: expected '$', got '" + got[:1] + b"'"


# -- command dispatch ---------------------------------------------------------------------------
NOAUTH = b"NOAUTH Authentication required."
NOAUTH_HELLO = (b"NOAUTH HELLO must be called with the client already authenticated, otherwise "
                b"the HELLO AUTH <user> <pass> option can be used to authenticate the client and "
                b"select the RESP protocol version at the same time")
WRONGPASS = b"WRONGPASS invalid username-password pair or user is disabled."
AUTH_NOT_CONFIGURED = (b"ERR AUTH <password> called without any password configured for the "
                       b"default user. Are you sure your configuration is correct?")
SYNTAX = b"ERR syntax error"
NOT_INTEGER = b"ERR value is not an integer or out of range"
DB_OUT_OF_RANGE = b"ERR DB index is out of range"
NOPROTO = b"NOPROTO unsupported protocol version"
HELLO_PROTO_NOT_INTEGER = b"ERR Protocol version is not an integer or out of range"
CLIENT_NAME_CHARS = b"ERR Client names cannot contain spaces, newlines or special characters."
INVALID_EXPIRE_SET = b"ERR invalid expire time in 'set' command"
OOM = b"OOM command not allowed when used memory > 'maxmemory'."
MAX_CLIENTS = b"ERR max number of clients reached"
# With a host tier: commands that would act on pynq-kv's own connections to Redis, or stop it.
TIER_SHUTDOWN = b"ERR SHUTDOWN would stop the Redis behind pynq-kv: stop pynq-kv serve instead"
TIER_CLIENT_KILL = (b"ERR CLIENT KILL is not supported through pynq-kv (Redis' client ids are "
                    b"pynq-kv's connections, not yours)")
TIER_DOWN = b"ERR host tier unavailable: Redis cannot be reached"


def _c_string(data: bytes, limit: int) -> bytes:
    """What Redis' "%.Ns" prints of an argument: up to the first NUL, at most limit bytes."""
    nul = data.find(b"\0")
    if nul >= 0:
        data = data[:nul]
    return data[:limit]


def unknown_command(args: list[bytes]) -> bytes:
    """Redis' message, quoting arguments until the quoted list reaches 128 bytes."""
    quoted = b""
    for arg in args[1:]:
        if len(quoted) >= 128:
            break
        quoted += b"'" + _c_string(arg, 128 - len(quoted)) + b"' "
    return (b"ERR unknown command '" + _c_string(args[0], 128)
            + b"', with args beginning with: " + quoted)


def unknown_subcommand(container: bytes, sub: bytes) -> bytes:
    return (b"ERR unknown subcommand '" + _c_string(sub, 128) + b"'. Try "
            + container.upper() + b" HELP.")


def wrong_arity(fullname: str) -> bytes:
    return b"ERR wrong number of arguments for '" + fullname.encode() + b"' command"


def hello_syntax(option: bytes) -> bytes:
    return b"ERR Syntax error in HELLO option '" + _c_string(option, 1 << 20) + b"'"


def config_set_unknown(name: bytes) -> bytes:
    return (b"ERR Unknown option or number of arguments for CONFIG SET - '"
            + _c_string(name, 1 << 20) + b"'")


def config_set_immutable(name: bytes) -> bytes:
    return (b"ERR CONFIG SET failed (possibly related to argument '" + _c_string(name, 1 << 20)
            + b"') - can't set immutable config")


# -- pynq-kv's own ------------------------------------------------------------------------------
def key_too_long(key_width: int, max_bytes: int) -> bytes:
    return (f"ERR key too long for the engine's {key_width}-bit key format "
            f"(max {max_bytes} bytes)").encode()


def value_too_long(value_width: int, max_bytes: int) -> bytes:
    return (f"ERR value too long for the engine's {value_width}-bit value format "
            f"(max {max_bytes} bytes)").encode()


def value_not_integer(value_width: int) -> bytes:
    return (f"ERR this engine stores integer values: the value must be a decimal integer "
            f"of 0 .. 2^{value_width}-1").encode()


NO_EXPIRY = (b"ERR key expiry (EX/PX/EXAT/PXAT) is not supported: pynq-kv keys live until "
             b"deleted")


def engine_error(exc: Exception) -> bytes:
    """An engine refusal (InvalidRule, RuleTableFull, ...) as an ERR reply."""
    return b"ERR " + str(exc).encode("utf-8", "replace")


def error_reply(message: bytes) -> bytes:
    """The RESP error line for message: "-" message CRLF, with CR/LF inside made spaces."""
    if b"\r" in message or b"\n" in message:
        message = message.replace(b"\r", b" ").replace(b"\n", b" ")
    return b"-" + message + b"\r\n"
