"""Reference logits from llama.cpp (llama-cpp-python) for tests/models.rs.

For a fixed chat prompt, the logits at three positions: the 20 highest with their
token ids. Run once per model file and commit the JSON:
    python3 tests/reference/llamacpp_logits.py models/qwen05/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf tests/reference/qwen05_logits.json
"""
import json
import sys

import numpy as np
from llama_cpp import Llama

PROMPT = ("<|im_start|>system\nYou are Ada, a careful engineer in a town council debate about a new bridge.<|im_end|>\n"
          "<|im_start|>user\nBen says the bridge costs too much. Answer him in two sentences, and say whether you COOPERATE or DEFECT.<|im_end|>\n"
          "<|im_start|>assistant\n")


def main():
    path, out = sys.argv[1], sys.argv[2]
    llm = Llama(model_path=path, n_ctx=512, n_threads=2, n_batch=512, logits_all=True, verbose=False)
    tokens = llm.tokenize(PROMPT.encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(tokens)
    logits = np.array(llm.scores[: len(tokens)])
    positions = [8, len(tokens) // 2, len(tokens) - 1]
    result = {"prompt": PROMPT, "tokens": [int(t) for t in tokens], "positions": []}
    for p in positions:
        row = logits[p]
        top = np.argsort(-row)[:20]
        result["positions"].append({"position": p, "top": [[int(t), float(row[t])] for t in top]})
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
