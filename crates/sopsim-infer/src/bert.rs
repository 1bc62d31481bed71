//! A BERT sentence encoder in f32 (sentence-transformers' all-MiniLM-L6-v2: post-norm
//! layers, exact GELU, mean pooling over the tokens, L2 normalisation), written for
//! the sizes sopsim embeds: one message, or a batch of them.
//!
//! Sentences are never padded: the dense layers run on the tokens of every sentence of
//! the batch stacked into one matrix, attention runs per sentence and head, and pooling
//! per sentence. So a sentence costs what its own tokens cost, a batch of short ones
//! shares one pass through each weight matrix, and a vector does not depend on what
//! else was in its batch beyond float summation order in the products.
//! Products go through AMX tiles as three bf16 products where the CPU has AMX-BF16
//! ([`crate::bf16x3`]), else through `gemm` on one thread when small (one message: no
//! threads to wake) and on the [`crate::compute`] pool when large.

use gemm_common::Parallelism;

use crate::compute;

/// The shape of a BERT encoder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BertShape {
    /// Entries in the vocabulary.
    pub vocab: usize,
    /// Width of the hidden state.
    pub hidden: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Attention heads per layer.
    pub heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate: usize,
    /// Most tokens a sentence may have (rows of the position embeddings).
    pub positions: usize,
    /// Token types the weights hold embeddings for.
    pub type_vocab: usize,
    /// The layer norms' epsilon.
    pub eps: f32,
}

/// One layer's weights, products' matrices `[out, in]`.
struct Layer {
    /// Query, key and value stacked: `[3 * hidden, hidden]`.
    qkv: Dense,
    qkv_bias: Vec<f32>,
    out: Dense,
    out_bias: Vec<f32>,
    norm1: (Vec<f32>, Vec<f32>),
    up: Dense,
    up_bias: Vec<f32>,
    down: Dense,
    down_bias: Vec<f32>,
    norm2: (Vec<f32>, Vec<f32>),
}

/// A product's matrix: split for AMX tiles where the CPU has them (see
/// [`crate::bf16x3`]), laid out in panels where it has AVX2 but not AVX-512 (see
/// `crate::panels`), else f32 rows for `gemm`.
enum Dense {
    F32(Vec<f32>),
    #[cfg(target_arch = "x86_64")]
    Tiles(crate::bf16x3::Bf16x3),
    Panels(crate::panels::Panels),
}

impl Dense {
    fn new(w: Vec<f32>, n: usize, k: usize) -> Self {
        #[cfg(target_arch = "x86_64")]
        if crate::bf16x3::available() {
            if let Some(t) = crate::bf16x3::Bf16x3::new(&w, n, k) {
                return Dense::Tiles(t);
            }
        }
        match crate::panels::Panels::new(&w, n, k) {
            Some(p) => Dense::Panels(p),
            None => Dense::F32(w),
        }
    }
}

/// The word embeddings, a row of `hidden` values per vocabulary entry: in memory, or
/// read a row at a time from the weights file (a sentence uses dozens of MiniLM's
/// 30,522 rows, 47 MB in all; a mapped file would keep every page a row was read
/// from, and the pages around it, resident).
pub enum Words {
    /// All rows in memory.
    Owned(Vec<f32>),
    /// Rows read from a file when needed.
    #[cfg(unix)]
    InFile {
        /// The file holding the rows.
        file: std::fs::File,
        /// Where the rows start: little-endian f32 values, row after row.
        offset: u64,
        /// f32 values in all rows together.
        values: usize,
    },
}

