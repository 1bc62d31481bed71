"""Counts the items a user of a crate can name (`sopsim` unless the first argument names
another, as `sopsim_bench`): walks public modules and re-exports from the crate root,
following re-exports into the crates it uses through rustdoc's JSON
(target/doc/*.json). Make the JSON first, for each crate (nightly):

    cargo +nightly rustdoc -p sopsim --lib -- -Z unstable-options --output-format json
    (likewise -p sopsim-bench, -p sopsim-core, -p sopsim-models, -p sopsim-infer)

Items the crate takes from another counted crate (`sopsim_bench` from `sopsim`) are
that crate's and are not counted again.
"""
import json, sys, collections, os
docs = {}
def load(name):
    if name not in docs:
        p = f"target/doc/{name}.json"
        docs[name] = json.load(open(p)) if os.path.exists(p) else None
    return docs[name]
kinds = collections.Counter(); per_module = collections.Counter(); seen = set(); unresolved = []
def resolve(crate, tid):
    d = load(crate); s = d["paths"].get(str(tid))
    if s is None: return None
    ext = d["external_crates"].get(str(s["crate_id"]))
    if ext is None: return None
    other = load(ext["name"])
    if other is None: unresolved.append(ext["name"] + "::" + "::".join(s["path"][1:])); return None
    want = s["path"]
    for i, q in other["paths"].items():
        if q["crate_id"] == 0 and q["path"] == want: return (ext["name"], i)
    unresolved.append("::".join(want)); return None
def walk(crate, i, top):
    key = (crate, str(i))
    if key in seen: return
    seen.add(key)
    d = load(crate); it = d["index"].get(str(i))
    if it is None:
        r = resolve(crate, i)
        if r: walk(r[0], r[1], top)
        return
    inner = it["inner"]; k = next(iter(inner))
    if k == "use":
        t = inner["use"].get("id")
        if t is None: return
        if inner["use"]["is_glob"]:
            unresolved.append("glob " + inner["use"]["source"]); return
        walk(crate, t, top); return
    if it["visibility"] != "public": return
    kinds[k] += 1; per_module[top] += 1
    if k == "module":
        for c in inner["module"]["items"]:
            walk(crate, c, top or it["name"])
name = sys.argv[1] if len(sys.argv) > 1 else "sopsim"
root = load(name)
for c in root["index"][str(root["root"])]["inner"]["module"]["items"]:
    walk(name, c, None)
print("public items:", sum(kinds.values()), dict(kinds.most_common()))
print("by top-level module:", dict(per_module.most_common()))
if unresolved: print("unresolved:", unresolved[:20])
