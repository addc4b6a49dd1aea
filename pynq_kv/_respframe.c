/* pynq_kv._respframe: RESP reply framing in C, for pynq_kv.redislink.
 *
 * frame(buf, pos, limit) -> (end, count, errors) is pynq_kv.redislink.frame_replies, which
 * states the contract and holds the Python implementation used when this module was not built.
 * The host tier relays Redis' replies byte for byte and only needs to know where each ends;
 * doing that a byte-length at a time in Python costs more than Redis' own work for an LRANGE
 * of a few hundred elements, so it is done here. tests/test_redislink.py checks both
 * implementations against each other on generated replies.
 *
 * encode(args) -> bytes is pynq_kv.redislink.encode_command (the Python one is
 * encode_command_py): every command forwarded to Redis is encoded, and a %-format per
 * argument was a tenth of an MSET's cost. encode_block(columns) -> bytes is
 * pynq_kv.redislink.encode_block (encode_block_py): a pipelined block of one command, about 9 %
 * of an INCR's server time at -P 16 in Python. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define INCOMPLETE (-1)
#define BAD (-2)
#define MAX_BLOCK_COLUMNS 64

/* The first CRLF at or after pos, INCOMPLETE if buf[pos:size] has none. */
static Py_ssize_t find_crlf(const char *buf, Py_ssize_t pos, Py_ssize_t size)
{
    while (pos < size) {
        const char *cr = memchr(buf + pos, '\r', (size_t)(size - pos));
        if (cr == NULL)
            return INCOMPLETE;
        pos = cr - buf;
        if (pos + 1 >= size)
            return INCOMPLETE;
        if (buf[pos + 1] == '\n')
            return pos;
        pos += 1;
    }
    return INCOMPLETE;
}

/* The signed decimal in buf[start:stop]; BAD (and *ok 0) if it is not one. */
static long long parse_count(const char *buf, Py_ssize_t start, Py_ssize_t stop, int *ok)
{
    long long value = 0;
    int negative = 0;
    *ok = 0;
    if (start < stop && buf[start] == '-') {
        negative = 1;
        start += 1;
    }
    if (start >= stop || stop - start > 18)
        return 0;
    for (; start < stop; start++) {
        char c = buf[start];
        if (c < '0' || c > '9')
            return 0;
        value = value * 10 + (c - '0');
    }
    *ok = 1;
    return negative ? -value : value;
}

/* Where the reply starting at buf[pos] ends; INCOMPLETE, or BAD with *why set. */
static Py_ssize_t reply_end(const char *buf, Py_ssize_t pos, Py_ssize_t size, const char **why)
{
    long long need = 1;
    while (need) {
        Py_ssize_t eol;
        long long count;
        int ok;
        char kind;
        if (pos >= size)
            return INCOMPLETE;
        eol = find_crlf(buf, pos, size);
        if (eol < 0)
            return INCOMPLETE;
        kind = buf[pos];
        need -= 1;
        switch (kind) {
        case '+': case '-': case ':': case '_': case ',': case '#': case '(':
            pos = eol + 2;
            continue;
        case '$': case '=': case '!': case '*': case '~': case '>': case '%': case '|':
            break;
        default:
            *why = "unknown reply type";
            return BAD;
        }
        count = parse_count(buf, pos + 1, eol, &ok);
        if (!ok) {
            *why = "bad length line";
            return BAD;
        }
        pos = eol + 2;
        switch (kind) {
        case '$': case '=': case '!':
            if (count >= 0) {
                if (count > (long long)(size - pos))
                    return INCOMPLETE;
                pos += (Py_ssize_t)count + 2;
            }
            break;
        case '*': case '~': case '>':
            if (count > 0)
                need += count;
            break;
        default: /* '%' a map, '|' an attribute: count pairs, an attribute then its reply */
            if (count > 0)
                need += 2 * count;
            need += kind == '|';
        }
    }
    return pos <= size ? pos : INCOMPLETE;
}

static PyObject *frame(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, limit, count = 0, errors = 0;
    const char *buf, *why = NULL;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &pos, &limit))
        return NULL;
    buf = (const char *)view.buf;
    if (pos < 0)
        pos = 0;
    while (count < limit && pos < view.len && buf[pos] != '>') {
        Py_ssize_t end = reply_end(buf, pos, view.len, &why);
        if (end == BAD) {
            PyBuffer_Release(&view);
            return PyErr_Format(PyExc_ValueError, "%s at byte %zd", why, pos);
        }
        if (end < 0)
            break;
        errors += buf[pos] == '-';
        count += 1;
        pos = end;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nnn", pos, count, errors);
}

/* Writes the decimal of value (>= 0) at out; returns where it ends. */
static char *decimal(char *out, Py_ssize_t value)
{
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    while (n)
        *out++ = digits[--n];
    return out;
}

static Py_ssize_t decimal_size(Py_ssize_t value)
{
    Py_ssize_t n = 1;
    while (value >= 10) {
        value /= 10;
        n++;
    }
    return n;
}