impl Words {
    /// `values` little-endian f32 values at `offset` in `file`.
    #[cfg(unix)]
    pub fn in_file(file: std::fs::File, offset: u64, values: usize) -> std::io::Result<Words> {
        let end = (values as u64)
            .checked_mul(4)
            .and_then(|b| b.checked_add(offset));
        if !end.is_some_and(|end| file.metadata().is_ok_and(|m| m.len() >= end)) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the word embeddings run past the end of the file",
            ));
        }
        Ok(Words::InFile {
            file,
            offset,
            values,
        })
    }

    fn len(&self) -> usize {
        match self {
            Words::Owned(v) => v.len(),
            #[cfg(unix)]
            Words::InFile { values, .. } => *values,
        }
    }

    /// Row `id` (of `h` values) into `out`. A file that can no longer be read (it was
    /// truncated under the running encoder) reads as zeros.
    fn row(&self, id: usize, h: usize, out: &mut [f32]) {
        match self {
            Words::Owned(v) => out.copy_from_slice(&v[id * h..(id + 1) * h]),
            #[cfg(unix)]
            Words::InFile { file, offset, .. } => {
                use std::os::unix::fs::FileExt;
                let mut bytes = vec![0u8; h * 4];
                let at = offset + (id * h * 4) as u64;
                if file.read_exact_at(&mut bytes, at).is_err() {
                    bytes.fill(0);
                }
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
        }
    }
}

