/* pynq_kv._respfast: the RESP request parser's fast path in C, for
 * pynq_kv.serve.resp.protocol.
 *
 * fast(buf, start, out, bulk_max, block_max) -> (end, count) takes the leading run of plain multibulk
 * commands in buf[start:] and appends them to out; end is where the first command it cannot
 * vouch for starts (the exact path, in Python, goes on from there). A command is taken only
 * when it is whole and every header is canonical: "*N" with N in 1..1024, then N times "$L"
 * with L in 0..bulk_max (decimal, no sign, no leading zero), each header and each payload
 * followed by CRLF. The exact path reads such bytes as the same command, so taking them here
 * changes nothing but the speed; anything else (an inline command, an odd header, a partial
 * command) is left to it.
 *
 * Output as RequestParser._fast documents it: a run of at least MIN_BLOCK consecutive
 * commands with the same argument count (at most block_max arguments) comes out as one
 * block, a tuple of argument columns; other commands come out as lists. A command's name that
 * equals the previous command's is the same bytes object (the dispatcher compares names).
 *
 * The Python fast path (_shape, _cut, _fast_tokens) does the same job where this module was
 * not built; tests/test_resp_protocol.py runs the parser's tests on both. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define FAST_MAX_ARGS 1024 /* protocol.FAST_MAX_ARGS */
#define MIN_BLOCK 4        /* a shorter run of one argument count comes out as lists */

/* The canonical decimal of a header line buf[pos:] that starts with marker and ends in CRLF,
 * at most max; -1 if it is not one (or not whole). *next is where the line's CRLF ends. */
static Py_ssize_t header(const char *buf, Py_ssize_t pos, Py_ssize_t size, char marker,
                         Py_ssize_t max, Py_ssize_t *next)
{
    Py_ssize_t start, value = 0;
    if (pos >= size || buf[pos] != marker)
        return -1;
    start = ++pos;
    while (pos < size && buf[pos] >= '0' && buf[pos] <= '9') {
        value = value * 10 + (buf[pos] - '0');
        if (value > max)
            return -1;
        pos++;
    }
    if (pos == start || (pos - start > 1 && buf[start] == '0'))
        return -1;
    if (pos + 1 >= size || buf[pos] != '\r' || buf[pos + 1] != '\n')
        return -1;
    *next = pos + 2;
    return value;
}

/* A growable array of Py_ssize_t. */
typedef struct {
    Py_ssize_t *items;
    Py_ssize_t len, cap;
} Array;

static int push(Array *a, Py_ssize_t value)
{
    if (a->len == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 256;
        Py_ssize_t *items = PyMem_Realloc(a->items, (size_t)cap * sizeof(Py_ssize_t));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        a->items = items;
        a->cap = cap;
    }
    a->items[a->len++] = value;
    return 0;
}

/* The payload of argument arg as bytes; a name equal to *last is *last itself. */
static PyObject *argument(const char *buf, const Array *offsets, Py_ssize_t arg, PyObject **last)
{
    Py_ssize_t off = offsets->items[2 * arg], len = offsets->items[2 * arg + 1];
    PyObject *value;
    if (last != NULL && *last != NULL && PyBytes_GET_SIZE(*last) == len
            && memcmp(PyBytes_AS_STRING(*last), buf + off, (size_t)len) == 0) {
        Py_INCREF(*last);
        return *last;
    }
    value = PyBytes_FromStringAndSize(buf + off, len);
    if (value != NULL && last != NULL)
        *last = value; /* borrowed: the output holds it */
    return value;
}

/* Commands first..first+count-1 (all with argc arguments, the first at arg) as one block. */
static PyObject *block(const char *buf, const Array *offsets, Py_ssize_t arg, Py_ssize_t count,
                       Py_ssize_t argc, PyObject **name)
{
    PyObject *columns = PyTuple_New(argc);
    Py_ssize_t a, i;
    if (columns == NULL)
        return NULL;
    for (a = 0; a < argc; a++) {
        PyObject *column = PyList_New(count);
        if (column == NULL)
            goto fail;
        PyTuple_SET_ITEM(columns, a, column);
        for (i = 0; i < count; i++) {
            PyObject *value = argument(buf, offsets, arg + i * argc + a, a ? NULL : name);
            if (value == NULL)
                goto fail;
            PyList_SET_ITEM(column, i, value);
        }
    }
    return columns;
fail:
    Py_DECREF(columns);
    return NULL;
}

/* One command (argc arguments, the first at arg) as a list. */
static PyObject *command(const char *buf, const Array *offsets, Py_ssize_t arg, Py_ssize_t argc,
                         PyObject **name)
{
    PyObject *args = PyList_New(argc);
    Py_ssize_t a;
    if (args == NULL)
        return NULL;
    for (a = 0; a < argc; a++) {
        PyObject *value = argument(buf, offsets, arg + a, a ? NULL : name);
        if (value == NULL) {
            Py_DECREF(args);
            return NULL;
        }
        PyList_SET_ITEM(args, a, value);
    }
    return args;
}

static int append(PyObject *out, PyObject *item)
{
    int failed;
    if (item == NULL)
        return -1;
    failed = PyList_Append(out, item);
    Py_DECREF(item);
    return failed;
}

static PyObject *fast(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *out, *name = NULL, *result = NULL;
    Py_ssize_t start, bulk_max, block_max, pos, size, count, i, arg;
    Array argcs = {NULL, 0, 0}, offsets = {NULL, 0, 0};
    const char *buf;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nO!nn:fast", &view, &start, &PyList_Type, &out, &bulk_max,
                          &block_max))
        return NULL;
    buf = view.buf;
    size = view.len;
    pos = start < 0 ? 0 : start;

    /* First every whole, canonical command: its argument count and its payloads' places. */
    while (pos < size) {
        Py_ssize_t p, argc, a, mark = offsets.len;
        argc = header(buf, pos, size, '*', FAST_MAX_ARGS, &p);
        if (argc < 1)
            break;
        for (a = 0; a < argc; a++) {
            Py_ssize_t len = header(buf, p, size, '$', bulk_max, &p);
            if (len < 0 || p + len + 2 > size || buf[p + len] != '\r' || buf[p + len + 1] != '\n')
                break;
            if (push(&offsets, p) < 0 || push(&offsets, len) < 0)
                goto done;
            p += len + 2;
        }
        if (a < argc) {
            offsets.len = mark;
            break;
        }
        if (push(&argcs, argc) < 0)
            goto done;
        pos = p;
    }

    /* Then the output: runs of one argument count as blocks, the rest as lists. */
    count = argcs.len;
    arg = 0;
    for (i = 0; i < count;) {
        Py_ssize_t argc = argcs.items[i], run = 1;
        while (i + run < count && argcs.items[i + run] == argc)
            run++;
        if (run >= MIN_BLOCK && argc <= block_max) {
            if (append(out, block(buf, &offsets, arg, run, argc, &name)) < 0)
                goto done;
            arg += run * argc;
            i += run;
            continue;
        }
        for (; run > 0; run--, i++) {
            if (append(out, command(buf, &offsets, arg, argc, &name)) < 0)
                goto done;
            arg += argc;
        }
    }
    result = Py_BuildValue("nn", pos < start ? start : pos, count);
done:
    PyMem_Free(argcs.items);
    PyMem_Free(offsets.items);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"fast", fast, METH_VARARGS,
     "fast(buf, start, out, bulk_max, block_max) -> (end, count): the leading run of plain "
     "multibulk commands of buf[start:] appended to out (RequestParser._fast's contract)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_respfast", "The RESP request parser's fast path in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__respfast(void)
{
    return PyModule_Create(&module);
}
