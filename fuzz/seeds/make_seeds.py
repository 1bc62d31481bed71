#!/usr/bin/env python3
"""Builds the fuzz corpora's seeds from the repository and the local model files.

    python3 fuzz/seeds/make_seeds.py --scenarios   # the scenario files (no packages needed)
    python3 fuzz/seeds/make_seeds.py               # everything, after `sopsim models fetch
                                                   # qwen05 smollm2 minilm` and
                                                   # `pip install gguf numpy`

Writes small files under fuzz/corpus/<target>/. The scenario seeds are copies of the
repository's scenarios, made before each fuzzing run (`.ci/run`) rather than committed,
so they follow the scenarios; the others are committed.
"""
import glob
import json
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(folder, name), mode) as f:
        f.write(data)


def scenarios():
    for path in glob.glob(os.path.join(ROOT, "scenarios", "*.json")):
        shutil.copy(path, os.path.join(CORPUS, "scenario", os.path.basename(path)))
    for path in glob.glob(os.path.join(ROOT, "scenarios", "aiwaves", "*", "*.json")):
        if "database" in path:  # a knowledge base, not a config
            continue
        name = os.path.basename(os.path.dirname(path)) + "-" + os.path.basename(path)
        with open(path) as f:
            text = f.read()
        put("scenario", "aiwaves-" + name, text)
        put("aiwaves", name, text)


def outcomes():
    for name in ["prisoners_dilemma", "public_goods"]:
        with open(os.path.join(ROOT, "scenarios", name + ".json")) as f:
            section = json.load(f)["outcomes"]
        formula = (section.get("payoff") or {}).get("formula", "own * 2 + sum")
        put("outcomes", name, formula + "\n" + json.dumps(section))
    put("outcomes", "counts", "counts.COOPERATE * 3 - (own == 'DEFECT') | abs\n{}")


def world():
    put("world", "shipped", "me.catch + own\nworld.fish < 5\n"
        "The lake holds {{ world.fish }} tons in month {{ round }}; you took {{ me.catch }}.")
    put("world", "loops", "own * 2 + sum / n\n(world.fish / 10) > 2\n"
        "{% for i in range(world.fish) %}{{ i }},{% endfor %} {{ choice }} {{ '-' * 20 }}")
    put("world", "hostile", "(('x' * 90000000) ~ ('x' * 90000000)) | length\n"
        "world.fish / (world.fish - world.fish) > 1\n"
        "{% set a='x'*100000000 %}{{ a~a~a~a }}{% macro f(n) %}{{ f(n) }}{% endmacro %}")


def small_texts():
    put("script_template", "line", "{name} says {one_of:yes|no} at turn {turn}, reply {n}")
    put("script_template", "braces", "{{literal}} and {state} {role}")
    put("sse", "stream", b"\x01data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n"
        b": comment\n\ndata: {\"x\":1}\ndata: more\n\ndata: [DONE]\n\n")
    put("sse", "bom", b"\x03\xef\xbb\xbfdata: a\r\rdata: b\n\n")
    put("prices", "prices", json.dumps({"gpt-4o-mini": {"input": 0.15, "output": 0.6},
                                        "local": {"input": 0, "output": 0}}))
    entry = {
        "request": {"messages": [{"role": "user", "content": "Hi"}], "temperature": 0.7,
                    "max_tokens": 64},
        "text": "Hello",
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "cached_prompt_tokens": 0,
                  "estimated": False},
        "model": "scripted",
        "stopped_at": None,
        "chosen": {"index": 0, "value": "A", "probabilities": [1.0], "method": "scripted"},
    }
    put("recording", "entry", json.dumps(entry))