/// A BERT sentence encoder with its weights, ready to embed sentences.
pub struct Bert {
    shape: BertShape,
    words: Words,
    positions: Vec<f32>,
    /// Token type 0's embedding (sentence encoders use no other).
    type0: Vec<f32>,
    norm: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

/// A tensor the weights lack or hold in the wrong size.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {problem}")]
pub struct WeightError {
    /// The tensor's name.
    pub name: String,
    /// What is wrong with it: missing, or how many values it has against those expected.
    pub problem: String,
}

/// Products with fewer multiply-adds than this run on the calling thread.
const PARALLEL_MACS: usize = 1 << 22;

impl Bert {
    /// Builds the encoder from `tensor(name)`, which gives a tensor's f32 values (HF
    /// names, with or without a `bert.` prefix), and `words`, the word embeddings where
    /// they are not read from `tensor`; every size is checked against `shape`.
    pub fn new(
        shape: BertShape,
        tensor: impl Fn(&str) -> Option<Vec<f32>>,
        words: Option<Words>,
    ) -> Result<Bert, WeightError> {
        let get = |name: &str, len: usize| -> Result<Vec<f32>, WeightError> {
            let v = tensor(name)
                .or_else(|| tensor(&format!("bert.{name}")))
                .ok_or_else(|| WeightError {
                    name: name.into(),
                    problem: "missing".into(),
                })?;
            if v.len() != len {
                return Err(WeightError {
                    name: name.into(),
                    problem: format!("{} values, expected {len}", v.len()),
                });
            }
            Ok(v)
        };
        let (h, i) = (shape.hidden, shape.intermediate);
        let norm = |prefix: &str| -> Result<(Vec<f32>, Vec<f32>), WeightError> {
            Ok((
                get(&format!("{prefix}.LayerNorm.weight"), h)?,
                get(&format!("{prefix}.LayerNorm.bias"), h)?,
            ))
        };
        let types = get(
            "embeddings.token_type_embeddings.weight",
            shape.type_vocab * h,
        )?;
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let p = format!("encoder.layer.{l}");
            let mut qkv = Vec::with_capacity(3 * h * h);
            let mut qkv_bias = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                qkv.extend(get(&format!("{p}.attention.self.{part}.weight"), h * h)?);
                qkv_bias.extend(get(&format!("{p}.attention.self.{part}.bias"), h)?);
            }
            layers.push(Layer {
                qkv: Dense::new(qkv, 3 * h, h),
                qkv_bias,
                out: Dense::new(
                    get(&format!("{p}.attention.output.dense.weight"), h * h)?,
                    h,
                    h,
                ),
                out_bias: get(&format!("{p}.attention.output.dense.bias"), h)?,
                norm1: norm(&format!("{p}.attention.output"))?,
                up: Dense::new(get(&format!("{p}.intermediate.dense.weight"), i * h)?, i, h),
                up_bias: get(&format!("{p}.intermediate.dense.bias"), i)?,
                down: Dense::new(get(&format!("{p}.output.dense.weight"), h * i)?, h, i),
                down_bias: get(&format!("{p}.output.dense.bias"), h)?,
                norm2: norm(&format!("{p}.output"))?,
            });
        }
        let word_values = shape.vocab * h;
        let words = match words {
            Some(w) if w.len() == word_values => w,
            Some(w) => {
                return Err(WeightError {
                    name: "embeddings.word_embeddings.weight".into(),
                    problem: format!("{} values, expected {word_values}", w.len()),
                })
            }
            None => Words::Owned(get("embeddings.word_embeddings.weight", word_values)?),
        };
        Ok(Bert {
            words,
            positions: get("embeddings.position_embeddings.weight", shape.positions * h)?,
            type0: types[..h].to_vec(),
            norm: norm("embeddings")?,
            layers,
            shape,
        })
    }

    /// The unit-length mean-pooled embedding of each sentence (its token ids, special
    /// tokens included, at most `positions` of them; ids are checked by the caller's
    /// tokenizer against the vocabulary, and any out of range read as id 0).
    pub fn embed(&self, sentences: &[&[u32]]) -> Vec<Vec<f32>> {
        let s = self.shape;
        let h = s.hidden;
        let spans: Vec<(usize, usize)> = sentences
            .iter()
            .scan(0, |at, ids| {
                let len = ids.len().min(s.positions);
                let span = (*at, len);
                *at += len;
                Some(span)
            })
            .collect();
        let tokens: usize = spans.iter().map(|(_, len)| len).sum();
        let mut x = vec![0f32; tokens * h];
        for (ids, &(start, len)) in sentences.iter().zip(&spans) {
            for (p, &id) in ids.iter().take(len).enumerate() {
                let id = if (id as usize) < s.vocab {
                    id as usize
                } else {
                    0
                };
                let row = &mut x[(start + p) * h..(start + p + 1) * h];
                self.words.row(id, h, row);
                let pos = &self.positions[p * h..(p + 1) * h];
                for (j, r) in row.iter_mut().enumerate() {
                    let word = *r;
                    *r = word + pos[j] + self.type0[j];
                }
            }
        }
        layer_norm(&mut x, h, &self.norm, s.eps);
        let mut qkv = vec![0f32; tokens * 3 * h];
        let mut ctx = vec![0f32; tokens * h];
        let mut attn = vec![0f32; tokens * h];
        let mut up = vec![0f32; tokens * s.intermediate];
        let mut down = vec![0f32; tokens * h];
        for layer in &self.layers {
            linear(&x, tokens, h, &layer.qkv, &layer.qkv_bias, &mut qkv);
            attention(&qkv, &spans, s.heads, h, &mut ctx);
            linear(&ctx, tokens, h, &layer.out, &layer.out_bias, &mut attn);
            for (a, r) in attn.iter_mut().zip(&x) {
                *a += r;
            }
            layer_norm(&mut attn, h, &layer.norm1, s.eps);
            linear(&attn, tokens, h, &layer.up, &layer.up_bias, &mut up);
            gelu_all(&mut up);
            linear(
                &up,
                tokens,
                s.intermediate,
                &layer.down,
                &layer.down_bias,
                &mut down,
            );
            for (d, r) in down.iter_mut().zip(&attn) {
                *d += r;
            }
            layer_norm(&mut down, h, &layer.norm2, s.eps);
            std::mem::swap(&mut x, &mut down);
        }
        spans
            .iter()
            .map(|&(start, len)| {
                let mut mean = vec![0f32; h];
                for t in start..start + len {
                    for (m, v) in mean.iter_mut().zip(&x[t * h..(t + 1) * h]) {
                        *m += v;
                    }
                }
                let n = len.max(1) as f32;
                mean.iter_mut().for_each(|m| *m /= n);
                let norm = mean.iter().map(|m| m * m).sum::<f32>().sqrt().max(1e-12);
                mean.iter_mut().for_each(|m| *m /= norm);
                mean
            })
            .collect()
    }
}

/// `out[t] = x[t] · wᵀ + bias` for `rows` rows of `k` values; `w` is `[n, k]`.
fn linear(x: &[f32], rows: usize, k: usize, w: &Dense, bias: &[f32], out: &mut [f32]) {
    match w {
        Dense::F32(w) => linear_f32(x, rows, k, w, bias, out),
        Dense::Panels(p) => {
            let out = &mut out[..rows * bias.len()];
            for row in out.chunks_exact_mut(bias.len()) {
                row.copy_from_slice(bias);
            }
            p.product(x, rows, out)
        }
        #[cfg(target_arch = "x86_64")]
        Dense::Tiles(t) => {
            if rows > 0 {
                t.product(x, rows, bias, out)
            }
        }
    }
}

