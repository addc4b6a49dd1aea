/* pynq_kv._slots: a batch's search of the model's table in C (docs/engine.md §5.1, §5.4), for
 * pynq_kv.model.ModelBackend's GET, LOOKUP and SET batches.
 *
 * Every function takes the batch and the table as:
 *   keys    (N, KEY_BYTES) uint8, C-contiguous: the raw keys;
 *   hashes  (N, WAYS) uint32, C-contiguous: H_w of every key (pynq_kv.hashing.hash_keys);
 *   valid   (CAPACITY,) bool / uint8: slot holds a key;
 *   table   (CAPACITY, KEY_BYTES) uint8, C-contiguous: the key of every slot;
 *   rows    ROWS, a power of two; way w's slots are w * ROWS ... w * ROWS + ROWS - 1 and the
 *           stash follows the ways (CAPACITY - WAYS * ROWS slots).
 * A key's candidates are slot w * ROWS + (H_w & (ROWS - 1)) of each way, then every stash slot;
 * flat slot numbers grow in that order.
 *
 * first_copies(keys, hashes, valid, table, rows, out): out[i] ((N,) int64) = the flat slot of
 * key i's first copy, the one with the smallest slot number, which §5.1 prefers; -1 if none.
 *
 * update_copies(keys, hashes, valid, table, values, new_values, rows, existed): the update half
 * of a SET batch. Key by key in batch order, every copy of key i takes new_values[i] ((N,
 * VALUE_BYTES) uint8) in values ((CAPACITY, VALUE_BYTES) uint8, writable), so each copy ends
 * with the value of its key's last occurrence, as the SETs one after another would leave it;
 * existed[i] ((N,) bool, writable) = key i had a copy. Keys with none are placed by the caller.
 *
 * set_tagged(keys, values, hash_rows, valid, table, table_values, rows, ways): the host tier's
 * fill of SETs Redis acknowledged (pynq_kv.tier) in one call from the lists the front-end parsed,
 * with no array built for them: §5.4 key by key in list order, for as long as each key either
 * has copies (every copy takes the value, as update_copies does) or finds a free slot in a way
 * (the lowest such way takes key and value, valid set). It stops at the first key that would go
 * to the stash or is FULL (those need the engine's relocation pass: KVEngine.set_batch) and
 * returns (keys done, of them inserted). keys and values are lists of bytes, each length-tagged
 * here as keys.tagged_rows does (a length byte, the bytes, zeros to KEY_BYTES or VALUE_BYTES) and
 * hashed as _h3.hash_into does with hash_rows (hashing.row_tables: (KEY_BYTES * 256, LANES)
 * uint64; the first `ways` 32-bit halves of a key's lanes are its H_w). Every item is checked
 * before any slot changes: one that is not bytes or does not fit raises and leaves the table as
 * it was.
 *
 * ModelBackend holds the same in numpy (_first_copy; _all_copies and _one_per_slot), used where
 * this module was not built; tests/test_model_fastpath.py checks one against the other. In
 * numpy a small batch costs a few dozen array calls, most of its time, and a large one's
 * candidate compares go through temporaries. */

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

/* The arrays of a call, checked: views[i] of objs[i] with ndims[i] dimensions of sizes[i]-byte
 * items, writable where writable[i]. Returns how many were got (all of them, or fewer after an
 * error, which is set); the caller releases that many. */
static int get_buffers(PyObject **objs, Py_buffer *views, int count, const int *ndims,
                       const Py_ssize_t *sizes, const int *writable, const char **names)
{
    int got = 0;
    for (; got < count; got++)
        if (get_buffer(objs[got], &views[got], ndims[got], sizes[got], writable[got], names[got]) < 0)
            break;
    return got;
}

/* The shapes every search needs: keys (N, KEY_BYTES), hashes (N, WAYS), valid (CAPACITY,),
 * table (CAPACITY, KEY_BYTES), rows. NULL if they fit, else what is wrong. */
