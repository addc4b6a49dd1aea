/* pynq_kv._h3: the H3 hash of a batch of keys in C, for pynq_kv.hashing.hash_keys.
 *
 * hash_into(keys, table, out) XORs, for every key and every non-zero byte b at position p,
 * row 256 p + b of table into the key's row of out:
 *   keys   (N, KEY_BYTES) uint8, C-contiguous;
 *   table  (KEY_BYTES * 256, LANES) uint64, C-contiguous (hashing.row_tables: each lane holds
 *          two ways' 32-bit hashes of one byte value at one position);
 *   out    (N, LANES) uint64, C-contiguous and writable.
 * H3 is linear, so the XOR of the rows is the hash (docs/engine.md §3). hashing.py holds the
 * same computation in numpy, used when this module was not built; tests/test_hashing.py checks
 * the two against each other and against the literal definition. The numpy version gathers
 * KEY_BYTES x LANES words per key through temporaries; for the batch of one event-loop turn of
 * a pipelined RESP client load that was a fifth of the server's time. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_LANES 16

static int get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    /* item sizes are checked, not formats: the one caller (hashing.hash_keys) builds them */
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    if (view->ndim != 2) {
        PyErr_Format(PyExc_ValueError, "%s: expected a 2-D array, got %d dimensions", what,
                     view->ndim);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *hash_into(PyObject *self, PyObject *args)
{
    PyObject *keys_obj, *table_obj, *out_obj;
    Py_buffer keys, table, out;
    if (!PyArg_ParseTuple(args, "OOO:hash_into", &keys_obj, &table_obj, &out_obj))
        return NULL;
    if (get_buffer(keys_obj, &keys, 0, "keys") < 0)
        return NULL;
    if (get_buffer(table_obj, &table, 0, "table") < 0) {
        PyBuffer_Release(&keys);
        return NULL;
    }
    if (get_buffer(out_obj, &out, 1, "out") < 0) {
        PyBuffer_Release(&keys);
        PyBuffer_Release(&table);
        return NULL;
    }
    Py_ssize_t n = keys.shape[0], key_bytes = keys.shape[1], lanes = table.shape[1];
    const char *problem = NULL;
    if (keys.itemsize != 1)
        problem = "keys must be uint8";
    else if (table.itemsize != 8 || out.itemsize != 8)
        problem = "table and out must be uint64";
    else if (table.shape[0] != key_bytes * 256)
        problem = "table must have 256 rows per key byte";
    else if (lanes < 1 || lanes > MAX_LANES)
        problem = "table must have 1 to 16 lanes";
    else if (out.shape[0] != n || out.shape[1] != lanes)
        problem = "out must be (number of keys, lanes)";
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        PyBuffer_Release(&keys);
        PyBuffer_Release(&table);
        PyBuffer_Release(&out);
        return NULL;
    }

    const uint8_t *key = (const uint8_t *)keys.buf;
    const uint64_t *rows = (const uint64_t *)table.buf;
    uint64_t *dst = (uint64_t *)out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++, key += key_bytes, dst += lanes) {
        uint64_t acc[MAX_LANES] = {0};
        for (Py_ssize_t p = 0; p < key_bytes; p++) {
            uint8_t b = key[p];
            if (b == 0)  /* a zero byte adds nothing: length-tagged keys end in zeros */
                continue;
            const uint64_t *row = rows + ((size_t)p * 256 + b) * (size_t)lanes;
            for (Py_ssize_t l = 0; l < lanes; l++)
                acc[l] ^= row[l];
        }
        memcpy(dst, acc, (size_t)lanes * sizeof(uint64_t));
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&keys);
    PyBuffer_Release(&table);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"hash_into", hash_into, METH_VARARGS,
     "hash_into(keys, table, out): XOR into out[i] the table rows of key i's non-zero bytes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_h3", "The H3 hash of a batch of keys (pynq_kv.hashing).", -1, methods,
};

PyMODINIT_FUNC PyInit__h3(void)
{
    return PyModule_Create(&module);
}