fn linear_f32(x: &[f32], rows: usize, k: usize, w: &[f32], bias: &[f32], out: &mut [f32]) {
    let n = bias.len();
    let out = &mut out[..rows * n];
    for row in out.chunks_exact_mut(n) {
        row.copy_from_slice(bias);
    }
    if rows == 0 {
        return;
    }
    let parallel = rows * n * k >= PARALLEL_MACS && compute::threads() > 1;
    let mut run = |parallelism| {
        // gemm's kernels take the destination column-major, so this asks for the
        // transpose: outᵀ (n × rows, column stride n) = w (n × k) · xᵀ (k × rows).
        // SAFETY: every pointer addresses a buffer of the stated rows and strides:
        // `out` is rows × n, `x` rows × k, `w` n × k.
        unsafe {
            gemm_f32::gemm::f32::get_gemm_fn()(
                n,
                rows,
                k,
                out.as_mut_ptr(),
                n as isize,
                1,
                true,
                w.as_ptr(),
                1,
                k as isize,
                x.as_ptr(),
                k as isize,
                1,
                1.0f32,
                1.0f32,
                false,
                false,
                false,
                parallelism,
            )
        }
    };
    match compute::pool().filter(|_| parallel) {
        Some(pool) => pool.install(|| run(Parallelism::Rayon(compute::threads()))),
        None => run(Parallelism::None),
    }
}

/// Self-attention of each sentence and head: `qkv` rows hold query, key and value. A
/// long enough sentence's heads are split over the compute team, which would otherwise
/// wait through it between two products.
fn attention(qkv: &[f32], spans: &[(usize, usize)], heads: usize, h: usize, ctx: &mut [f32]) {
    let work = |start: usize, len: usize, out: HeadsOut| {
        #[cfg(target_arch = "x86_64")]
        if crate::quant::Kernels::detect() >= crate::quant::Kernels::Avx512
            && (h / heads).is_multiple_of(16)
        {
            // SAFETY: AVX-512 kernels are chosen only on CPUs with AVX-512F; `out`
            // addresses the sentence's rows of `ctx`.
            return unsafe { sentence_avx512(qkv, start, len, heads, h, out) };
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has the features the function is compiled for; `out`
            // addresses the sentence's rows of `ctx`.
            return unsafe { sentence_avx2(qkv, start, len, heads, h, out) };
        }
        // SAFETY: `out` addresses the sentence's rows of `ctx`.
        unsafe { sentence::<false>(qkv, start, len, heads, h, out) }
    };
    let parallel = spans.iter().map(|(_, l)| l * l).sum::<usize>() * h >= PARALLEL_ATTENTION;
    let groups = if parallel {
        compute::threads().min(heads)
    } else {
        1
    };
    let per = heads.div_ceil(groups);
    assert!(ctx.len() >= spans.iter().map(|(_, l)| l * h).sum::<usize>());
    let mut tasks = Vec::with_capacity(spans.len() * groups);
    let mut row = 0;
    for &(start, len) in spans {
        for g in 0..groups {
            let out = HeadsOut {
                // SAFETY: in bounds (asserted above); each task writes its own heads'
                // columns of its own sentence's rows.
                rows: unsafe { ctx.as_mut_ptr().add(row * h) },
                first: g * per,
                last: ((g + 1) * per).min(heads),
            };
            tasks.push(move || work(start, len, out));
        }
        row += len;
    }
    if parallel {
        compute::run_all(tasks);
    } else {
        for t in tasks {
            t();
        }
    }
}

/// Attention over this many multiply-adds (rows² × hidden, summed over the sentences)
/// is split over the compute team: a sentence of about sixty tokens.
const PARALLEL_ATTENTION: usize = 1 << 20;