static const char *check_table(Py_buffer *keys, Py_buffer *hashes, Py_buffer *valid,
                               Py_buffer *table, Py_ssize_t rows)
{
    if (hashes->shape[0] != keys->shape[0])
        return "keys and hashes must have a row per key";
    if (table->shape[0] != valid->shape[0] || table->shape[1] != keys->shape[1])
        return "table must have a row of KEY_BYTES per slot of valid";
    if (rows < 1 || (rows & (rows - 1)) != 0)
        return "rows must be a power of two";
    if (hashes->shape[1] < 1 || hashes->shape[1] > valid->shape[0] / rows)
        return "the ways do not fit the table";
    return NULL;
}

/* The table as the searches read it (check_table has passed). */
struct table {
    const uint8_t *valid, *keys;
    Py_ssize_t key_bytes, ways, rows, capacity;
};

static struct table table_of(Py_buffer *hashes, Py_buffer *valid, Py_buffer *table,
                             Py_ssize_t rows)
{
    struct table t = {(const uint8_t *)valid->buf, (const uint8_t *)table->buf, table->shape[1],
                      hashes->shape[1], rows, valid->shape[0]};
    return t;
}

/* The candidate slot of way w for a key with these WAYS hashes. */
static inline Py_ssize_t way_slot(const struct table *t, const uint32_t *hash, Py_ssize_t w)
{
    return w * t->rows + (Py_ssize_t)(hash[w] & (uint32_t)(t->rows - 1));
}

/* The next slot after `after` (-1: from the start), in candidate order, that holds key; -1 if
 * none does. hash: the key's WAYS hashes. */
static Py_ssize_t next_copy(const struct table *t, const uint8_t *key, const uint32_t *hash,
                            Py_ssize_t after)
{
    const Py_ssize_t way_slots = t->ways * t->rows;
    Py_ssize_t w = after < 0 ? 0 : after < way_slots ? after / t->rows + 1 : t->ways;
    for (; w < t->ways; w++) {
        Py_ssize_t slot = way_slot(t, hash, w);
        if (t->valid[slot] && memcmp(t->keys + slot * t->key_bytes, key, (size_t)t->key_bytes) == 0)
            return slot;
    }
    for (Py_ssize_t slot = after < way_slots ? way_slots : after + 1; slot < t->capacity; slot++)
        if (t->valid[slot] && memcmp(t->keys + slot * t->key_bytes, key, (size_t)t->key_bytes) == 0)
            return slot;
    return -1;
}

static void release(Py_buffer *views, int got)
{
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
}

static PyObject *finish(Py_buffer *views, int got, int count, const char *problem)
{
    release(views, got);
    if (got < count)
        return NULL;
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    Py_RETURN_NONE;
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
    static const int writable[5] = {0, 0, 0, 0, 1};
    static const char *names[5] = {"keys", "hashes", "valid", "table", "out"};
    Py_buffer views[5];
    int got = get_buffers(objs, views, 5, ndims, sizes, writable, names);
    if (got < 5)
        return finish(views, got, 5, NULL);
    const char *problem = check_table(&views[0], &views[1], &views[2], &views[3], rows);
    if (problem == NULL && views[4].shape[0] != views[0].shape[0])
        problem = "out must have a row per key";
    if (problem != NULL)
        return finish(views, got, 5, problem);

    const struct table t = table_of(&views[1], &views[2], &views[3], rows);
    const Py_ssize_t n = views[0].shape[0];
    const uint8_t *key = (const uint8_t *)views[0].buf;
    const uint32_t *hash = (const uint32_t *)views[1].buf;
    int64_t *dst = (int64_t *)views[4].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++, key += t.key_bytes, hash += t.ways)
        dst[i] = next_copy(&t, key, hash, -1);
    Py_END_ALLOW_THREADS
    return finish(views, got, 5, NULL);
}

