/* pynq_kv._slots: each key's first copy in the model's table (docs/engine.md §5.1), in C, for
 * pynq_kv.model.ModelBackend's GET and LOOKUP batches.
 *
 * first_copies(keys, hashes, valid, table, rows, out) writes, for every key i, the flat slot of
 * its first copy into out[i], or -1 where the table holds none:
 *   keys    (N, KEY_BYTES) uint8, C-contiguous: the raw keys;
 *   hashes  (N, WAYS) uint32, C-contiguous: H_w of every key (pynq_kv.hashing.hash_keys);
 *   valid   (CAPACITY,) bool / uint8: slot holds a key;
 *   table   (CAPACITY, KEY_BYTES) uint8, C-contiguous: the key of every slot;
 *   rows    ROWS, a power of two; way w's slots are w * ROWS ... w * ROWS + ROWS - 1 and the
 *           stash follows the ways (CAPACITY - WAYS * ROWS slots);
 *   out     (N,) int64, writable.
 * A key's candidates are slot w * ROWS + (H_w & (ROWS - 1)) of each way, then every stash slot.
 * Flat slot numbers grow in that order, so the first copy found is the one with the smallest
 * slot number, which §5.1 prefers. ModelBackend._first_copy holds the same search in numpy,
 * used where this module was not built; tests/test_model_slots.py checks one against the
 * other. In numpy the search costs a few dozen array calls a batch, most of a small batch's
 * time, and the candidate compares through temporaries, about a third of a large one's. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int get_buffer(PyObject *obj, Py_buffer *view, int ndim, Py_ssize_t itemsize, int writable,
                      const char *what)
{
    /* item sizes are checked, not formats: the one caller (model.ModelBackend) builds them */
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    if (view->ndim != ndim || view->itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected a %d-D array of %zd-byte items", what, ndim,
                     itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *first_copies(PyObject *self, PyObject *args)
{
    PyObject *objs[5];
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(args, "OOOOnO:first_copies", &objs[0], &objs[1], &objs[2], &objs[3],
                          &rows, &objs[4]))
        return NULL;
    static const int ndims[5] = {2, 2, 1, 2, 1};
    static const Py_ssize_t sizes[5] = {1, 4, 1, 1, 8};
    static const char *names[5] = {"keys", "hashes", "valid", "table", "out"};
    Py_buffer views[5];
    int got = 0;
    for (; got < 5; got++)
        if (get_buffer(objs[got], &views[got], ndims[got], sizes[got], got == 4, names[got]) < 0)
            break;
    const char *problem = NULL;
    Py_ssize_t n = 0, key_bytes = 0, ways = 0, capacity = 0;
    if (got == 5) {
        n = views[0].shape[0];
        key_bytes = views[0].shape[1];
        ways = views[1].shape[1];
        capacity = views[2].shape[0];
        if (views[1].shape[0] != n || views[4].shape[0] != n)
            problem = "keys, hashes and out must have a row per key";
        else if (views[3].shape[0] != capacity || views[3].shape[1] != key_bytes)
            problem = "table must have a row of KEY_BYTES per slot of valid";
        else if (rows < 1 || (rows & (rows - 1)) != 0)
            problem = "rows must be a power of two";
        else if (ways < 1 || ways > capacity / rows)
            problem = "the ways do not fit the table";
    }
    if (got == 5 && problem == NULL) {
        const uint8_t *key = (const uint8_t *)views[0].buf;
        const uint32_t *hash = (const uint32_t *)views[1].buf;
        const uint8_t *valid = (const uint8_t *)views[2].buf;
        const uint8_t *slots = (const uint8_t *)views[3].buf;
        int64_t *dst = (int64_t *)views[4].buf;
        const Py_ssize_t way_slots = ways * rows;
        const uint32_t mask = (uint32_t)(rows - 1);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++, key += key_bytes, hash += ways) {
            int64_t found = -1;
            for (Py_ssize_t w = 0; w < ways && found < 0; w++) {
                Py_ssize_t slot = w * rows + (Py_ssize_t)(hash[w] & mask);
                if (valid[slot] && memcmp(slots + slot * key_bytes, key, (size_t)key_bytes) == 0)
                    found = slot;
            }
            for (Py_ssize_t slot = way_slots; slot < capacity && found < 0; slot++)
                if (valid[slot] && memcmp(slots + slot * key_bytes, key, (size_t)key_bytes) == 0)
                    found = slot;
            dst[i] = found;
        }
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    if (got < 5)
        return NULL;
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"first_copies", first_copies, METH_VARARGS,
     "first_copies(keys, hashes, valid, table, rows, out): out[i] = flat slot of key i's first "
     "copy, -1 if none."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_slots", "Each key's first copy in the model's table (pynq_kv.model).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__slots(void)
{
    return PyModule_Create(&module);
}