/// What one task of a sentence's attention writes: heads `first..last`, each `h / heads`
/// columns of every row of the sentence, whose first row starts at `rows` (rows of `h`
/// values).
#[derive(Clone, Copy)]
struct HeadsOut {
    rows: *mut f32,
    first: usize,
    last: usize,
}

// SAFETY: the tasks of one attention write disjoint columns or rows (see `attention`).
unsafe impl Send for HeadsOut {}

/// One sentence's attention with AVX-512, a head at a time: the keys transposed so
/// that sixteen keys' scores are one register, weights by sopsim's vectorised exp,
/// the weighted values sixteen dimensions to a register (head size a multiple of 16).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
unsafe fn sentence_avx512(
    qkv: &[f32],
    start: usize,
    len: usize,
    heads: usize,
    h: usize,
    out: HeadsOut,
) {
    use std::arch::x86_64::*;
    let dh = h / heads;
    let scale = _mm512_set1_ps(1.0 / (dh as f32).sqrt());
    let padded = len.div_ceil(16) * 16;
    let mut keys = vec![0f32; dh * padded];
    let mut values = vec![0f32; len * dh];
    let mut scores = vec![0f32; QUERIES * padded];
    let row =
        |j: usize, part: usize, off: usize| &qkv[(start + j) * 3 * h + part * h + off..][..dh];
    for head in out.first..out.last {
        let off = head * dh;
        head_keys(&row, len, off, padded, &mut keys, Some(&mut values));
        // Four queries at a time share each load of the keys, and their sums are four
        // chains the core runs side by side; each query's sums keep their order.
        for first in (0..len).step_by(QUERIES) {
            let queries: [&[f32]; QUERIES] =
                std::array::from_fn(|q| row((first + q).min(len - 1), 0, off));
            let mut max = [_mm512_set1_ps(f32::NEG_INFINITY); QUERIES];
            for b in 0..padded / 16 {
                let mut acc = [_mm512_setzero_ps(); QUERIES];
                for d in 0..dh {
                    let k = _mm512_loadu_ps(keys.as_ptr().add(d * padded + b * 16));
                    for (a, q) in acc.iter_mut().zip(&queries) {
                        *a = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), k, *a);
                    }
                }
                let mask = valid_mask(len, b);
                for (q, a) in acc.iter().enumerate() {
                    let s = _mm512_mul_ps(*a, scale);
                    _mm512_storeu_ps(scores.as_mut_ptr().add(q * padded + b * 16), s);
                    max[q] = _mm512_mask_max_ps(max[q], mask, s, max[q]);
                }
            }
            for (q, max) in max.iter().enumerate().take(len - first) {
                let scores = &mut scores[q * padded..(q + 1) * padded];
                let max = _mm512_set1_ps(_mm512_reduce_max_ps(*max));
                let mut total = _mm512_setzero_ps();
                for b in 0..padded / 16 {
                    let x = _mm512_sub_ps(_mm512_loadu_ps(scores.as_ptr().add(b * 16)), max);
                    let mut lanes = [0f32; 16];
                    _mm512_storeu_ps(lanes.as_mut_ptr(), x);
                    let e =
                        _mm512_maskz_loadu_ps(valid_mask(len, b), crate::math::exp(lanes).as_ptr());
                    _mm512_storeu_ps(scores.as_mut_ptr().add(b * 16), e);
                    total = _mm512_add_ps(total, e);
                }
                let inv = _mm512_set1_ps(1.0 / _mm512_reduce_add_ps(total));
                let dest = out.rows.add((first + q) * h + off);
                // Up to four sixteen-wide chunks of the head at once, for the same reason.
                for c0 in (0..dh / 16).step_by(4) {
                    let chunks = (dh / 16 - c0).min(4);
                    let mut acc = [_mm512_setzero_ps(); 4];
                    for (j, p) in scores[..len].iter().enumerate() {
                        let p = _mm512_set1_ps(*p);
                        for (c, a) in acc.iter_mut().enumerate().take(chunks) {
                            let v = _mm512_loadu_ps(values.as_ptr().add(j * dh + (c0 + c) * 16));
                            *a = _mm512_fmadd_ps(p, v, *a);
                        }
                    }
                    for (c, a) in acc.iter().enumerate().take(chunks) {
                        _mm512_storeu_ps(dest.add((c0 + c) * 16), _mm512_mul_ps(*a, inv));
                    }
                }
            }
        }
    }
}