static PyObject *update_copies(PyObject *self, PyObject *args)
{
    PyObject *objs[7];
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(args, "OOOOOOnO:update_copies", &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &objs[5], &rows, &objs[6]))
        return NULL;
    static const int ndims[7] = {2, 2, 1, 2, 2, 2, 1};
    static const Py_ssize_t sizes[7] = {1, 4, 1, 1, 1, 1, 1};
    static const int writable[7] = {0, 0, 0, 0, 1, 0, 1};
    static const char *names[7] = {"keys", "hashes", "valid", "table", "values", "new_values",
                                   "existed"};
    Py_buffer views[7];
    int got = get_buffers(objs, views, 7, ndims, sizes, writable, names);
    if (got < 7)
        return finish(views, got, 7, NULL);
    const char *problem = check_table(&views[0], &views[1], &views[2], &views[3], rows);
    if (problem == NULL && (views[4].shape[0] != views[2].shape[0]
                            || views[5].shape[0] != views[0].shape[0]
                            || views[5].shape[1] != views[4].shape[1]))
        problem = "values must have a row per slot, new_values one of the same width per key";
    if (problem == NULL && views[6].shape[0] != views[0].shape[0])
        problem = "existed must have a row per key";
    if (problem != NULL)
        return finish(views, got, 7, problem);

    const struct table t = table_of(&views[1], &views[2], &views[3], rows);
    const Py_ssize_t n = views[0].shape[0], value_bytes = views[4].shape[1];
    const uint8_t *key = (const uint8_t *)views[0].buf;
    const uint32_t *hash = (const uint32_t *)views[1].buf;
    uint8_t *values = (uint8_t *)views[4].buf;
    const uint8_t *value = (const uint8_t *)views[5].buf;
    uint8_t *existed = (uint8_t *)views[6].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++, key += t.key_bytes, hash += t.ways, value += value_bytes) {
        Py_ssize_t slot = next_copy(&t, key, hash, -1);
        existed[i] = slot >= 0;
        for (; slot >= 0; slot = next_copy(&t, key, hash, slot))
            memcpy(values + slot * value_bytes, value, (size_t)value_bytes);
    }
    Py_END_ALLOW_THREADS
    return finish(views, got, 7, NULL);
}

#define MAX_LANES 16

/* Whether a list item can be length-tagged into width-byte rows: -1 with an error set if it is
 * not bytes or does not fit. */
