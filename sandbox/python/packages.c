/*
 * execd Python guest: the native of execd_packages.py, over the
 * execd.packages import of sandbox/ABI.md. Included by glue.c (one
 * translation unit) into the execd module: execd._packages(request) sends
 * a JSON request to the host and returns its JSON answer. The host's stop
 * while it waits (a long download) is the interrupt, KeyboardInterrupt.
 */

static PyObject *m_packages(PyObject *self, PyObject *arg)
{
    Py_ssize_t n;
    const char *req;
    char small[4096], *buf = small;
    int32_t r;
    PyObject *ret;
    (void)self;
    req = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!req)
        return NULL;
    r = host_packages(req, (uint32_t)n, small, sizeof(small));
    if (r == -4) { /* the host stops the cell: its interrupt */
        _Py_ExecdCheckInterrupt();
        if (PyErr_CheckSignals() == 0)
            PyErr_SetNone(PyExc_KeyboardInterrupt);
        return NULL;
    }
    if (r < 0) {
        PyErr_Format(PyExc_RuntimeError, "packages: the host gave no answer (%d)", (int)r);
        return NULL;
    }
    if ((size_t)r > sizeof(small)) {
        buf = PyMem_Malloc((size_t)r);
        if (!buf)
            return PyErr_NoMemory();
        if (host_packages_answer(buf, (uint32_t)r) != r) {
            PyMem_Free(buf);
            PyErr_SetString(PyExc_RuntimeError, "packages: the host's answer was lost");
            return NULL;
        }
    }
    ret = PyUnicode_DecodeUTF8(buf, r, "replace");
    if (buf != small)
        PyMem_Free(buf);
    return ret;
}
