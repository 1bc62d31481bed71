#!/usr/bin/env bash
# llama.cpp's own benchmark, as the anchor for sopsim's prompt and decode rates: builds
# `llama-bench` and `llama-batched-bench` (and `llama-server`, for checks by hand) from
# the llama.cpp source vendored in the llama-cpp-python 0.3.36 sdist, with native flags,
# into a cache folder (about 15 minutes on two cores, once), then runs them on sopsim's
# GGUF files with the same threads: pp512 (a 512-token prompt) and tg128 (128 generated
# tokens), 3 repeats; for qwen05, decode of 1, 2, 4 and 8 sequences together after
# 32-token prompts, 64 tokens each (the shape of sopsim's `qwen05_batched_decode`); and
# with both models, `llama-speculative`: qwen05 drafts for qwen15, 128 tokens after the
# prompt of sopsim's `anchor_speculative`, greedy and at temperature 0.7.
#
# Usage: benches/anchors/llama_bench.sh [MODEL...]   (default: qwen05 qwen15)
# Then, same sitting:
#   cargo bench --bench models -- "anchor_shape|qwen05_batched_decode|anchor_speculative"
# Environment: SOPSIM_ANCHORS (cache folder, default ~/.cache/sopsim-anchors),
# THREADS (default 2), SOPSIM_MODELS (where sopsim keeps its models).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${SOPSIM_ANCHORS:-$HOME/.cache/sopsim-anchors}"
threads="${THREADS:-2}"
models="${SOPSIM_MODELS:-$root/models}"
version=0.3.36
bench="$cache/llama.cpp-$version/build/bin/llama-bench"
# cmake and ninja from PyPI, where the machine has none.
[[ -d "$cache/tools/bin" ]] && export PATH="$cache/tools/bin:$PATH"

# Configures and builds llama.cpp into build$1 with the cmake flags that follow.
build() {
    local dir="$cache/llama.cpp-$version/build$1"
    shift
    cmake -S "$cache/llama.cpp-$version" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF "$@"
    cmake --build "$dir" --target llama-bench llama-batched-bench llama-speculative llama-server \
        -j "$(nproc)"
}

if [[ ! -x "$bench" ]]; then
    mkdir -p "$cache"
    if ! command -v cmake >/dev/null; then
        python3 -m venv "$cache/tools"
        "$cache/tools/bin/pip" install -q cmake ninja
        export PATH="$cache/tools/bin:$PATH"
    fi
    python3 -m pip download -q --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$version" -d "$cache/sdist"
    src="$cache/src-$version"
    rm -rf "$src" && mkdir -p "$src"
    tar -xzf "$cache/sdist/llama_cpp_python-$version.tar.gz" -C "$src" --strip-components=1
    rm -rf "$cache/llama.cpp-$version"
    cp -r "$src/vendor/llama.cpp" "$cache/llama.cpp-$version"
    build "" -DGGML_NATIVE=ON
fi

# Some virtual machines advertise AMX but fault on it (ggml does not ask the kernel for
# the tile state): then llama.cpp is built for this CPU's other instructions (AVX-512,
# VNNI, BF16; a native build would bring AMX back), and says so.
first=$(ls "$models"/qwen05/*.gguf 2>/dev/null | head -1 || true)
if [[ -n "$first" ]] && ! "$bench" -m "$first" -t "$threads" -p 16 -n 1 -r 1 >/dev/null 2>&1; then
    echo "note: llama-bench faults on this machine with its AMX path; using a build without it"
    bench="$cache/llama.cpp-$version/build-noamx/bin/llama-bench"
    flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
    grep -qw avx512f /proc/cpuinfo && flags+=(-DGGML_AVX512=ON)
    grep -qw avx512_vnni /proc/cpuinfo && flags+=(-DGGML_AVX512_VNNI=ON)
    grep -qw avx512_bf16 /proc/cpuinfo && flags+=(-DGGML_AVX512_BF16=ON)
    grep -qw avx_vnni /proc/cpuinfo && flags+=(-DGGML_AVX_VNNI=ON)
    [[ -x "$bench" ]] || build "-noamx" "${flags[@]}"
fi
batched="$(dirname "$bench")/llama-batched-bench"
speculative="$(dirname "$bench")/llama-speculative"
# Caches built before the batched or speculative anchor have the rest already.
for tool in "$batched" "$speculative"; do
    [[ -x "$tool" ]] || cmake --build "$(dirname "$(dirname "$bench")")" \
        --target "$(basename "$tool")" -j "$(nproc)"
done

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(grep -o -w -E 'avx512f|avx512_vnni|avx512_bf16|amx_int8|amx_bf16|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "llama.cpp: $("$bench" --version 2>&1 | head -1); threads $threads"
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(qwen05 qwen15)
for name in "${names[@]}"; do
    for gguf in "$models/$name"/*.gguf; do
        [[ -e "$gguf" ]] || { echo "$name: not fetched (sopsim models fetch $name)"; continue; }
        "$bench" -m "$gguf" -t "$threads" -p 512 -n 128 -r 3 -o md
        if [[ "$name" == qwen05 ]]; then
            # S_TG is the aggregate decode rate; llama.cpp's own log goes to stderr.
            "$batched" -m "$gguf" -t "$threads" -c 2048 -b 2048 -ub 512 \
                -npp 32 -ntg 64 -npl 1,2,4,8 2>/dev/null | grep '^|'
        fi
    done
done

# Speculative decoding: the prompt is the one `anchor_speculative` sends (the story told
# eight times, in the chat template), written by the bench to target/anchor_prompt.txt.
target=("$models"/qwen15/*.gguf) draft=("$models"/qwen05/*.gguf)
prompt_file="$root/target/anchor_prompt.txt"
if [[ " ${names[*]} " == *" qwen15 "* && -e "${target[0]}" && -e "${draft[0]}" ]]; then
    if [[ ! -e "$prompt_file" ]]; then
        echo "speculative: run the anchor_speculative bench once first (it writes $prompt_file)"
    else
        for temp in 0 0.7; do
            echo "llama-speculative, qwen05 drafting for qwen15, temperature $temp:"
            "$speculative" -m "${target[0]}" -md "${draft[0]}" -t "$threads" -td "$threads" \
                -f "$prompt_file" -n 128 --temp "$temp" --seed 1 -c 2048 2>&1 \
                | grep -E ' (encoded|decoded) +[0-9]+ tokens| (n_draft|n_drafted|n_accept|accept) +=' \
                || true
        done
    fi
fi
