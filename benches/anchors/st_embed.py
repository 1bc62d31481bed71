"""PyTorch + sentence-transformers anchor for benches/models.rs (minilm/batch/N).

Same sentences, same batch sizes, torch on 2 threads; prints sentences per second.
    python3 benches/anchors/st_embed.py MODEL_DIR   # the unpacked wheel's model/ folder
"""
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

SUBJECTS = ["The council", "A farmer", "The engineer", "Our team", "The mayor", "A student", "The river", "This bridge"]
VERBS = ["debated", "measured", "questioned", "approved", "described", "ignored", "praised", "rebuilt"]


def sentences(n):
    return [f"{SUBJECTS[i % 8]} {VERBS[(i // 8) % 8]} the plan for the old stone bridge on market day number {i} near town." for i in range(n)]


def main():
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    model = SentenceTransformer(sys.argv[1], device="cpu")
    for batch in (1, 8, 32, 128):
        texts = sentences(batch)
        model.encode(texts, batch_size=batch)
        runs, start = 0, time.perf_counter()
        samples = []
        while time.perf_counter() - start < 4.0:
            t = time.perf_counter()
            model.encode(texts, batch_size=batch)
            samples.append(time.perf_counter() - t)
            runs += 1
        samples.sort()
        median = samples[len(samples) // 2]
        print(f"sentence-transformers batch {batch:4d}: {batch / median:8.1f} sentences/s (median of {runs})")


if __name__ == "__main__":
    main()
