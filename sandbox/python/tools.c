/*
 * execd Python guest: the builtin module _execd_tools, the native of
 * execd_tools.py (code mode: calls of the tools of the operator's upstream
 * MCP servers) over execd.tool_call of sandbox/ABI.md. Included by glue.c
 * after net.c, which registers it (PyImport_AppendInittab) before the
 * interpreter starts.
 *
 * A call is one more entry of the run's network table: execd_tools.py
 * waits for it, reads and forgets it with _execd_net's wait, head, body
 * and close, as execd_http.py does a request.
 */

/* call(request: str) -> int: the call's id. request is the JSON of
   tool_call; the host's stop raises the interrupt. */
static PyObject *t_call(PyObject *self, PyObject *args)
{
    const char *req;
    Py_ssize_t n;
    int32_t r;
    (void)self;
    if (!PyArg_ParseTuple(args, "s#:call", &req, &n))
        return NULL;
    r = host_tool_call(req, (uint32_t)n);
    if (r == -4)
        return net_stopped();
    if (r <= 0) {
        PyErr_Format(PyExc_OSError, "the host refused the call (%d)", (int)r);
        return NULL;
    }
    return PyLong_FromLong(r);
}

static PyMethodDef tools_methods[] = {
    {"call", t_call, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef tools_module = {
    PyModuleDef_HEAD_INIT, "_execd_tools", "The natives of execd_tools (code mode).", -1, tools_methods,
};

static PyObject *PyInit__execd_tools(void) { return PyModule_Create(&tools_module); }
