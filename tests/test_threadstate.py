"""Vendor threads that call back into Python keep their Python thread state.

The foreign thread is made by a few lines of C compiled for the test (skipped without a C
compiler): a thread Python never started, calling a ctypes callback in a loop, as CUPTI's
launch callbacks run on autograd's backward thread.
"""
import ctypes
import shutil
import subprocess
import threading

import pytest

from proton_ctypes.backends.threadstate import keep_thread_state

FOREIGN_THREAD_C = r"""
#include <pthread.h>
typedef void (*cb_t)(int);
static cb_t g_cb; static int g_n;
static void *run(void *arg) { for (int i = 0; i < g_n; i++) g_cb(i); return 0; }
void call_from_thread(cb_t cb, int n) { pthread_t t; g_cb = cb; g_n = n; pthread_create(&t, 0, run, 0); pthread_join(t, 0); }
"""
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int)


@pytest.fixture(scope="module")
def foreign(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to make a thread Python did not start")
    d = tmp_path_factory.mktemp("foreign")
    (d / "ft.c").write_text(FOREIGN_THREAD_C)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(d / "libft.so"), str(d / "ft.c"), "-lpthread"],
                   check=True)
    lib = ctypes.CDLL(str(d / "libft.so"))
    lib.call_from_thread.argtypes = [CALLBACK, ctypes.c_int]
    return lib.call_from_thread


def _thread_local_survives(call_from_thread, keep: bool) -> list:
    local = threading.local()
    seen = []

    def callback(i):
        if keep:
            keep_thread_state()
        seen.append(getattr(local, "mark", None))
        local.mark = i
    cb = CALLBACK(callback)
    call_from_thread(cb, 4)
    return seen


def test_a_foreign_thread_loses_its_state_after_each_callback_without_it(foreign):
    assert _thread_local_survives(foreign, keep=False) == [None, None, None, None]


def test_keep_thread_state_keeps_the_foreign_threads_state_across_callbacks(foreign):
    assert _thread_local_survives(foreign, keep=True) == [None, 0, 1, 2]


def test_keep_thread_state_on_a_python_thread_changes_nothing():
    out = []
    t = threading.Thread(target=lambda: (keep_thread_state(), keep_thread_state(), out.append(1)))
    t.start()
    t.join()
    assert out == [1] and not t.is_alive()
