"""The ctypes mirrors of the C ABI's options structs (specula_train/sdk.py) are as large as the library's: given
room for more, each *_init_sized() writes the library's whole struct and says its size in struct_size. (Before 0.17
the *_init functions always wrote the library's whole struct, so a mirror that lacked a field the library appended
was written past: it was, with the 0.14 speculative options. A short mirror now gets no overflow but would hide the
fields it lacks; this test keeps them equal.)"""
import ctypes as C

import pytest

from specula_train import sdk


@pytest.mark.parametrize("init, mirror", [
    ("specula_model_options_init_sized", sdk._ModelOptions),
    ("specula_session_options_init_sized", sdk._SessionOptions),
    ("specula_synthetic_options_init_sized", sdk._SyntheticOptions),
    ("specula_speculative_options_init_sized", sdk._SpecOptions),
])
def test_each_options_mirror_has_the_size_the_library_writes(init, mirror):
    try:
        # A handle of its own: sdk.lib()'s functions carry typed signatures this test must not change.
        L = C.CDLL(sdk.find_library())
    except Exception as e:  # found through SPECULA_LIB or the build tree (sdk.find_library)
        pytest.skip(f"libspecula is not available: {e}")
    buf = (C.c_uint8 * 4096)()  # room for any struct: init writes all of its own
    fn = getattr(L, init)
    fn.restype = None
    fn.argtypes = [C.c_void_p, C.c_size_t]
    fn(C.cast(buf, C.c_void_p), len(buf))
    written = C.c_uint32.from_buffer(buf).value
    assert written == C.sizeof(mirror), f"{init} writes {written} bytes; {mirror.__name__} has {C.sizeof(mirror)}"
