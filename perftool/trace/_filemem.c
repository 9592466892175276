/* perftool.trace._filemem: numpy arrays kept in files rather than in the process's own memory.
 *
 * use_files(directory, threshold, kept) makes numpy, in the calling thread's context (numpy's allocator is a context
 * variable, NEP 49) and every context copied from it later, give each array of `threshold` bytes or more a
 * mapping of an unlinked file in `directory` (MAP_SHARED): its pages are the page cache's, which the kernel
 * writes back and drops when memory is short, where an array's anonymous memory could only be swapped. Smaller
 * arrays come from the C heap as before. A file that cannot be made (no room on the disk, no such directory)
 * leaves that array on the heap: the result is the same, only the memory differs. Disk blocks are reserved when
 * the file is made (posix_fallocate), so a disk that fills later never faults a write to a mapped page. Freed
 * files of up to `kept` bytes together are kept for the next arrays of their size, which then cost no new file
 * and no page faults (numpy makes and frees arrays of a trace's length again and again).
 *
 * A process forked while arrays are in files shares them with its parent, as MAP_SHARED does: what either writes
 * into an array made before the fork, the other sees. perftool's forked processes (the decoding workers) make
 * arrays of their own and write into none they inherit.
 *
 * The handler's layout and the slot of PyDataMem_SetHandler in numpy's C-API table are numpy's stable ABI
 * (numpy 1.22 and later); they are declared here so that building the module needs no numpy headers.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE /* O_TMPFILE */
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr, size_t size);
} DataAllocator; /* numpy's PyDataMemAllocator */

typedef struct {
    char name[127];
    uint8_t version;
    DataAllocator allocator;
} DataHandler; /* numpy's PyDataMem_Handler, version 1 */

#define SET_HANDLER_SLOT 304 /* PyDataMem_SetHandler in numpy's PyArray_API table */

enum { ON_HEAP = 1, IN_FILE = 2 };

typedef struct {
    size_t kind;   /* ON_HEAP or IN_FILE */
    size_t length; /* bytes held, this header included */
} Header;          /* before every block: 16 bytes, so the data keeps malloc's alignment */

#define CACHE_SLOTS 8 /* files freed and kept for the next arrays of about their size */

static char directory[PATH_MAX];
static size_t threshold = SIZE_MAX;
static size_t cache_limit; /* bytes the kept files may hold together */

static struct {
    Header *blocks[CACHE_SLOTS]; /* oldest first */
    int count;
    size_t bytes;
    pthread_mutex_t lock;
} cache = {{NULL}, 0, 0, PTHREAD_MUTEX_INITIALIZER};

static inline void *data_of(Header *header) { return (char *)header + sizeof(Header); }
static inline Header *header_of(void *data) { return (Header *)((char *)data - sizeof(Header)); }

static int unlinked_file(void) {
    int fd = open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
    char path[PATH_MAX + 32]; /* a file system without O_TMPFILE: a named file, unlinked at once */
    if (snprintf(path, sizeof path, "%s/perftool-array-XXXXXX", directory) >= (int)sizeof path) return -1;
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) unlink(path);
    return fd;
}

static Header *in_file(size_t length) {
    int fd = unlinked_file();
    if (fd < 0) return NULL;
    void *block = MAP_FAILED;
    if (posix_fallocate(fd, 0, (off_t)length) == 0)
        block = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the file; unmapping it frees its blocks */
    return block == MAP_FAILED ? NULL : (Header *)block;
}

/* A kept file of at least `length` bytes and at most a quarter more, taken out of the cache; NULL where none is. */
static Header *kept_file(size_t length) {
    pthread_mutex_lock(&cache.lock);
    int best = -1;
    for (int i = 0; i < cache.count; i++) {
        size_t held = cache.blocks[i]->length;
        if (held >= length && held - length <= length / 4 && (best < 0 || held < cache.blocks[best]->length)) best = i;
    }
    Header *header = NULL;
    if (best >= 0) {
        header = cache.blocks[best];
        cache.bytes -= header->length;
        memmove(&cache.blocks[best], &cache.blocks[best + 1], (size_t)(cache.count - best - 1) * sizeof(Header *));
        cache.count--;
    }
    pthread_mutex_unlock(&cache.lock);
    return header;
}

/* Keeps a freed file for reuse, its pages still written (the kernel writes them back only if memory runs short): the
 * next array of its size then costs no new file and no page faults. The oldest kept go first to make room. */
static void keep_or_unmap(Header *header) {
    Header *unmapped[CACHE_SLOTS + 1];
    int dropped = 0;
    pthread_mutex_lock(&cache.lock);
    if (header->length > cache_limit) {
        unmapped[dropped++] = header;
    } else {
        while (cache.count == CACHE_SLOTS || cache.bytes + header->length > cache_limit) {
            unmapped[dropped++] = cache.blocks[0];
            cache.bytes -= cache.blocks[0]->length;
            memmove(&cache.blocks[0], &cache.blocks[1], (size_t)(--cache.count) * sizeof(Header *));
        }
        cache.blocks[cache.count++] = header;
        cache.bytes += header->length;
    }
    pthread_mutex_unlock(&cache.lock);
    for (int i = 0; i < dropped; i++) munmap(unmapped[i], unmapped[i]->length);
}

