"""Tiny random-weight GGUF files of the architectures sopsim has no real weights of in
CI (qwen3, and llama with Llama 3's `rope_freqs`), and llama.cpp's logits on them, for
tests/models/tiny_models.rs.

Each model has 2 layers, 64 dimensions, 4 query heads of 32 (so the heads are wider
than the embedding, as in Qwen3) over 2 KV heads, and a byte-level BPE vocabulary of
the 256 bytes, a few merges and the chat tokens. Weights are F16 drawn from a fixed
seed; norms are F32. For each file the JSON holds the prompt's token ids, the 20
highest logits at every position, and 64 tokens of greedy decoding after the prompt.

    python3 -m pip install gguf numpy
    # llama.cpp's Python binding; benches/anchors/llama_bench.sh builds the library:
    PYTHONPATH=$SDIST LLAMA_CPP_LIB_PATH=$LLAMA_BUILD/bin \\
        python3 tests/reference/tiny_models.py tests/reference/tiny
where $SDIST is the unpacked llama-cpp-python 0.3.36 sdist and $LLAMA_BUILD its
vendored llama.cpp built with cmake. The files are written once and committed.
"""
import json
import sys
from pathlib import Path

import gguf
import numpy as np

DIM, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN = 64, 2, 4, 2, 32, 128

# A Qwen3-style template: thinking is on unless `enable_thinking` is false, and an
# earlier reply's thinking is dropped.
TEMPLATE = (
    "{%- for message in messages %}"
    "{%- set content = message['content'] %}"
    "{%- if message['role'] == 'assistant' and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)

PROMPT = (
    "<|im_start|>system\nYou are Ada, a careful engineer.<|im_end|>\n"
    "<|im_start|>user\nBen says the bridge costs too much. Answer him.<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)

MERGES = ["Ġ t", "h e", "Ġt he", "i n", "e r", "a n", "Ġ a", "o n", "r e", "Ġ b",
          "Ġ c", "o u", "e s", "i s", "Ġ s", "a r", "Ġ w", "e n", "Ġ h", "o r"]
SPECIAL = [("<|endoftext|>", gguf.TokenType.CONTROL), ("<|im_start|>", gguf.TokenType.CONTROL),
           ("<|im_end|>", gguf.TokenType.CONTROL), ("<think>", gguf.TokenType.USER_DEFINED),
           ("</think>", gguf.TokenType.USER_DEFINED)]


def byte_tokens():
    """GPT-2's printable stand-ins for the 256 bytes, in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def vocabulary():
    tokens = byte_tokens() + [m.replace(" ", "") for m in MERGES]
    types = [gguf.TokenType.NORMAL] * len(tokens)
    for text, kind in SPECIAL:
        tokens.append(text)
        types.append(kind)
    return tokens, types


def write(path, arch, pre):
    rng = np.random.default_rng(20261207 if arch == "qwen3" else 20261208)
    tokens, types = vocabulary()
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(4096)
    w.add_embedding_length(DIM)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(1_000_000.0 if arch == "qwen3" else 500_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(MERGES)
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)

    def matrix(name, rows, cols):
        w.add_tensor(name, (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float16))

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    w.add_tensor("token_embd.weight", rng.standard_normal((len(tokens), DIM)).astype(np.float16))
    if arch == "llama":
        # Llama 3's factors: high frequencies kept, low ones slowed by up to 8.
        factors = np.geomspace(1.0, 8.0, HEAD_DIM // 2).astype(np.float32)
        w.add_tensor("rope_freqs.weight", factors)
    qd, kvd = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    for i in range(LAYERS):
        b = f"blk.{i}."
        norm(b + "attn_norm.weight", DIM)
        matrix(b + "attn_q.weight", qd, DIM)
        matrix(b + "attn_k.weight", kvd, DIM)
        matrix(b + "attn_v.weight", kvd, DIM)
        if arch == "qwen3":
            norm(b + "attn_q_norm.weight", HEAD_DIM)
            norm(b + "attn_k_norm.weight", HEAD_DIM)
        matrix(b + "attn_output.weight", DIM, qd)
        norm(b + "ffn_norm.weight", DIM)
        matrix(b + "ffn_gate.weight", FFN, DIM)
        matrix(b + "ffn_up.weight", FFN, DIM)
        matrix(b + "ffn_down.weight", DIM, FFN)
    norm("output_norm.weight", DIM)
    matrix("output.weight", len(tokens), DIM)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference(path, out):
    from llama_cpp import Llama, __version__

    llm = Llama(model_path=str(path), n_ctx=512, n_threads=2, n_batch=512, logits_all=True,
                verbose=False)
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
    result = {"llama_cpp_python": __version__, "prompt": PROMPT,
              "tokens": [int(t) for t in tokens], "positions": positions, "greedy": greedy}
    with open(out, "w") as f:
        json.dump(result, f, indent=0)
        f.write("\n")


def main():
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    for name, arch, pre in [("qwen3", "qwen3", "qwen2"), ("llama3", "llama", "llama-bpe")]:
        path = folder / f"{name}.gguf"
        write(path, arch, pre)
        reference(path, folder / f"{name}_logits.json")


if __name__ == "__main__":
    main()
