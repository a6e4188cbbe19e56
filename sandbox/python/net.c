/*
 * execd Python guest: the builtin module _execd_net, the natives of
 * execd_http.py over the net_* imports of sandbox/ABI.md. Included by
 * glue.c, which registers it (PyImport_AppendInittab) before the
 * interpreter starts.
 *
 * Python's calls block on one request: start() hands it to the host,
 * wait() waits for it there (a stop of the host raises the interrupt, as
 * input() does), head() and body() read what came back, close() forgets
 * it. Between two cells nothing is open: the host forgets every request at
 * the end of a run. The imports are declared in sandbox/abi/execd.h.
 */

/* net_stopped: the host stops the cell: its interrupt, as the eval breaker
   raises it. */
static PyObject *net_stopped(void)
{
    _Py_ExecdCheckInterrupt();
    if (PyErr_CheckSignals() == 0)
        PyErr_SetNone(PyExc_KeyboardInterrupt);
    return NULL;
}

/* start(head: str, body: bytes-like | None) -> int */
static PyObject *n_start(PyObject *self, PyObject *args)
{
    const char *head;
    Py_ssize_t hn;
    PyObject *body = Py_None;
    Py_buffer view = {0};
    int32_t r;
    (void)self;
    if (!PyArg_ParseTuple(args, "s#|O:start", &head, &hn, &body))
        return NULL;
    if (body != Py_None && PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    r = host_net_start(head, (uint32_t)hn, view.buf, (uint32_t)(body != Py_None ? view.len : 0));
    if (body != Py_None)
        PyBuffer_Release(&view);
    if (r == -4)
        return net_stopped();
    if (r == -2) {
        PyErr_SetString(PyExc_OSError, "too many requests are open at once (network.max_concurrent_requests)");
        return NULL;
    }
    if (r <= 0) {
        PyErr_Format(PyExc_OSError, "the host refused the request (%d)", (int)r);
        return NULL;
    }
    return PyLong_FromLong(r);
}

/* wait(id, timeout_ms=-1.0) -> bool: finished, or not within the time. */
static PyObject *n_wait(PyObject *self, PyObject *args)
{
    int id;
    double ms = -1;
    int32_t r;
    (void)self;
    if (!PyArg_ParseTuple(args, "i|d:wait", &id, &ms))
        return NULL;
    r = host_net_wait(id, ms);
    if (r == -4)
        return net_stopped();
    if (r < 0) {
        PyErr_SetString(PyExc_OSError, "no such request");
        return NULL;
    }
    return PyBool_FromLong(r > 0);
}

/* head(id) -> str: the JSON head of a finished request. */
static PyObject *n_head(PyObject *self, PyObject *arg)
{
    long id = PyLong_AsLong(arg);
    int32_t n;
    char small[2048], *buf = small;
    PyObject *s;
    (void)self;
    if (id == -1 && PyErr_Occurred())
        return NULL;
    n = host_net_head((int32_t)id, small, sizeof(small));
    if (n < 0) {
        PyErr_SetString(PyExc_OSError, "no such finished request");
        return NULL;
    }
    if ((size_t)n > sizeof(small)) {
        buf = PyMem_Malloc((size_t)n);
        if (!buf)
            return PyErr_NoMemory();
        if (host_net_head((int32_t)id, buf, (uint32_t)n) != n) {
            PyMem_Free(buf);
            PyErr_SetString(PyExc_OSError, "the response's head was lost");
            return NULL;
        }
    }
    s = PyUnicode_DecodeUTF8(buf, n, "replace");
    if (buf != small)
        PyMem_Free(buf);
    return s;
}

/* body(id, length) -> bytes */
static PyObject *n_body(PyObject *self, PyObject *args)
{
    int id;
    Py_ssize_t len, got = 0;
    int32_t r;
    PyObject *b;
    (void)self;
    if (!PyArg_ParseTuple(args, "in:body", &id, &len))
        return NULL;
    if (len < 0) {
        PyErr_SetString(PyExc_ValueError, "bad length");
        return NULL;
    }
    b = PyBytes_FromStringAndSize(NULL, len);
    if (!b)
        return NULL;
    while (got < len) {
        r = host_net_body(id, PyBytes_AS_STRING(b) + got, (uint32_t)(len - got));
        if (r <= 0)
            break;
        got += r;
    }
    if (got != len) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_OSError, "the response's body was lost");
        return NULL;
    }
    return b;
}

/* close(id): aborts the request if it is in flight and forgets it. */
static PyObject *n_close(PyObject *self, PyObject *arg)
{
    long id = PyLong_AsLong(arg);
    (void)self;
    if (id == -1 && PyErr_Occurred())
        return NULL;
    host_net_close((int32_t)id);
    Py_RETURN_NONE;
}

/* env() -> str: the JSON object of the run's secrets (name: placeholder),
   "" when there are none. */
static PyObject *n_env(PyObject *self, PyObject *unused)
{
    char small[512], *buf = small;
    int32_t n;
    PyObject *s;
    (void)self;
    (void)unused;
    n = host_net_env(small, sizeof(small));
    if (n <= 0)
        return PyUnicode_FromStringAndSize("", 0);
    if ((size_t)n > sizeof(small)) {
        buf = PyMem_Malloc((size_t)n);
        if (!buf)
            return PyErr_NoMemory();
        if (host_net_env(buf, (uint32_t)n) != n) {
            PyMem_Free(buf);
            return PyUnicode_FromStringAndSize("", 0);
        }
    }
    s = PyUnicode_DecodeUTF8(buf, n, "replace");
    if (buf != small)
        PyMem_Free(buf);
    return s;
}

static PyMethodDef net_methods[] = {
    {"start", n_start, METH_VARARGS, NULL},
    {"wait", n_wait, METH_VARARGS, NULL},
    {"head", n_head, METH_O, NULL},
    {"body", n_body, METH_VARARGS, NULL},
    {"close", n_close, METH_O, NULL},
    {"env", n_env, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef net_module = {
    PyModuleDef_HEAD_INIT, "_execd_net",
    "The host side of the sandbox's network (sandbox/ABI.md, execd.net_*); execd_http uses it.", -1, net_methods,
};

static PyObject *PyInit__execd_net(void) { return PyModule_Create(&net_module); }