static void *allocate(size_t size, int zeroed) {
    if (size > SIZE_MAX - sizeof(Header)) return NULL;
    size_t length = size + sizeof(Header);
    Header *header = NULL;
    if (size >= threshold) {
        header = kept_file(length);
        if (!header) {
            header = in_file(length); /* a new file reads as zeros */
            if (header) header->length = length;
        } else if (zeroed) {
            memset(data_of(header), 0, size);
        }
    }
    if (header) {
        header->kind = IN_FILE;
    } else {
        header = zeroed ? calloc(1, length) : malloc(length);
        if (!header) return NULL;
        header->kind = ON_HEAP;
        header->length = length;
    }
    return data_of(header);
}

static void release(void *data) {
    Header *header = header_of(data);
    if (header->kind == IN_FILE)
        keep_or_unmap(header);
    else
        free(header);
}

static void *fm_malloc(void *ctx, size_t size) {
    (void)ctx;
    return allocate(size, 0);
}

static void *fm_calloc(void *ctx, size_t nelem, size_t elsize) {
    (void)ctx;
    if (elsize && nelem > SIZE_MAX / elsize) return NULL;
    return allocate(nelem * elsize, 1);
}

static void *fm_realloc(void *ctx, void *data, size_t new_size) {
    (void)ctx;
    if (!data) return allocate(new_size, 0);
    Header *header = header_of(data);
    if (header->kind == ON_HEAP && new_size < threshold && new_size <= SIZE_MAX - sizeof(Header)) {
        Header *moved = realloc(header, new_size + sizeof(Header));
        if (!moved) return NULL;
        moved->length = new_size + sizeof(Header);
        return data_of(moved);
    }
    void *copy = allocate(new_size, 0);
    if (!copy) return NULL;
    size_t old_size = header->length - sizeof(Header);
    memcpy(copy, data, old_size < new_size ? old_size : new_size);
    release(data);
    return copy;
}

static void fm_free(void *ctx, void *data, size_t size) {
    (void)ctx;
    (void)size;
    if (data) release(data);
}

static DataHandler handler = {
    "perftool_file_backed", 1, {NULL, fm_malloc, fm_calloc, fm_realloc, fm_free},
};

static PyObject *set_handler(PyObject *capsule) {
    PyObject *multiarray = PyImport_ImportModule("numpy._core._multiarray_umath"); /* numpy 2 */
    if (!multiarray) {
        PyErr_Clear();
        multiarray = PyImport_ImportModule("numpy.core._multiarray_umath"); /* numpy 1 */
        if (!multiarray) return NULL;
    }
    PyObject *api = PyObject_GetAttrString(multiarray, "_ARRAY_API");
    Py_DECREF(multiarray);
    if (!api) return NULL;
    void **table = PyCapsule_GetPointer(api, NULL);
    Py_DECREF(api);
    if (!table) return NULL;
    PyObject *(*set)(PyObject *) = (PyObject * (*)(PyObject *)) table[SET_HANDLER_SLOT];
    return set(capsule);
}

static PyObject *use_files(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    Py_ssize_t path_length, min_size, kept_bytes;
    if (!PyArg_ParseTuple(args, "s#nn:use_files", &path, &path_length, &min_size, &kept_bytes)) return NULL;
    if (path_length >= (Py_ssize_t)sizeof directory) {
        PyErr_SetString(PyExc_ValueError, "directory path too long");
        return NULL;
    }
    if (min_size < 1 || kept_bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "threshold must be at least one byte, kept bytes none or more");
        return NULL;
    }
    memcpy(directory, path, (size_t)path_length + 1);
    threshold = (size_t)min_size;
    cache_limit = (size_t)kept_bytes;
    PyObject *capsule = PyCapsule_New(&handler, "mem_handler", NULL);
    if (!capsule) return NULL;
    PyObject *previous = set_handler(capsule);
    Py_DECREF(capsule);
    if (!previous) return NULL;
    Py_DECREF(previous);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"use_files", use_files, METH_VARARGS,
     "use_files(directory, threshold, kept): numpy arrays of threshold bytes or more, in this context, in unlinked "
     "files in directory; freed files of up to kept bytes together are kept for the next arrays of their size."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_filemem", "numpy arrays kept in files rather than in the process's own memory.", -1,
    methods, NULL, NULL, NULL, NULL,
};

/* Around a fork: the lock is taken, so that the child's copy is not held by a thread it does not have, and the child
 * forgets the kept files, which it shares with this process (MAP_SHARED): it would otherwise reuse one this process
 * also reuses. */
static void before_fork(void) { pthread_mutex_lock(&cache.lock); }
static void after_fork_in_parent(void) { pthread_mutex_unlock(&cache.lock); }
static void after_fork_in_child(void) {
    cache.count = 0;
    cache.bytes = 0;
    pthread_mutex_unlock(&cache.lock);
}

PyMODINIT_FUNC PyInit__filemem(void) {
    if (pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) != 0) {
        PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
        return NULL;
    }
    return PyModule_Create(&module);
}
