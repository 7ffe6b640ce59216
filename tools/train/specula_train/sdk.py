"""ctypes access to the Specula shared library (libspecula.so), for what the trainer must take from the runtime
itself rather than re-implement: tokenization (so training ids are the runtime's ids exactly), the draft file's
binding to its target (tokenizer fingerprint, via specula_draft_write_random), and the runtime's own target and
draft logits (parity tests).

The library is found through $SPECULA_LIB, else build/lib*/libspecula.so* under the repository root.
"""
from __future__ import annotations

import ctypes as C
import glob
import os
from typing import List, Sequence

import numpy as np

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class SpeculaError(RuntimeError):
    def __init__(self, status: str, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


def find_library() -> str:
    env = os.environ.get("SPECULA_LIB")
    if env:
        return env
    for pattern in ("build/lib/libspecula.so", "build/lib/libspecula.so.*", "build/libspecula.so", "build*/lib/libspecula.so"):
        hits = sorted(glob.glob(os.path.join(REPO_ROOT, pattern)))
        if hits:
            return hits[0]
    raise FileNotFoundError("libspecula.so not found: build the SDK first (cmake -B build && cmake --build build) "
                            "or set SPECULA_LIB")


class _ModelOptions(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("use_mmap", C.c_int32), ("progress", C.c_void_p),
                ("progress_user_data", C.c_void_p), ("vocab_only", C.c_int32)]


class _SessionOptions(C.Structure):
    # Every field of specula_session_options (tests/test_sdk_structs.py checks the size against the library's).
    _fields_ = [("struct_size", C.c_uint32), ("n_ctx", C.c_int32), ("n_threads", C.c_int32), ("n_batch", C.c_int32),
                ("backend", C.c_int32), ("device", C.c_int32), ("allow_fallback", C.c_int32), ("kv_type", C.c_int32),
                ("context_policy", C.c_int32), ("n_keep", C.c_int32), ("n_discard", C.c_int32)]


KV_F32 = 1  # specula_kv_type: SPECULA_KV_F32


class _SyntheticOptions(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("weight_type", C.c_char_p), ("seed", C.c_uint64), ("n_layer", C.c_int32),
                ("progress", C.c_void_p), ("progress_user_data", C.c_void_p)]


def write_synthetic_model(shape: str, vocab_path: str, path: str, weight_type: str = "f32", seed: int = 1, n_layer: int = 0):
    """A random-weight GGUF of a built-in shape (specula_synthetic_model_write), with vocab_path's tokenizer."""
    L, err = lib(), C.c_void_p()
    opts = _SyntheticOptions()
    L.specula_synthetic_options_init_sized(C.byref(opts), C.sizeof(opts))
    opts.weight_type, opts.seed, opts.n_layer = weight_type.encode(), seed, n_layer
    _check(L.specula_synthetic_model_write(shape.encode(), vocab_path.encode(), path.encode(), C.byref(opts), C.byref(err)), err)


class _SpecOptions(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("draft", C.c_void_p), ("draft_model", C.c_void_p), ("ngram", C.c_int32),
                ("tree_widths", C.c_void_p), ("n_tree_levels", C.c_int32), ("ngram_nodes", C.c_int32),
                ("ngram_lookup_min", C.c_int32), ("ngram_lookup_max", C.c_int32), ("ngram_max_chain", C.c_int32),
                ("ngram_table_n", C.c_int32), ("ngram_table_topk", C.c_int32), ("ngram_lag", C.c_int32),
                ("tree_mode", C.c_int32), ("sampled_drafts", C.c_int32), ("grammar", C.c_int32)]
    # Every field (the 0.14 grammar field missing here, specula_speculative_options_init wrote 8 bytes past this
    # buffer and the interpreter crashed later in its garbage collector; since 0.17 the _init_sized functions this
    # module calls write no more than the size they are given). tests/test_sdk_structs.py checks each struct's size
    # against the library's.


_lib = None


def lib():
    global _lib
    if _lib is not None:
        return _lib
    L = C.CDLL(find_library())
    P, E = C.c_void_p, C.POINTER(C.c_void_p)
    sigs = {
        "specula_status_string": (C.c_char_p, [C.c_int]),
        "specula_error_message": (C.c_char_p, [P]),
        "specula_error_destroy": (None, [P]),
        "specula_model_options_init_sized": (None, [C.POINTER(_ModelOptions), C.c_size_t]),
        "specula_model_load": (C.c_int, [C.c_char_p, C.POINTER(_ModelOptions), E, E]),
        "specula_model_destroy": (None, [P]),
        "specula_model_n_vocab": (C.c_int32, [P]),
        "specula_model_token_bos": (C.c_int32, [P]),
        "specula_model_tokenize": (C.c_int, [P, C.c_char_p, C.c_size_t, C.c_int32, C.POINTER(C.c_int32), C.c_size_t,
                                             C.POINTER(C.c_size_t), E]),
        "specula_model_detokenize": (C.c_int, [P, C.POINTER(C.c_int32), C.c_size_t, C.c_int32, C.c_char_p, C.c_size_t,
                                               C.POINTER(C.c_size_t), E]),
        "specula_session_options_init_sized": (None, [C.POINTER(_SessionOptions), C.c_size_t]),
        "specula_session_create": (C.c_int, [P, C.POINTER(_SessionOptions), P, E, E]),
        "specula_session_destroy": (None, [P]),
        "specula_session_append_tokens": (C.c_int, [P, C.POINTER(C.c_int32), C.c_size_t, E]),
        "specula_session_rewind": (C.c_int, [P, C.c_int32, E]),
        "specula_session_draft_logits": (C.c_int, [P, C.POINTER(C.c_float), C.c_size_t, E]),
        "specula_draft_load": (C.c_int, [C.c_char_p, P, E, E]),
        "specula_draft_destroy": (None, [P]),
        "specula_draft_write_random": (C.c_int, [P, C.c_char_p, C.c_uint64, C.c_int32, E]),
        "specula_speculative_options_init_sized": (None, [C.POINTER(_SpecOptions), C.c_size_t]),
        "specula_session_set_speculative": (C.c_int, [P, C.POINTER(_SpecOptions), E]),
        "specula_session_evaluate": (C.c_int, [P, E]),
        "specula_session_logits": (C.POINTER(C.c_float), [P]),
        "specula_synthetic_options_init_sized": (None, [C.POINTER(_SyntheticOptions), C.c_size_t]),
        "specula_synthetic_model_write": (C.c_int, [C.c_char_p, C.c_char_p, C.c_char_p, C.POINTER(_SyntheticOptions), E]),
    }
    for name, sig in sigs.items():
        if sig is None:
            continue
        f = getattr(L, name)
        f.restype, f.argtypes = sig
    _lib = L
    return L


def _check(status: int, err: C.c_void_p):
    if status != 0:
        L = lib()
        msg = L.specula_error_message(err).decode("utf-8", "replace") if err else ""
        name = L.specula_status_string(status).decode()
        L.specula_error_destroy(err)
        raise SpeculaError(name, msg)


class Model:
    """A loaded GGUF model (vocab_only: the tokenizer alone)."""

    def __init__(self, path: str, vocab_only: bool = False):
        L = lib()
        opts = _ModelOptions()
        L.specula_model_options_init_sized(C.byref(opts), C.sizeof(opts))
        opts.vocab_only = 1 if vocab_only else 0
        self.handle, err = C.c_void_p(), C.c_void_p()
        _check(L.specula_model_load(path.encode(), C.byref(opts), C.byref(self.handle), C.byref(err)), err)
        self.path = path

    def close(self):
        if self.handle:
            lib().specula_model_destroy(self.handle)
            self.handle = C.c_void_p()

    __del__ = close

    @property
    def n_vocab(self) -> int:
        return lib().specula_model_n_vocab(self.handle)

    @property
    def bos(self) -> int:
        return lib().specula_model_token_bos(self.handle)

    def tokenize(self, text: str | bytes, add_special: bool = False) -> List[int]:
        data = text.encode("utf-8") if isinstance(text, str) else text
        L, n, err = lib(), C.c_size_t(), C.c_void_p()
        cap = len(data) + 8
        buf = (C.c_int32 * cap)()
        _check(L.specula_model_tokenize(self.handle, data, len(data), 1 if add_special else 0, buf, cap, C.byref(n),
                                        C.byref(err)), err)
        return list(buf[:n.value])

    def detokenize(self, tokens: Sequence[int]) -> str:
        L, n, err = lib(), C.c_size_t(), C.c_void_p()
        arr = (C.c_int32 * len(tokens))(*tokens)
        cap = 8 * len(tokens) + 64
        buf = C.create_string_buffer(cap)
        _check(L.specula_model_detokenize(self.handle, arr, len(tokens), 0, buf, cap, C.byref(n), C.byref(err)), err)
        return buf.raw[:n.value].decode("utf-8", "replace")

    def write_random_draft(self, path: str, window: int = 512, seed: int = 1):
        err = C.c_void_p()
        _check(lib().specula_draft_write_random(self.handle, path.encode(), seed, window, C.byref(err)), err)


class Session:
    """A session on a model with a LongSpec draft attached: gives the runtime's draft logits."""

    def __init__(self, model: Model, draft_path: str, n_ctx: int = 0, threads: int = 1):
        L = lib()
        self.model = model
        so = _SessionOptions()
        L.specula_session_options_init_sized(C.byref(so), C.sizeof(so))
        so.n_ctx, so.n_threads = n_ctx, threads
        # The target's cache in F32, as the PyTorch reference keeps it: parity then measures the draft's arithmetic
        # (an F16 cache alone moves the draft's logits by ~2e-4 relative).
        so.kv_type = KV_F32
        self.handle, self.draft, err = C.c_void_p(), C.c_void_p(), C.c_void_p()
        _check(L.specula_session_create(model.handle, C.byref(so), None, C.byref(self.handle), C.byref(err)), err)
        _check(L.specula_draft_load(draft_path.encode(), model.handle, C.byref(self.draft), C.byref(err)), err)
        spec = _SpecOptions()
        L.specula_speculative_options_init_sized(C.byref(spec), C.sizeof(spec))
        spec.draft = self.draft
        _check(L.specula_session_set_speculative(self.handle, C.byref(spec), C.byref(err)), err)

    def close(self):
        L = lib()
        if self.handle:
            L.specula_session_destroy(self.handle)
            self.handle = C.c_void_p()
        if self.draft:
            L.specula_draft_destroy(self.draft)
            self.draft = C.c_void_p()

    __del__ = close

    def draft_logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Draft logits for the token after `tokens` (the context is replaced by `tokens`)."""
        L, err = lib(), C.c_void_p()
        _check(L.specula_session_rewind(self.handle, 0, C.byref(err)), err)
        arr = (C.c_int32 * len(tokens))(*tokens)
        _check(L.specula_session_append_tokens(self.handle, arr, len(tokens), C.byref(err)), err)
        out = np.zeros(self.model.n_vocab, dtype=np.float32)
        _check(L.specula_session_draft_logits(self.handle, out.ctypes.data_as(C.POINTER(C.c_float)), out.size,
                                              C.byref(err)), err)
        return out


class TargetSession:
    """A plain session on a model (F32 KV cache, as the torch reference keeps it): the target's own logits."""

    def __init__(self, model: Model, n_ctx: int = 0, threads: int = 1):
        L = lib()
        self.model = model
        so = _SessionOptions()
        L.specula_session_options_init_sized(C.byref(so), C.sizeof(so))
        so.n_ctx, so.n_threads, so.kv_type = n_ctx, threads, KV_F32
        self.handle, err = C.c_void_p(), C.c_void_p()
        _check(L.specula_session_create(model.handle, C.byref(so), None, C.byref(self.handle), C.byref(err)), err)

    def close(self):
        if self.handle:
            lib().specula_session_destroy(self.handle)
            self.handle = C.c_void_p()

    __del__ = close

    def logits_after(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits at every position of `tokens` ([len, n_vocab]): each token appended and evaluated in turn."""
        L, err = lib(), C.c_void_p()
        _check(L.specula_session_rewind(self.handle, 0, C.byref(err)), err)
        rows = np.zeros((len(tokens), self.model.n_vocab), dtype=np.float32)
        for i, t in enumerate(tokens):
            arr = (C.c_int32 * 1)(t)
            _check(L.specula_session_append_tokens(self.handle, arr, 1, C.byref(err)), err)
            _check(L.specula_session_evaluate(self.handle, C.byref(err)), err)
            p = L.specula_session_logits(self.handle)
            rows[i] = np.ctypeslib.as_array(p, shape=(self.model.n_vocab,))
        return rows
