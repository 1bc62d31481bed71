"""llama.cpp anchor (llama-cpp-python) for benches/models.rs (smollm2/*).

Same GGUF file, same prompt; prints prompt and decode tokens per second.
    python3 benches/anchors/llamacpp_generate.py models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import os
import sys
import time

from llama_cpp import Llama

STORY = ("In Millbrook, a village of a hundred people beside a slow river, the baker opens her shop at six every morning. "
         "The miller brings flour across the old stone bridge, the children run to the school by the church, and the fishermen "
         "argue about the weather. ")


def main():
    threads = int(os.environ.get("LLAMA_THREADS", "2"))
    llm = Llama(model_path=sys.argv[1], n_ctx=2048, n_threads=threads, n_batch=512, verbose=False)
    prompt = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
              f"Summarise this story in three sentences.\n\n{STORY * 5}<|im_end|>\n<|im_start|>assistant\n")
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    prompt_rates, decode_rates = [], []
    for _ in range(5):
        llm.reset()
        t = time.perf_counter()
        llm.eval(tokens)
        prompt_rates.append(len(tokens) / (time.perf_counter() - t))
        t = time.perf_counter()
        for _ in range(128):
            tok = llm.sample(top_k=1)
            llm.eval([tok])
        decode_rates.append(128 / (time.perf_counter() - t))
    prompt_rates.sort()
    decode_rates.sort()
    print(f"llama.cpp ({threads} threads): prompt {prompt_rates[2]:.1f} tok/s ({len(tokens)} tokens), decode {decode_rates[2]:.1f} tok/s (median of 5)")


if __name__ == "__main__":
    main()
