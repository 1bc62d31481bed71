"""Reference renderings of GGUF chat templates, made as Hugging Face transformers makes
them (`apply_chat_template`: a sandboxed jinja2 environment with trim_blocks,
lstrip_blocks and loop controls, its `tojson`, `raise_exception`), for
tests/models.rs to compare sopsim's renderer against; and of templates written here
(`TEMPLATES`) that use what the two GGUF templates do not, such as `tojson`'s
keyword arguments.

    python3 -m pip install jinja2 gguf
    python3 tests/reference/chat_templates.py models/qwen05/*.gguf models/smollm2/*.gguf \
        > tests/reference/chat_templates.json
"""
import hashlib
import json
import sys

import gguf
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

CASES = [
    [{"role": "user", "content": "Hello!"}],
    [
        {"role": "system", "content": "You are Alice, a prisoner. Be brief."},
        {"role": "user", "content": "Bob said: \"I will cooperate.\"\nAlice, your move."},
    ],
    [
        {"role": "system", "content": "Debate the motion."},
        {"role": "user", "content": "Open the debate."},
        {"role": "assistant", "content": "  The motion is sound; consider three points.  "},
        {"role": "user", "content": "Rebut — with ünïcödé, 中文 and {{ braces }}."},
    ],
    [
        {"role": "system", "content": "Rules: a < b && c > d; it's \"quoted\" & <tagged/>."},
        {"role": "user", "content": "Ça va? 你好 — 👍🏽 done,\ttabs and \\backslashes\\."},
    ],
]

# transformers' own tojson: json.dumps with its keyword arguments, no HTML escaping.
TEMPLATES = {
    "tojson": (
        "{% for message in messages %}"
        "{{ message | tojson }}\n"
        "{{ message['content'] | tojson(ensure_ascii=true) }}\n"
        "{% endfor %}"
        "{{ messages | tojson(indent=2) }}\n"
        "{{ {'z': messages | length, 'a': [1.5, none, true, 1e-05, 'it\\'s <&>']}"
        " | tojson(sort_keys=true, separators=(',', ':')) }}"
    ),
}


def field(reader, key):
    f = reader.fields[key]
    return f.parts[f.data[0]]


def token(reader, key):
    if key not in reader.fields:
        return None
    tokens = reader.fields["tokenizer.ggml.tokens"]
    index = int(field(reader, key)[0])
    return bytes(tokens.parts[tokens.data[index]]).decode("utf-8")


def render(source, bos, eos, messages):
    def raise_exception(message):
        raise ValueError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(
        messages=messages, add_generation_prompt=True, bos_token=bos or "", eos_token=eos
    )


out = {}
for path in sys.argv[1:]:
    reader = gguf.GGUFReader(path)
    source = bytes(field(reader, "tokenizer.chat_template")).decode("utf-8")
    bos = token(reader, "tokenizer.ggml.bos_token_id")
    eos = token(reader, "tokenizer.ggml.eos_token_id")
    name = path.split("/")[-2]
    out[name] = {
        "template_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "cases": [{"messages": m, "rendered": render(source, bos, eos, m)} for m in CASES],
    }
out["templates"] = {
    name: {
        "source": source,
        "cases": [{"messages": m, "rendered": render(source, None, "</s>", m)} for m in CASES],
    }
    for name, source in TEMPLATES.items()
}
json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
print()
