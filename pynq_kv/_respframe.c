/* pynq_kv._respframe: RESP reply framing in C, for pynq_kv.redislink.
 *
 * frame(buf, pos, limit) -> (end, count, errors) is pynq_kv.redislink.frame_replies, which
 * states the contract and holds the Python implementation used when this module was not built.
 * The host tier relays Redis' replies byte for byte and only needs to know where each ends;
 * doing that a byte-length at a time in Python costs more than Redis' own work for an LRANGE
 * of a few hundred elements, so it is done here. tests/test_redislink.py checks both
 * implementations against each other on generated replies. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define INCOMPLETE (-1)
#define BAD (-2)

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

static PyMethodDef methods[] = {
    {"frame", frame, METH_VARARGS,
     "frame(buf, pos, limit) -> (end, count, errors): see pynq_kv.redislink.frame_replies."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_respframe", "RESP reply framing in C (pynq_kv.redislink).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__respframe(void)
{
    return PyModule_Create(&module);
}
