"""Reference ids, logits and greedy tokens from llama.cpp for Gemma 3 270M
(`sopsim models fetch gemma3`), for tests/models/gemma3.rs.

For texts that exercise SentencePiece (spaces, newlines, digits, accents, emoji,
code), llama.cpp's token ids; for a prompt in Gemma's turn format, the 20 highest
logits at every position and 64 tokens of greedy decoding after it; and for a prompt
longer than the sliding window (512), the 20 highest logits at its last positions,
where the windowed layers no longer see its start.

    PYTHONPATH=$SDIST LLAMA_CPP_LIB_PATH=$LLAMA_BUILD/bin \\
        python3 tests/reference/gemma3_reference.py models/gemma3/gemma-3-270m-q4_k_m.gguf \\
        tests/reference/gemma3_logits.json
($SDIST: the unpacked llama-cpp-python 0.3.36 sdist; $LLAMA_BUILD: its vendored
llama.cpp built with cmake, as benches/anchors/llama_bench.sh builds it.)
"""
import json
import sys

import numpy as np
from llama_cpp import Llama, __version__

TEXTS = [
    "The bridge costs too much, Ben says.",
    "  two leading spaces, and  two   inside\n\nnew paragraphs\tand a tab",
    "Prices: 1,250 pounds in 2026; 3.75% interest.",
    "Café naïve façade — “quotes” and ünïcödé; 中文 and 日本語 👍🏽",
    "fn main() { println!(\"{}\", x + 1); }",
]

PROMPT = ("<bos><start_of_turn>user\nYou are Ada, a careful engineer in a town council debate "
          "about a new bridge.\n\nBen says the bridge costs too much. Answer him in two "
          "sentences.<end_of_turn>\n<start_of_turn>model\n")


LONG = "<bos>" + " ".join(
    f"Minute {i}: the council heard that the bridge over the river would cost {1000 + 37 * i} pounds "
    f"a metre, and councillor {['Ada', 'Ben', 'Cleo', 'Dev'][i % 4]} asked about the {i % 7 + 2} lanes."
    for i in range(24))


def main():
    path, out = sys.argv[1], sys.argv[2]
    llm = Llama(model_path=path, n_ctx=2048, n_threads=2, n_batch=512, logits_all=True,
                verbose=False)
    texts = [{"text": t, "tokens": llm.tokenize(t.encode(), add_bos=False, special=False)}
             for t in TEXTS]
    tokens = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(tokens)
    logits = np.array(llm.scores[: len(tokens)])
    positions = []
    for p in range(len(tokens)):
        top = np.argsort(-logits[p])[:20]
        positions.append({"position": p, "top": [[int(t), float(logits[p][t])] for t in top]})
    greedy = []
    for _ in range(64):
        nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        greedy.append(nxt)
        llm.eval([nxt])
    long_tokens = llm.tokenize(LONG.encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(long_tokens)
    long_logits = np.array(llm.scores[: len(long_tokens)])
    long_positions = []
    for p in range(len(long_tokens) - 4, len(long_tokens)):
        top = np.argsort(-long_logits[p])[:20]
        long_positions.append({"position": p, "top": [[int(t), float(long_logits[p][t])] for t in top]})
    result = {"llama_cpp_python": __version__, "texts": texts, "prompt": PROMPT,
              "tokens": [int(t) for t in tokens], "positions": positions, "greedy": greedy,
              "long": {"prompt": LONG, "tokens": [int(t) for t in long_tokens],
                       "positions": long_positions}}
    with open(out, "w") as f:
        json.dump(result, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