/// Queries of one head whose scores [`sentence_avx512`] and [`sentence_avx2`] compute
/// together.
#[cfg(target_arch = "x86_64")]
const QUERIES: usize = 4;

/// The lanes of the `block`th sixteen keys that hold one of `len` keys.
#[cfg(target_arch = "x86_64")]
fn valid_mask(len: usize, block: usize) -> u16 {
    let valid = (len - block * 16).min(16);
    if valid == 16 {
        0xFFFF
    } else {
        (1u32 << valid) as u16 - 1
    }
}

/// One sentence's attention with AVX2 and FMA, as [`sentence_avx512`] computes it with
/// eight keys to a register: four queries share each load of the transposed keys, and
/// the weighted values of a query are the head's dimensions in four registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sentence_avx2(
    qkv: &[f32],
    start: usize,
    len: usize,
    heads: usize,
    h: usize,
    out: HeadsOut,
) {
    use std::arch::x86_64::*;
    const LANES: usize = 8;
    let dh = h / heads;
    if !dh.is_multiple_of(LANES) || dh > 4 * LANES {
        return sentence::<true>(qkv, start, len, heads, h, out);
    }
    let chunks = dh / LANES;
    let scale = 1.0 / (dh as f32).sqrt();
    let padded = len.div_ceil(crate::math::L) * crate::math::L;
    let mut keys = vec![0f32; dh * padded];
    let mut values = vec![0f32; len * dh];
    let mut scores = vec![0f32; QUERIES * padded];
    let row =
        |j: usize, part: usize, off: usize| &qkv[(start + j) * 3 * h + part * h + off..][..dh];
    for head in out.first..out.last {
        let off = head * dh;
        head_keys(&row, len, off, padded, &mut keys, Some(&mut values));
        for first in (0..len).step_by(QUERIES) {
            let queries: [&[f32]; QUERIES] =
                std::array::from_fn(|q| row((first + q).min(len - 1), 0, off));
            for b in 0..padded / LANES {
                let mut acc = [_mm256_setzero_ps(); QUERIES];
                for d in 0..dh {
                    let k = _mm256_loadu_ps(keys.as_ptr().add(d * padded + b * LANES));
                    for (a, q) in acc.iter_mut().zip(&queries) {
                        *a = _mm256_fmadd_ps(_mm256_set1_ps(q[d]), k, *a);
                    }
                }
                for (q, a) in acc.iter().enumerate() {
                    _mm256_storeu_ps(scores.as_mut_ptr().add(q * padded + b * LANES), *a);
                }
            }
            for q in 0..QUERIES.min(len - first) {
                let scores = &mut scores[q * padded..(q + 1) * padded];
                let total = softmax_weights(scores, len, scale);
                let mut acc = [_mm256_setzero_ps(); 4];
                for (j, p) in scores[..len].iter().enumerate() {
                    let p = _mm256_set1_ps(*p);
                    for (c, a) in acc.iter_mut().enumerate().take(chunks) {
                        let v = _mm256_loadu_ps(values.as_ptr().add(j * dh + c * LANES));
                        *a = _mm256_fmadd_ps(p, v, *a);
                    }
                }
                let inv = _mm256_set1_ps(1.0 / total);
                let dest = out.rows.add((first + q) * h + off);
                for (c, a) in acc.iter().enumerate().take(chunks) {
                    _mm256_storeu_ps(dest.add(c * LANES), _mm256_mul_ps(*a, inv));
                }
            }
        }
    }
}

