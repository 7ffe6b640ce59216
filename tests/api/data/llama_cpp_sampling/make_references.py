#!/usr/bin/env python3
"""Sampled tokens of llama.cpp's server for models/stories260K.gguf: the references of the test
"api: llama.cpp's draw rule gives llama.cpp's sampled tokens" (tests/api/test_llama_cpp_draws.cpp).

Run against llama-server of llama.cpp 2025-02-20 (examples/server, built with GCC's libstdc++ on x86-64):
    llama-server -m models/stories260K.gguf --port 18099 -t 1 -c 2048 -np 1 -ctk f32 -ctv f32
    python3 tests/api/data/llama_cpp_sampling/make_references.py http://127.0.0.1:18099 > tests/api/data/llama_cpp_sampling/stories260K.json
An F32 KV cache on both sides: with F16 caches the engines round differently (ggml converts the query and the
attention weights to F16 for its products, Specula keeps them in F32), and where two candidates are within ~1e-3 of
each other their order, hence the draw, can flip (41 of these 45 cases agree then; llama.cpp's own F16 and F32 runs
differ in 6). Each case is one /completion request with the prompt as token ids (BOS first) and the sampler's settings; the
reference is the ids it returned ("return_tokens"). Every other setting is llama-server's default (no penalties
unless given, DRY and XTC off), the chain top-k, top-p, min-p, temperature, then llama_sampler_dist.
"""
import json
import sys
import urllib.request

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:18099"


def post(path, body):
    req = urllib.request.Request(BASE + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


PROMPTS = [
    "Once upon a time, there was a little dog named",
    "I believe the meaning of life is",
    "The girl went to the park and",
]
SETTINGS = [
    {"name": "defaults"},  # temperature 0.8, top_k 40, top_p 0.95, min_p 0.05
    {"name": "whole vocabulary", "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
    {"name": "hot top-k", "temperature": 1.5, "top_k": 10, "top_p": 1.0, "min_p": 0.0},
    {"name": "cold min-p", "temperature": 0.5, "top_k": 40, "top_p": 0.95, "min_p": 0.2},
    {"name": "penalties", "temperature": 0.9, "repeat_penalty": 1.3, "presence_penalty": 0.2,
     "frequency_penalty": 0.1, "repeat_last_n": 64},
]
SEEDS = [42, 7, 3000000000]

cases = []
for prompt in PROMPTS:
    ids = post("/tokenize", {"content": prompt, "add_special": True})["tokens"]
    for settings in SETTINGS:
        for seed in SEEDS:
            body = {k: v for k, v in settings.items() if k != "name"}
            body.update({"prompt": ids, "n_predict": 48, "seed": seed, "return_tokens": True, "cache_prompt": False})
            r = post("/completion", body)
            cases.append({"prompt": ids, "settings": settings["name"], "seed": seed,
                          "sampler": {k: v for k, v in body.items() if k not in ("prompt", "n_predict", "return_tokens", "cache_prompt")},
                          "tokens": r["tokens"], "text": r["content"]})
json.dump({"model": "models/stories260K.gguf", "made_with": "llama-server -ctk f32 -ctv f32, llama.cpp 2025-02-20, GCC 12 libstdc++, x86-64",
           "n_predict": 48, "cases": cases}, sys.stdout, indent=1)
print()