/* Bytes written for one bulk string of len bytes: "$<len>\r\n<bytes>\r\n". */
static Py_ssize_t bulk_size(Py_ssize_t len)
{
    return 1 + decimal_size(len) + 2 + len + 2;
}

/* "<kind><n>\r\n": an array's ('*') or a bulk string's ('$') header. */
static char *put_header(char *p, char kind, Py_ssize_t n)
{
    *p++ = kind;
    p = decimal(p, n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

static char *put_bulk(char *p, PyObject *item)
{
    Py_ssize_t len = PyBytes_GET_SIZE(item);
    p = put_header(p, '$', len);
    memcpy(p, PyBytes_AS_STRING(item), (size_t)len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* encode(args) -> bytes: pynq_kv.redislink.encode_command for a sequence of bytes objects
 * (a TypeError for anything else: the caller then uses the Python encoder). */
static PyObject *encode(PyObject *module, PyObject *arg)
{
    PyObject *seq, **items, *out;
    Py_ssize_t count, size, i;
    char *p;
    (void)module;
    seq = PySequence_Fast(arg, "encode() takes a sequence of bytes");
    if (seq == NULL)
        return NULL;
    count = PySequence_Fast_GET_SIZE(seq);
    items = PySequence_Fast_ITEMS(seq);
    size = 1 + decimal_size(count) + 2;
    for (i = 0; i < count; i++) {
        if (!PyBytes_Check(items[i])) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "encode() takes bytes arguments only");
            return NULL;
        }
        size += bulk_size(PyBytes_GET_SIZE(items[i]));
    }
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    p = put_header(PyBytes_AS_STRING(out), '*', count);
    for (i = 0; i < count; i++)
        p = put_bulk(p, items[i]);
    Py_DECREF(seq);
    return out;
}

/* encode_block(columns) -> bytes: pynq_kv.redislink.encode_block for 1 to MAX_BLOCK_COLUMNS
 * columns of bytes objects (a TypeError for anything else: the caller then uses the Python
 * encoder), every column as long as the first (a ValueError otherwise, as in Python). */
static PyObject *encode_block(PyObject *module, PyObject *arg)
{
    PyObject *block, **columns[MAX_BLOCK_COLUMNS], *fast[MAX_BLOCK_COLUMNS], *out = NULL;
    Py_ssize_t width, rows, size, row, c;
    char *p;
    (void)module;
    block = PySequence_Fast(arg, "encode_block() takes a sequence of columns");
    if (block == NULL)
        return NULL;
    width = PySequence_Fast_GET_SIZE(block);
    if (width < 1 || width > MAX_BLOCK_COLUMNS) {
        Py_DECREF(block);
        PyErr_Format(PyExc_TypeError, "encode_block() takes 1 to %d columns", MAX_BLOCK_COLUMNS);
        return NULL;
    }
    for (c = 0; c < width; c++)
        fast[c] = NULL;
    rows = -1;
    size = 0;
    for (c = 0; c < width; c++) {
        Py_ssize_t n, i;
        fast[c] = PySequence_Fast(PySequence_Fast_GET_ITEM(block, c),
                                  "encode_block() takes columns that are sequences");
        if (fast[c] == NULL)
            goto done;
        n = PySequence_Fast_GET_SIZE(fast[c]);
        if (rows < 0)
            rows = n;
        else if (n != rows) {
            PyErr_SetString(PyExc_ValueError, "encode_block() takes columns of one length");
            goto done;
        }
        columns[c] = PySequence_Fast_ITEMS(fast[c]);
        for (i = 0; i < n; i++) {
            if (!PyBytes_Check(columns[c][i])) {
                PyErr_SetString(PyExc_TypeError, "encode_block() takes bytes arguments only");
                goto done;
            }
            size += bulk_size(PyBytes_GET_SIZE(columns[c][i]));
        }
    }
    size += rows * (1 + decimal_size(width) + 2);
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        goto done;
    p = PyBytes_AS_STRING(out);
    for (row = 0; row < rows; row++) {
        p = put_header(p, '*', width);
        for (c = 0; c < width; c++)
            p = put_bulk(p, columns[c][row]);
    }
done:
    for (c = 0; c < width; c++)
        Py_XDECREF(fast[c]);
    Py_DECREF(block);
    return out;
}

static PyMethodDef methods[] = {
    {"frame", frame, METH_VARARGS,
     "frame(buf, pos, limit) -> (end, count, errors): see pynq_kv.redislink.frame_replies."},
    {"encode", encode, METH_O,
     "encode(args) -> bytes: see pynq_kv.redislink.encode_command."},
    {"encode_block", encode_block, METH_O,
     "encode_block(columns) -> bytes: see pynq_kv.redislink.encode_block."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_respframe", "RESP framing in C (pynq_kv.redislink).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__respframe(void)
{
    return PyModule_Create(&module);
}