def model_files():
    import gguf

    for name, path in [("qwen05", "models/qwen05/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
                       ("smollm2", "models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")]:
        full = os.path.join(ROOT, path)
        with open(full, "rb") as f:
            put("gguf", name + "-header", f.read(4096))
        reader = gguf.GGUFReader(full)
        field = reader.fields.get("tokenizer.chat_template")
        if field is not None:
            put("chat_template", name, bytes(field.parts[field.data[0]]).decode())
    with open(os.path.join(ROOT, "models", "minilm", "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    keep = dict(list(vocab.items())[:120])
    tok["model"]["vocab"] = {k: i for i, k in enumerate(keep)}
    tok["added_tokens"] = [t for t in tok.get("added_tokens", []) if t["content"] in keep]
    for t in tok["added_tokens"]:
        t["id"] = tok["model"]["vocab"][t["content"]]
    post = tok.get("post_processor") or {}
    for name, special in (post.get("special_tokens") or {}).items():
        special["ids"] = [tok["model"]["vocab"].get(name, 0)]
    for key in ("cls", "sep"):
        if key in post:
            post[key] = [post[key][0], tok["model"]["vocab"].get(post[key][0], 0)]
    put("tokenizer_json", "minilm-small", json.dumps(tok))


def tiny_model(arch):
    """A whole model small enough to fuzz: 8 tokens, width 16, one layer, F32."""
    import gguf
    import numpy as np

    path = os.path.join(CORPUS, "gguf", f"tiny-{arch}")
    w = gguf.GGUFWriter(path, arch)
    dim, ffn, heads, vocab = 16, 32, 2, 8
    w.add_embedding_length(dim)
    w.add_feed_forward_length(ffn)
    w.add_block_count(1)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_context_length(64)
    tokens = ["a", "b", "c", "ab", "Ġ", "<|im_start|>", "<|im_end|>", "Ċ"]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1, 1, 1, 1, 1, 3, 3, 1])
    w.add_token_merges(["a b"])
    w.add_eos_token_id(6)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}"
                        "<|im_start|>assistant\n{% endif %}")
    rng = np.random.default_rng(0)

    def t(name, *shape):
        w.add_tensor(name, rng.standard_normal(shape).astype(np.float32) * 0.1)

    t("token_embd.weight", vocab, dim)
    t("output_norm.weight", dim)
    t("blk.0.attn_norm.weight", dim)
    t("blk.0.ffn_norm.weight", dim)
    for part in ["attn_q", "attn_k", "attn_v", "attn_output"]:
        t(f"blk.0.{part}.weight", dim, dim)
        if arch == "qwen2" and part != "attn_output":
            t(f"blk.0.{part}.bias", dim)
    t("blk.0.ffn_gate.weight", ffn, dim)
    t("blk.0.ffn_up.weight", ffn, dim)
    t("blk.0.ffn_down.weight", dim, ffn)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tool_calls():
    """Decisions, expressions and lookup arguments as models write them."""
    put("tool_call", "decision_call", json.dumps({"tool": "calculator", "arguments": {"expression": "149 + 120 * 0.9"}}))
    put("tool_call", "decision_answer", '```json\n{"tool": "answer"}\n```')
    put("tool_call", "expression", "(19.99 * 3) * 0.9 - math::sqrt(16) ^ 2 % 7")
    put("tool_call", "lookup", json.dumps({
        "search": "waterproof boots",
        "filters": [{"field": "price", "op": "max", "value": 150}, {"field": "category", "op": "equals", "value": "shoes"}],
        "sort_by": "price", "descending": True, "limit": 2}))
    put("tool_call", "lookup_empty", json.dumps({
        "filters": [{"field": "tags", "op": "contains", "value": "warm"}, {"field": "category", "op": "equals", "value": "jackets"}]}))


if __name__ == "__main__":
    for target in ["scenario", "aiwaves"]:
        os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    scenarios()
    if sys.argv[1:] == ["--scenarios"]:
        sys.exit(0)
    outcomes()
    world()
    small_texts()
    model_files()
    tiny_model("llama")
    tiny_model("qwen2")
    tool_calls()