/// `a · b + c`, fused where the caller is compiled for FMA (unfused, `mul_add` would be
/// a call into libm for every element).
#[inline(always)]
fn mul_add<const FUSED: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FUSED {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// One sentence's attention, a head at a time, in loops a compiler turns into vectors:
/// the keys transposed so that the scores of sixteen keys are sixteen lanes, the
/// weights by sopsim's [`crate::math::exp`] sixteen at a time, the weighted values
/// summed along the head's dimensions.
#[inline(always)]
unsafe fn sentence<const FUSED: bool>(
    qkv: &[f32],
    start: usize,
    len: usize,
    heads: usize,
    h: usize,
    out: HeadsOut,
) {
    use crate::math::L;
    let dh = h / heads;
    let scale = 1.0 / (dh as f32).sqrt();
    let padded = len.div_ceil(L) * L;
    let mut keys = vec![0f32; dh * padded];
    let mut scores = vec![0f32; padded];
    let row =
        |j: usize, part: usize, off: usize| &qkv[(start + j) * 3 * h + part * h + off..][..dh];
    for head in out.first..out.last {
        let off = head * dh;
        head_keys(&row, len, off, padded, &mut keys, None);
        for i in 0..len {
            let q = row(i, 0, off);
            scores.fill(0.0);
            for (d, qd) in q.iter().enumerate() {
                let keys = &keys[d * padded..(d + 1) * padded];
                for (s, k) in scores.iter_mut().zip(keys) {
                    *s = mul_add::<FUSED>(*qd, *k, *s);
                }
            }
            let total = softmax_weights(&mut scores, len, scale);
            let inv = 1.0 / total;
            let dest = std::slice::from_raw_parts_mut(out.rows.add(i * h + off), dh);
            dest.fill(0.0);
            for (j, p) in scores[..len].iter().enumerate() {
                for (r, v) in dest.iter_mut().zip(row(j, 2, off)) {
                    *r = mul_add::<FUSED>(*p, *v, *r);
                }
            }
            for r in dest.iter_mut() {
                *r *= inv;
            }
        }
    }
}

/// One head's keys transposed into `keys` (dimension by dimension, `padded` keys to a
/// dimension) and, if asked, its values copied into `values` row by row: `row(j, part,
/// off)` is part `part` (0 query, 1 key, 2 value) of token `j` from column `off`.
#[inline(always)]
fn head_keys<'a>(
    row: &impl Fn(usize, usize, usize) -> &'a [f32],
    len: usize,
    off: usize,
    padded: usize,
    keys: &mut [f32],
    mut values: Option<&mut [f32]>,
) {
    for j in 0..len {
        for (d, k) in row(j, 1, off).iter().enumerate() {
            keys[d * padded + j] = *k;
        }
        if let Some(values) = values.as_deref_mut() {
            let v = row(j, 2, off);
            values[j * v.len()..(j + 1) * v.len()].copy_from_slice(v);
        }
    }
}

/// The first `len` of `scores` (raw query-key products, `scores.len()` a multiple of
/// [`crate::math::L`]) scaled and turned into unnormalised softmax weights
/// ([`crate::math::softmax_weights`]), the rest zero; returns their sum.
#[inline(always)]
fn softmax_weights(scores: &mut [f32], len: usize, scale: f32) -> f32 {
    for s in &mut scores[..len] {
        *s *= scale;
    }
    crate::math::softmax_weights(len, scores)
}

/// Sum of `term(v)` over `row` in sixteen lanes: independent chains the compiler
/// vectorises, where one running sum is a chain of dependent additions (and no less
/// rounded).
#[inline(always)]
fn lane_sum(row: &[f32], term: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = row.chunks_exact(16);
    let tail: f32 = chunks.remainder().iter().map(|v| term(*v)).sum();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += term(*v);
        }
    }
    crate::math::sum16(&acc) + tail
}

fn layer_norm(x: &mut [f32], h: usize, (w, b): &(Vec<f32>, Vec<f32>), eps: f32) {
    for row in x.chunks_exact_mut(h) {
        let mean = lane_sum(row, |v| v) / h as f32;
        let var = lane_sum(row, |v| (v - mean) * (v - mean)) / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(w).zip(b) {
            *v = (*v - mean) * inv * w + b;
        }
    }
}

/// Elements per task when GELU is spread over the compute team: a message of forty
/// tokens has four (its helpers would otherwise wait through it).
const GELU_CHUNK: usize = 1 << 14;

