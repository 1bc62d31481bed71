"""Reference token ids from llama.cpp (llama-cpp-python) for tests/models.rs.

Texts that take the pre-tokenizers' less travelled paths — digits, contractions,
accents, CJK, emoji, whitespace runs — tokenized by llama.cpp from each GGUF file's
own vocabulary (vocab_only: no weights are loaded). Run once and commit the JSON:
    python3 tests/reference/tokenizer_ids.py tests/reference/tokenizer_ids.json
"""
import json
import sys

from llama_cpp import Llama

MODELS = {
    "qwen05": "models/qwen05/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "smollm2": "models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
}

TEXTS = [
    "In 2026 the bridge cost 1234567.89 euros, up 12% from 2024.",
    "Phone 555-0199 or +44 20 7946 0958; PIN 0000.",
    "I'm sure you're right, but they'd say we've gone and it's theirs. DON'T, I'LL, She'S.",
    "Crème brûlée, naïve façade, Ångström, Straße, ĳssel.",
    "Привет, мир! Γειά σου κόσμε. שלום עולם. مرحبا بالعالم.",
    "我们应该禁止汽车进入市中心吗？日本語のテキストと한국어 문장.",
    "Emoji: 🚲🚗💨 👩‍👩‍👧 👍🏽 🇫🇷 ✔️",
    "Tabs\tand  two spaces,\n\nblank lines\r\n and   trailing   ",
    "<|im_start|>user\nCOOPERATE or DEFECT? 10 tokens × 1.6 ÷ 4 = 4.0<|im_end|>\n",
    "snake_case, camelCase, URL https://example.org/a?b=c&d=1 and e-mail a.b@c.de",
]


def main():
    out = sys.argv[1]
    result = {"texts": TEXTS, "models": {}}
    for name, path in MODELS.items():
        llm = Llama(model_path=path, vocab_only=True, verbose=False)
        result["models"][name] = {
            "file": path,
            "ids": [[int(t) for t in llm.tokenize(text.encode(), add_bos=False, special=True)] for text in TEXTS],
        }
    # One text's ids to a line, so that a change shows as one line of the diff.
    dump = lambda v: json.dumps(v, ensure_ascii=False)
    lines = ["{", ' "texts": [', ",\n".join("  " + dump(t) for t in TEXTS), " ],", ' "models": {']
    models = []
    for name, model in result["models"].items():
        ids = ",\n".join("    " + dump(row) for row in model["ids"])
        models.append(f'  {dump(name)}: {{\n   "file": {dump(model["file"])},\n   "ids": [\n{ids}\n   ]\n  }}')
    lines += [",\n".join(models), " }", "}"]
    text = "\n".join(lines)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    assert json.loads(text) == result


if __name__ == "__main__":
    main()
