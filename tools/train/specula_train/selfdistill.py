"""Self-distillation data: text the target itself writes, generated through the Specula CLI (`specula generate`),
one file per sample. A draft trained on its target's own samples learns exactly the distribution it must
predict, which is what a target without public training data (stories260K here) needs.

    python3 tools/train/selfdistill.py --target stories260K.gguf --samples 400 -n 256 --out data/stories
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from .sdk import REPO_ROOT

# Openings in the style of TinyStories (stories260K's training data); sampling diversifies the rest.
DEFAULT_PROMPTS = [
    "Once upon a time", "One day", "Lily wanted", "Tom and his mom", "There was a little", "The sun was",
    "Once there was a big", "Ben liked to", "A little bird", "Sara had a", "In the park", "The dog",
    "Mia and Max", "It was a rainy day", "Tim found a", "The little girl",
]


def find_cli() -> str:
    if os.environ.get("SPECULA_CLI"):
        return os.environ["SPECULA_CLI"]
    for p in ("build/bin/specula", "build/specula"):
        path = os.path.join(REPO_ROOT, p)
        if os.path.exists(path):
            return path
    raise FileNotFoundError("the specula CLI was not found: build the SDK first")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True)
    p.add_argument("--out", required=True, help="directory for the samples (one .txt per sample)")
    p.add_argument("--samples", type=int, default=400)
    p.add_argument("-n", "--tokens", type=int, default=256)
    p.add_argument("--temp", type=float, default=0.8)
    p.add_argument("--prompts", help="file with one prompt per line (default: built-in story openings)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--cli", default=None)
    a = p.parse_args(argv)
    cli = a.cli or find_cli()
    prompts = DEFAULT_PROMPTS
    if a.prompts:
        with open(a.prompts) as f:
            prompts = [line.rstrip("\n") for line in f if line.strip()]
    os.makedirs(a.out, exist_ok=True)

    def one(i: int):
        prompt = prompts[i % len(prompts)]
        cmd = [cli, "generate", "-m", a.target, "-p", prompt, "-n", str(a.tokens), "--temp", str(a.temp),
               "--seed", str(i + 1), "-t", "1"]
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        with open(os.path.join(a.out, f"sample_{i:05d}.txt"), "w") as f:
            f.write(r.stdout)

    with ThreadPoolExecutor(a.jobs) as ex:
        list(ex.map(one, range(a.samples)))
    print(f"wrote {a.samples} samples to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