/// The exact GELU over every value, on the pool when there are many.
fn gelu_all(v: &mut [f32]) {
    if v.len() >= 2 * GELU_CHUNK && compute::threads() > 1 {
        compute::run_all(
            v.chunks_mut(GELU_CHUNK)
                .map(|c| move || gelu_slice(c))
                .collect(),
        );
    } else {
        gelu_slice(v);
    }
}

fn gelu_slice(v: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::Kernels::detect() >= crate::quant::Kernels::Avx512 {
        // SAFETY: AVX-512 kernels are chosen only on CPUs with AVX-512F and DQ.
        return unsafe { gelu_avx512(v) };
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { gelu_avx2(v) };
    }
    v.iter_mut().for_each(|x| *x = gelu(*x));
}

/// The same loop sixteen at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
unsafe fn gelu_avx512(v: &mut [f32]) {
    v.iter_mut().for_each(|x| *x = gelu(*x));
}

/// The same loop compiled for AVX2 and FMA: branch-free, so it runs eight at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_avx2(v: &mut [f32]) {
    v.iter_mut().for_each(|x| *x = gelu(*x));
}

/// The exact GELU, `x Φ(x)`: erf by Abramowitz and Stegun 7.1.26 (absolute error below
/// 1.5e-7) over a branch-free exp, so the loop vectorises.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    (1.0 - poly * exp_neg(-a * a)).copysign(x)
}

/// e^x for x ≤ 0 (relative error about 2e-7), without branches: x = n ln 2 + r with
/// |r| ≤ ln 2 / 2, a degree-6 polynomial for e^r, and 2^n put into the exponent bits.
#[inline(always)]
fn exp_neg(x: f32) -> f32 {
    let x = x.max(-87.0);
    // Ties to even: one vector instruction (away-from-zero rounding is not).
    let n = (x * std::f32::consts::LOG2_E).round_ties_even();
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (0.166_666_67
                    + r * (0.041_666_67 + r * (0.008_333_334 + r * 0.001_388_889)))));
    // SAFETY: `n` is a finite whole number in −126..=0 (x was clamped), so the plain
    // conversion (which vectorises, unlike `as`'s saturating one) is exact.
    let n = unsafe { n.to_int_unchecked::<i32>() };
    p * f32::from_bits(((n + 127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_vector_attentions_match_the_portable_one() {
        let (heads, h) = (12, 384);
        for len in [1, 5, 17, 65] {
            let qkv: Vec<f32> = (0..len * 3 * h)
                .map(|i| ((i * 7919 % 1009) as f32 - 504.0) / 300.0)
                .collect();
            let all = |out: &mut [f32]| HeadsOut {
                rows: out.as_mut_ptr(),
                first: 0,
                last: heads,
            };
            let mut want = vec![0f32; len * h];
            // SAFETY: `want` holds the sentence's rows.
            unsafe { sentence::<false>(&qkv, 0, len, heads, h, all(&mut want)) };
            let mut got = vec![0f32; len * h];
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                // SAFETY: the CPU has the features.
                unsafe { sentence_avx2(&qkv, 0, len, heads, h, all(&mut got)) };
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "{len}: {g} against {w}"
                    );
                }
            }
            if crate::quant::Kernels::detect() >= crate::quant::Kernels::Avx512 {
                // SAFETY: AVX-512 kernels are chosen only on CPUs with AVX-512F.
                unsafe { sentence_avx512(&qkv, 0, len, heads, h, all(&mut got)) };
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "{len}: {g} against {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0f32, 0.0f64),
            (0.5, 0.520_499_877_8),
            (1.0, 0.842_700_792_9),
            (-2.0, -0.995_322_265),
            (3.5, 0.999_999_256_9),
        ] {
            assert!((f64::from(erf(x)) - want).abs() < 2e-7, "erf({x})");
        }
    }

    #[test]
    fn linear_is_a_product_with_bias() {
        let x = [1.0, 2.0, 3.0, 4.0]; // 2 rows × 2
        let w = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // 3 outputs × 2
        let mut out = [0.0; 6];
        linear_f32(&x, 2, 2, &w, &[0.5, 0.0, -1.0], &mut out);
        assert_eq!(out, [1.5, 2.0, 2.0, 3.5, 4.0, 6.0]);
    }
}