static int fits(PyObject *item, Py_ssize_t width, const char *what)
{
    if (!PyBytes_Check(item)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes, not %.100s", what, Py_TYPE(item)->tp_name);
        return -1;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(item);
    if (size > width - 1 || size > 255) {
        PyErr_Format(PyExc_ValueError, "a %s of %zd bytes does not fit %zd-byte rows", what, size,
                     width);
        return -1;
    }
    return 0;
}

/* The length-tagged row of an item fits() accepted (keys.tagged_rows). */
static void tagged(PyObject *item, uint8_t *row, Py_ssize_t width)
{
    Py_ssize_t size = PyBytes_GET_SIZE(item);
    row[0] = (uint8_t)size;
    memcpy(row + 1, PyBytes_AS_STRING(item), (size_t)size);
    memset(row + 1 + size, 0, (size_t)(width - 1 - size));
}

static PyObject *set_tagged(PyObject *self, PyObject *args)
{
    PyObject *keys, *values, *objs[4];
    Py_ssize_t rows, ways;
    if (!PyArg_ParseTuple(args, "O!O!OOOOnn:set_tagged", &PyList_Type, &keys, &PyList_Type,
                          &values, &objs[0], &objs[1], &objs[2], &objs[3], &rows, &ways))
        return NULL;
    static const int ndims[4] = {2, 1, 2, 2};
    static const Py_ssize_t sizes[4] = {8, 1, 1, 1};
    static const int writable[4] = {0, 1, 1, 1};
    static const char *names[4] = {"hash_rows", "valid", "table", "table_values"};
    Py_buffer views[4];
    int got = get_buffers(objs, views, 4, ndims, sizes, writable, names);
    if (got < 4)
        return finish(views, got, 4, NULL);
    const Py_ssize_t n = PyList_GET_SIZE(keys), capacity = views[1].shape[0];
    const Py_ssize_t key_bytes = views[2].shape[1], value_bytes = views[3].shape[1];
    const Py_ssize_t lanes = views[0].shape[1];
    const char *problem = NULL;
    if (PyList_GET_SIZE(values) != n)
        problem = "keys and values must be as many";
    else if (views[2].shape[0] != capacity || views[3].shape[0] != capacity)
        problem = "table and table_values must have a row per slot of valid";
    else if (views[0].shape[0] != key_bytes * 256 || lanes < 1 || lanes > MAX_LANES)
        problem = "hash_rows must be (KEY_BYTES * 256, 1 to 16 lanes)";
    else if (rows < 1 || (rows & (rows - 1)) != 0)
        problem = "rows must be a power of two";
    else if (ways < 1 || ways > 2 * lanes || ways > capacity / rows)
        problem = "the ways do not fit the hash lanes or the table";
    if (problem != NULL)
        return finish(views, got, 4, problem);

    struct table t = {(const uint8_t *)views[1].buf, (const uint8_t *)views[2].buf, key_bytes,
                      ways, rows, capacity};
    uint8_t *valid = (uint8_t *)views[1].buf, *table = (uint8_t *)views[2].buf;
    const uint64_t *hash_rows = (const uint64_t *)views[0].buf;
    uint8_t *table_values = (uint8_t *)views[3].buf;
    for (Py_ssize_t i = 0; i < n; i++)  /* every item first: a bad one changes no slot */
        if (fits(PyList_GET_ITEM(keys, i), key_bytes, "key") < 0
                || fits(PyList_GET_ITEM(values, i), value_bytes, "value") < 0) {
            release(views, got);
            return NULL;
        }
    uint8_t *key = PyMem_Malloc((size_t)(key_bytes + value_bytes));
    if (key == NULL) {
        release(views, got);
        return PyErr_NoMemory();
    }
    uint8_t *value = key + key_bytes;
    Py_ssize_t done = 0, inserted = 0;
    for (; done < n; done++) {
        tagged(PyList_GET_ITEM(keys, done), key, key_bytes);
        tagged(PyList_GET_ITEM(values, done), value, value_bytes);
        uint64_t lane[MAX_LANES] = {0};
        for (Py_ssize_t p = 0; p < key_bytes; p++) {
            if (key[p] == 0)  /* a zero byte adds nothing (H3 is linear) */
                continue;
            const uint64_t *row = hash_rows + ((size_t)p * 256 + key[p]) * (size_t)lanes;
            for (Py_ssize_t l = 0; l < lanes; l++)
                lane[l] ^= row[l];
        }
        uint32_t hash[2 * MAX_LANES];
        memcpy(hash, lane, sizeof(lane));
        Py_ssize_t slot = next_copy(&t, key, hash, -1);
        if (slot >= 0) {  /* §5.4 step 1: every copy takes the value */
            for (; slot >= 0; slot = next_copy(&t, key, hash, slot))
                memcpy(table_values + slot * value_bytes, value, (size_t)value_bytes);
            continue;
        }
        for (Py_ssize_t w = 0; w < ways && slot < 0; w++) {  /* step 2: the lowest free way */
            Py_ssize_t candidate = way_slot(&t, hash, w);
            if (!valid[candidate])
                slot = candidate;
        }
        if (slot < 0)  /* steps 3-4 (the stash, FULL): the caller's */
            break;
        memcpy(table + slot * key_bytes, key, (size_t)key_bytes);
        memcpy(table_values + slot * value_bytes, value, (size_t)value_bytes);
        valid[slot] = 1;
        inserted++;
    }
    PyMem_Free(key);
    release(views, got);
    return Py_BuildValue("nn", done, inserted);
}

static PyMethodDef methods[] = {
    {"first_copies", first_copies, METH_VARARGS,
     "first_copies(keys, hashes, valid, table, rows, out): out[i] = flat slot of key i's first "
     "copy, -1 if none."},
    {"update_copies", update_copies, METH_VARARGS,
     "update_copies(keys, hashes, valid, table, values, new_values, rows, existed): every copy "
     "of key i takes new_values[i], in key order; existed[i] = key i had a copy."},
    {"set_tagged", set_tagged, METH_VARARGS,
     "set_tagged(keys, values, hash_rows, valid, table, table_values, rows, ways): SET of "
     "byte-string keys and values, length-tagged, while each updates its copies or inserts into "
     "a free way; returns (done, inserted)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_slots", "The model's table searches and SET updates in C (pynq_kv.model).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__slots(void)
{
    return PyModule_Create(&module);
}
