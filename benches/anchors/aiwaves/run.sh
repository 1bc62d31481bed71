#!/usr/bin/env bash
# One-command anchor for the aiwaves "Agents" framework (PyPI ai-agents 0.0.52).
#   benches/anchors/aiwaves/run.sh            full suite (~12-15 min on 2 cores, plus first-time setup)
#   QUICK=1 benches/anchors/aiwaves/run.sh    smaller suite (~3 min)
#   benches/anchors/aiwaves/run.sh --setup-only
# Env: AIWAVES_VENV (default /tmp/aiwaves-venv), TURNS (default 500), OUT (default /tmp/aiwaves-anchor-results)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${AIWAVES_VENV:-/tmp/aiwaves-venv}"
PY="$VENV/bin/python"
TURNS="${TURNS:-500}"
OUT="${OUT:-/tmp/aiwaves-anchor-results}"
SCEN="$HERE/../../../scenarios/aiwaves"
MARK="$VENV/.aiwaves-anchor-ready"

setup() {
  echo "== setting up $VENV (ai-agents 0.0.52 + pinned deps; torch pulls ~5 GB of CUDA wheels)" >&2
  python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip "setuptools>=77"
  # ai-agents 0.0.52 pins pydantic==1.10.9, typing-extensions==4.5.0, langchain==0.0.312 and
  # unpinned gradio/litellm/openai: pip's resolver backtracks for a very long time.  We install the
  # package itself with --no-deps and a full lock of what it imports (see README.md / research note).
  "$PY" -m pip install -q --no-deps -r "$HERE/requirements.lock.txt"
  "$PY" -m pip install -q --no-deps "ai-agents==0.0.52"
  # litellm 0.12.x calls tiktoken.get_encoding("cl100k_base") at import, which downloads the BPE file.
  # Newer litellm wheels ship that file; take it from one (registry package) into a tiktoken cache dir.
  local tmp; tmp="$(mktemp -d)"
  "$PY" -m pip download -q --no-deps "litellm==1.106.2" -d "$tmp"
  mkdir -p "$VENV/tiktoken_cache"
  "$PY" - "$tmp" "$VENV/tiktoken_cache" <<'EOF'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "litellm-*.whl"))[0]
name = "litellm/litellm_core_utils/tokenizers/9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
with zipfile.ZipFile(whl) as z, open(os.path.join(sys.argv[2], os.path.basename(name)), "wb") as f:
    f.write(z.read(name))
EOF
  rm -rf "$tmp"
  touch "$MARK"
}

if [ ! -x "$PY" ] || [ ! -f "$MARK" ]; then setup; fi
[ "${1:-}" = "--setup-only" ] && { echo "setup done: $VENV" >&2; exit 0; }

export TIKTOKEN_CACHE_DIR="$VENV/tiktoken_cache"
export LITELLM_LOCAL_MODEL_COST_MAP=True
mkdir -p "$OUT"
DEB="$SCEN/debate/config.json"
SWC="$SCEN/software_company/config.json"
H=("$PY" "$HERE/harness.py")

if [ -n "${QUICK:-}" ]; then TURNS=100; fi
ST=$(( TURNS / 4 ))   # sop mode, 4 looping debate states x ST turns ~= TURNS turns

runs=()
run() { local name="$1"; shift; echo "== $name" >&2; "${H[@]}" --out "$OUT/$name.json" --label "$name" "$@" 2>&1 \
          | { grep -v "Loading weights" || true; } >&2; runs+=("$OUT/$name.json"); }

# 1) the shipped debate SOP, unmodified (5 states, 7 agents, 'competive'), then the same as cooperative
run debate-asis-comp  --config "$DEB" --turns 1000 --mode sop
run debate-asis-coop  --config "$DEB" --turns 1000 --mode sop --env-type cooperative
# 2) the shipped cooperative software_company SOP (3 states, 8 agents, tool components)
run swco-asis-coop    --config "$SWC" --turns 1000 --mode sop
# 3) debate SOP stretched to ~TURNS turns (every controller's max_chat_nums = TURNS/4); it ends by itself
#    after the judge's verdict (4*ST + 1 turns)
run debate-long-comp  --config "$DEB" --turns $(( TURNS + 10 )) --mode sop --state-turns "$ST"
run debate-long-coop  --config "$DEB" --turns $(( TURNS + 10 )) --mode sop --state-turns "$ST" --env-type cooperative
# 4) growth inside one state: 'order' controller vs LLM 'rule' router (7 roles)
run debate-loop-order --config "$DEB" --turns "$TURNS" --mode loop:Debate_Order_state
run debate-loop-rule  --config "$DEB" --turns "$TURNS" --mode loop:Debate_Random_state
# 5) same as 4b but with the package's default remote embeddings (Embed_Model unset -> OpenAI embeddings
#    API at API_BASE, answered instantly by the fake server): framework overhead without the local model
run debate-loop-rule-apiemb --config "$DEB" --turns "$TURNS" --mode loop:Debate_Random_state --embed api

echo
"$PY" "$HERE/report.py" "${runs[@]}" | tee "$OUT/table.txt"
