// tests/sanitizer/python_main.cc — the Python interpreter as an executable of
// a sanitizer build.
//
// Contract: behaves as `python3` (same arguments, same libpython, same
// prefix and site-packages), but links the build's sanitizer runtime, so an
// extension built with that sanitizer can be imported and its threads are
// checked. Why a launcher: the ThreadSanitizer runtime must be in the main
// executable; preloading it (LD_PRELOAD) into the system python crashes at
// start-up with clang 14, even for /bin/true. CPython itself is not
// instrumented, so only the extension's memory accesses are checked; the
// GIL's locks and condition variables go through the runtime's interceptors,
// so hand-overs between Python threads are seen as synchronization.
// Built by CMakeLists.txt with REMAT_SANITIZE and REMAT_BUILD_PYTHON_MODULE;
// run by tools/test.sh's "tsan Python threads" stage.
#include <Python.h>

int main(int argc, char** argv) { return Py_BytesMain(argc, argv); }
