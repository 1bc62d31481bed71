//! The transformer forward pass (llama, qwen2, qwen3 and gemma3) over a batch of rows from any number
//! of sequences, each row at its own position in its own sequence's KV cache.
//!
//! Products read the weights once per step for every row in it (see [`crate::quant`]),
//! attention runs per row and head, and every other operation is per row. So a row's
//! result is the same bits whatever else shares its step, whether its prompt was
//! processed in one piece or several, and whether part of it came from a reused cache.

use crate::error::InferError;

use std::path::Path;

use crate::attention::{attend, HeadCache, Query, Scratch as AttentionScratch};
use crate::gguf::{Arch, GgufError, GgufFile, ModelShape};
use crate::kv::KvCache;
use crate::quant::{
    matmul, matmul_panel, Acts, Kernels, Packed, QView, WeightMemory, WeightType, PANEL,
};

/// A weight matrix in the file: `rows` outputs of `cols` inputs.
#[derive(Debug, Clone, Copy)]
struct Matrix {
    ty: WeightType,
    rows: usize,
    cols: usize,
    start: usize,
    len: usize,
}

struct Layer {
    attn_norm: Vec<f32>,
    q: Packed,
    k: Packed,
    v: Packed,
    q_bias: Option<Vec<f32>>,
    k_bias: Option<Vec<f32>>,
    v_bias: Option<Vec<f32>>,
    /// Qwen3's per-head RMS norms of Q and K (one head's width each).
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    o: Packed,
    /// Gemma 3's norms of the attention's and the MLP's outputs.
    post_attn_norm: Option<Vec<f32>>,
    post_ffn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    gate: Packed,
    up: Packed,
    down: Packed,
}

/// A loaded model: its GGUF file, checked shape and repacked weights, ready to run.
pub struct Model {
    file: GgufFile,
    /// The architecture's shape, as read from the file.
    pub shape: ModelShape,
    /// Rows of the token embedding (and of the output head).
    pub vocab: usize,
    /// Looked up row by row where the file has it.
    embed: Matrix,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    head: Packed,
    kernels: Kernels,
    /// Rotary frequencies, one per pair of dimensions.
    inv_freq: Vec<f64>,
    /// Sliding-window layers' own (Gemma 3).
    window_inv_freq: Option<Vec<f64>>,
}

/// Which logits a row asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// Every token's.
    All,
    /// Only these tokens' (for choosing among options).
    Only(Vec<u32>),
}

/// Tokens to run after what `cache` holds, and the rows whose logits are wanted.
pub struct Segment<'a> {
    /// The sequence's cache, which the tokens' keys and values are appended to.
    pub cache: &'a mut KvCache,
    /// The new tokens, in order.
    pub tokens: &'a [u32],
    /// (index into `tokens`, what to compute there).
    pub wants: Vec<(usize, Want)>,
}

/// Buffers reused from step to step.
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    acts: Acts,
    /// Per row, the rotary (sin, cos) of each pair of dimensions: global layers', and
    /// sliding-window layers'.
    rotary: Vec<(f32, f32)>,
    window_rotary: Vec<(f32, f32)>,
    logits: Vec<f32>,
}

impl Model {
    /// Reads and checks a GGUF file: every tensor the architecture needs, with the
    /// right shape and a supported type, inside the file.
    pub fn load(path: &Path) -> Result<Self, GgufError> {
        Self::from_file(GgufFile::open(path)?)
    }

    /// [`Model::load`] for a file already parsed.
    pub fn from_file(file: GgufFile) -> Result<Self, GgufError> {
        let shape = ModelShape::read(&file)?;
        if shape.head_dim % 8 != 0 {
            return Err(GgufError::meta(
                &format!("{}.attention.head_count", shape.arch.name()),
                format!(
                    "heads of {} values (a multiple of 8 is needed)",
                    shape.head_dim
                ),
            ));
        }
        let s = &shape;
        let (qd, kvd) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        let embed_info = file
            .tensors
            .get("token_embd.weight")
            .ok_or_else(|| missing("token_embd.weight"))?;
        let vocab = embed_info
            .dims
            .get(1)
            .and_then(|v| usize::try_from(*v).ok())
            .filter(|v| (1..=1 << 22).contains(v))
            .ok_or_else(|| GgufError::Tensor {
                name: "token_embd.weight".into(),
                message: format!(
                    "dimensions {:?} (expected [{}, vocabulary])",
                    embed_info.dims, s.dim
                ),
            })?;
        let embed = matrix(&file, "token_embd.weight", vocab, s.dim)?;
        let head_name = if file.tensors.contains_key("output.weight") {
            "output.weight"
        } else {
            "token_embd.weight"
        };
        let head_matrix = (head_name.to_string(), vocab, s.dim);
        // Every packed matrix in one allocation (see `quant::WeightMemory`).
        let mut sizes = Vec::with_capacity(1 + 7 * s.layers);
        for (name, rows, cols) in (0..s.layers)
            .flat_map(|i| layer_matrices(s, i))
            .chain([head_matrix.clone()])
        {
            let m = matrix(&file, &name, rows, cols)?;
            sizes.push(
                Packed::size(m.ty, rows, cols).map_err(|source| GgufError::Weight {
                    name: name.clone(),
                    source,
                })?,
            );
        }
        let mut memory = WeightMemory::for_parts(sizes).map_err(|source| GgufError::Weight {
            name: "every weight".into(),
            source,
        })?;
        let mut layers = Vec::with_capacity(s.layers);
        for i in 0..s.layers {
            let n = |part: &str| format!("blk.{i}.{part}");
            let bias = |part: &str, len: usize| -> Result<Option<Vec<f32>>, GgufError> {
                match s.arch {
                    Arch::Qwen2 => vector(&file, &n(part), len).map(Some),
                    Arch::Llama | Arch::Qwen3 | Arch::Gemma3 => Ok(None),
                }
            };
            let head_norm = |part: &str| -> Result<Option<Vec<f32>>, GgufError> {
                match s.arch {
                    Arch::Qwen3 | Arch::Gemma3 => vector(&file, &n(part), s.head_dim).map(Some),
                    Arch::Llama | Arch::Qwen2 => Ok(None),
                }
            };
            let post_norm = |part: &str| -> Result<Option<Vec<f32>>, GgufError> {
                match s.arch {
                    Arch::Gemma3 => vector(&file, &n(part), s.dim).map(Some),
                    Arch::Llama | Arch::Qwen2 | Arch::Qwen3 => Ok(None),
                }
            };
            let mut next = |(name, rows, cols): (String, usize, usize)| {
                packed(&file, &mut memory, &name, rows, cols)
            };
            let [q, k, v, o, gate, up, down] = layer_matrices(s, i);
            layers.push(Layer {
                attn_norm: vector(&file, &n("attn_norm.weight"), s.dim)?,
                q: next(q)?,
                k: next(k)?,
                v: next(v)?,
                q_bias: bias("attn_q.bias", qd)?,
                k_bias: bias("attn_k.bias", kvd)?,
                v_bias: bias("attn_v.bias", kvd)?,
                q_norm: head_norm("attn_q_norm.weight")?,
                k_norm: head_norm("attn_k_norm.weight")?,
                o: next(o)?,
                post_attn_norm: post_norm("post_attention_norm.weight")?,
                post_ffn_norm: post_norm("post_ffw_norm.weight")?,
                ffn_norm: vector(&file, &n("ffn_norm.weight"), s.dim)?,
                gate: next(gate)?,
                up: next(up)?,
                down: next(down)?,
            });
        }
        // The embedding stays in the file (a token reads one row), so a head tied to
        // it is packed from the file without releasing its pages.
        let head = if head_name == "output.weight" {
            packed(&file, &mut memory, head_name, vocab, s.dim)?
        } else {
            pack(&file, &mut memory, head_name, &embed)?
        };
        let norm = vector(&file, "output_norm.weight", s.dim)?;
        let half = s.head_dim / 2;
        // Llama 3.1 and 3.2 divide each pair's frequency by a factor of their own, as
        // llama.cpp does with this tensor.
        let factors = match file.tensors.contains_key(ROPE_FREQS) {
            true => vector(&file, ROPE_FREQS, half)?,
            false => vec![1.0; half],
        };
        if let Some(bad) = factors.iter().find(|f| **f <= 0.0) {
            return Err(GgufError::Tensor {
                name: ROPE_FREQS.into(),
                message: format!("a frequency factor of {bad} (they must be positive)"),
            });
        }
        let frequencies = |base: f32| -> Vec<f64> {
            (0..half)
                .map(|i| {
                    f64::from(base).powf(-2.0 * i as f64 / s.head_dim as f64)
                        / f64::from(factors[i])
                })
                .collect()
        };
        let inv_freq = frequencies(s.rope_base);
        let window_inv_freq = s.window.as_ref().map(|w| frequencies(w.rope_base));
        Ok(Self {
            shape,
            vocab,
            embed,
            layers,
            norm,
            head,
            kernels: Kernels::detect(),
            inv_freq,
            window_inv_freq,
            file,
        })
    }

    /// The GGUF file the model was loaded from.
    pub fn file(&self) -> &GgufFile {
        &self.file
    }

    /// The kernels the model's products run on.
    pub fn kernels(&self) -> Kernels {
        self.kernels
    }

    /// The weight bytes one token of single-stream decode reads: every layer's matrices
    /// and the output head as packed (the embedding gives the token one row). Over the
    /// machine's read bandwidth, this is decode's roofline.
    pub fn decode_bytes(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down]
                    .iter()
                    .map(|m| m.bytes())
                    .sum::<usize>()
            })
            .sum();
        layers + self.head.bytes()
    }

    /// An empty KV cache sized for this model's layers and KV heads.
    pub fn new_cache(&self) -> KvCache {
        KvCache::new(self.shape.layers, self.shape.kv_heads * self.shape.head_dim)
    }

    fn view(&self, m: &Matrix) -> QView<'_> {
        QView {
            ty: m.ty,
            rows: m.rows,
            cols: m.cols,
            data: &self.file.bytes()[m.start..m.start + m.len],
        }
    }

    /// Runs every segment's tokens; returns, per segment, the logits it asked for (in
    /// the order of its `wants`).
    pub fn forward(
        &self,
        scratch: &mut Scratch,
        segments: &mut [Segment<'_>],
    ) -> Result<Vec<Vec<Vec<f32>>>, InferError> {
        let s = &self.shape;
        let (dim, qd, kvd, hd) = (
            s.dim,
            s.heads * s.head_dim,
            s.kv_heads * s.head_dim,
            s.head_dim,
        );
        // Each row: (segment, position).
        let mut rows: Vec<(usize, usize)> = Vec::new();
        for (i, seg) in segments.iter_mut().enumerate() {
            let start = seg.cache.len();
            let end = start + seg.tokens.len();
            if end > s.positions {
                return Err(InferError::TooLong {
                    tokens: end,
                    positions: s.positions,
                });
            }
            if let Some(bad) = seg.tokens.iter().find(|t| **t as usize >= self.vocab) {
                return Err(InferError::UnknownToken {
                    token: *bad,
                    vocab: self.vocab,
                });
            }
            seg.cache.reserve(end)?;
            rows.extend((start..end).map(|p| (i, p)));
        }
        let n = rows.len();
        if n == 0 {
            return Ok(segments.iter().map(|_| Vec::new()).collect());
        }
        let sc = scratch;
        sc.x.resize(n * dim, 0.0);
        let embed = self.view(&self.embed);
        for (r, tok) in segments
            .iter()
            .flat_map(|seg| seg.tokens.iter())
            .enumerate()
        {
            embed.dequantize_row(*tok as usize, &mut sc.x[r * dim..(r + 1) * dim]);
        }
        if s.arch == Arch::Gemma3 {
            let scale = (dim as f32).sqrt();
            sc.x.iter_mut().for_each(|v| *v *= scale);
        }
        rotary_table(&self.inv_freq, &rows, &mut sc.rotary);
        if let Some(freq) = &self.window_inv_freq {
            rotary_table(freq, &rows, &mut sc.window_rotary);
        }
        for (li, layer) in self.layers.iter().enumerate() {
            rms_norm(&sc.x, &layer.attn_norm, s.rms_eps, &mut sc.h);
            self.products(
                &sc.h,
                &mut sc.acts,
                &mut [
                    (&layer.q, &mut sc.q),
                    (&layer.k, &mut sc.k),
                    (&layer.v, &mut sc.v),
                ],
            );
            for (buf, bias) in [
                (&mut sc.q, &layer.q_bias),
                (&mut sc.k, &layer.k_bias),
                (&mut sc.v, &layer.v_bias),
            ] {
                if let Some(b) = bias {
                    for row in buf.chunks_exact_mut(b.len()) {
                        row.iter_mut().zip(b).for_each(|(x, b)| *x += b);
                    }
                }
            }
            for (buf, norm) in [(&mut sc.q, &layer.q_norm), (&mut sc.k, &layer.k_norm)] {
                if let Some(w) = norm {
                    rms_norm_in_place(buf, w, s.rms_eps);
                }
            }
            let half = hd / 2;
            let windowed = s.window.as_ref().filter(|w| w.covers(li));
            let table = match windowed {
                Some(_) => &sc.window_rotary,
                None => &sc.rotary,
            };
            for r in 0..n {
                let rot = &table[r * half..(r + 1) * half];
                self.rope(&mut sc.q[r * qd..(r + 1) * qd], rot);
                self.rope(&mut sc.k[r * kvd..(r + 1) * kvd], rot);
            }
            for (r, &(seg, pos)) in rows.iter().enumerate() {
                segments[seg].cache.store(
                    li,
                    pos,
                    &sc.k[r * kvd..(r + 1) * kvd],
                    &sc.v[r * kvd..(r + 1) * kvd],
                );
            }
            sc.att.resize(n * qd, 0.0);
            let window = windowed.map(|w| w.size);
            self.attention(li, window, segments, &rows, &sc.q, &mut sc.att);
            self.products(&sc.att, &mut sc.acts, &mut [(&layer.o, &mut sc.h)]);
            if let Some(w) = &layer.post_attn_norm {
                rms_norm_in_place(&mut sc.h, w, s.rms_eps);
            }
            add(&mut sc.x, &sc.h);
            rms_norm(&sc.x, &layer.ffn_norm, s.rms_eps, &mut sc.h);
            self.products(
                &sc.h,
                &mut sc.acts,
                &mut [(&layer.gate, &mut sc.gate), (&layer.up, &mut sc.up)],
            );
            let activation = match s.arch {
                Arch::Gemma3 => crate::math::gelu_mul,
                Arch::Llama | Arch::Qwen2 | Arch::Qwen3 => crate::math::silu_mul,
            };
            gated_all(activation, &mut sc.gate, &sc.up, s.ffn);
            self.products(&sc.gate, &mut sc.acts, &mut [(&layer.down, &mut sc.h)]);
            if let Some(w) = &layer.post_ffn_norm {
                rms_norm_in_place(&mut sc.h, w, s.rms_eps);
            }
            add(&mut sc.x, &sc.h);
        }
        for seg in segments.iter_mut() {
            seg.cache.push_tokens(seg.tokens);
        }
        self.logits(sc, segments)
    }

    /// The logits each segment asked for.
    fn logits(
        &self,
        sc: &mut Scratch,
        segments: &[Segment<'_>],
    ) -> Result<Vec<Vec<Vec<f32>>>, InferError> {
        let dim = self.shape.dim;
        // Rows wanting every logit go through the head together.
        let mut all_rows: Vec<usize> = Vec::new();
        let mut first = 0;
        let mut out: Vec<Vec<Vec<f32>>> = Vec::with_capacity(segments.len());
        let mut only: Vec<(usize, usize, usize, Vec<u32>)> = Vec::new();
        for (si, seg) in segments.iter().enumerate() {
            out.push(vec![Vec::new(); seg.wants.len()]);
            for (wi, (row, want)) in seg.wants.iter().enumerate() {
                if *row >= seg.tokens.len() {
                    return Err(InferError::NoSuchRow {
                        row: *row,
                        rows: seg.tokens.len(),
                    });
                }
                match want {
                    Want::All => all_rows.push(first + row),
                    Want::Only(ids) => {
                        if let Some(bad) = ids.iter().find(|t| **t as usize >= self.vocab) {
                            return Err(InferError::UnknownToken {
                                token: *bad,
                                vocab: self.vocab,
                            });
                        }
                        only.push((si, wi, first + row, ids.clone()))
                    }
                }
            }
            first += seg.tokens.len();
        }
        let gather = |rows: &[usize], h: &mut Vec<f32>| {
            let mut x = Vec::with_capacity(rows.len() * dim);
            for &r in rows {
                x.extend_from_slice(&sc.x[r * dim..(r + 1) * dim]);
            }
            rms_norm(&x, &self.norm, self.shape.rms_eps, h);
        };
        if !all_rows.is_empty() {
            let mut h = Vec::new();
            gather(&all_rows, &mut h);
            // Reused from step to step: a fresh buffer of this size costs page faults.
            let mut logits = std::mem::take(&mut sc.logits);
            self.products(&h, &mut sc.acts, &mut [(&self.head, &mut logits)]);
            let mut k = 0;
            for (si, seg) in segments.iter().enumerate() {
                for (wi, (_, want)) in seg.wants.iter().enumerate() {
                    if *want == Want::All {
                        out[si][wi] = logits[k * self.vocab..(k + 1) * self.vocab].to_vec();
                        k += 1;
                    }
                }
            }
            sc.logits = logits;
        }
        // Only the panels holding the wanted tokens' rows: the same bits as the whole
        // head would give them.
        let mut panel = vec![0f32; PANEL];
        for (si, wi, row, ids) in only {
            let mut h = Vec::new();
            gather(&[row], &mut h);
            sc.acts.quantize(self.head.ty().act_format(), &h, dim);
            let mut values = Vec::with_capacity(ids.len());
            let mut computed = usize::MAX;
            for id in ids {
                let p = id as usize / PANEL;
                if p != computed {
                    matmul_panel(self.kernels, &self.head, &sc.acts, p, &mut panel);
                    computed = p;
                }
                values.push(panel[id as usize % PANEL]);
            }
            out[si][wi] = values;
        }
        Ok(out)
    }

    /// `out = x · Wᵀ` for each matrix of `products` (all of `x`'s width), the
    /// activations quantised once for all of them where their formats agree.
    fn products(&self, x: &[f32], acts: &mut Acts, products: &mut [(&Packed, &mut Vec<f32>)]) {
        let mut ready = None;
        for (w, out) in products.iter_mut() {
            let format = w.ty().act_format();
            if ready != Some(format) {
                acts.quantize(format, x, w.cols());
                ready = Some(format);
            }
            out.resize(acts.tokens() * w.rows(), 0.0);
            matmul(self.kernels, w, acts, out);
        }
    }

    /// Attention of every row over its sequence's cache in layer `li` (over the last
    /// `window` positions only, in a sliding-window layer), one task per sequence and
    /// KV head (and per part of a sequence's rows when there are fewer tasks than
    /// threads to keep busy).
    fn attention(
        &self,
        li: usize,
        window: Option<usize>,
        segments: &[Segment<'_>],
        rows: &[(usize, usize)],
        q: &[f32],
        att: &mut [f32],
    ) {
        let s = &self.shape;
        let (hd, kv_heads) = (s.head_dim, s.kv_heads);
        let width = (s.heads / kv_heads) * hd;
        let scale = 1.0 / (hd as f32).sqrt();
        // Each row's outputs for one KV head's query heads, by row and KV head.
        let mut outs: Vec<Option<&mut [f32]>> = att.chunks_exact_mut(width).map(Some).collect();
        let mut spans: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        let mut start = 0;
        for (si, seg) in segments.iter().enumerate() {
            spans.push((si, start..start + seg.tokens.len()));
            start += seg.tokens.len();
        }
        let wanted = crate::compute::threads() * 2;
        if spans.len() * kv_heads < wanted {
            let parts = wanted.div_ceil(spans.len() * kv_heads);
            spans = spans
                .into_iter()
                .flat_map(|(si, r)| {
                    let per = r.len().div_ceil(parts).max(1);
                    (r.start..r.end)
                        .step_by(per)
                        .map(move |a| (si, a..(a + per).min(r.end)))
                })
                .collect();
        }
        let mut tasks = Vec::with_capacity(spans.len() * kv_heads);
        for (si, span) in spans {
            let (keys, values) = segments[si].cache.layer(li);
            for g in 0..kv_heads {
                let queries: Vec<(usize, &mut [f32])> = span
                    .clone()
                    .filter_map(|r| outs[r * kv_heads + g].take().map(|o| (r, o)))
                    .collect();
                tasks.push(move || {
                    let cache = HeadCache {
                        k: keys,
                        v: values,
                        width: kv_heads * hd,
                        offset: g * hd,
                    };
                    let mut queries: Vec<Query<'_>> = queries
                        .into_iter()
                        .map(|(r, out)| Query {
                            q: &q[(r * kv_heads + g) * width..][..width],
                            from: window.map_or(0, |w| (rows[r].1 + 1).saturating_sub(w)),
                            len: rows[r].1 + 1,
                            out,
                        })
                        .collect();
                    SCRATCH.with(|s| attend(&cache, hd, scale, &mut queries, &mut s.borrow_mut()));
                });
            }
        }
        crate::compute::run_all(tasks);
    }

    /// Rotary position embedding, in place, for every head in `x` (`rot`: the row's
    /// (sin, cos) per pair of dimensions).
    fn rope(&self, x: &mut [f32], rot: &[(f32, f32)]) {
        let hd = self.shape.head_dim;
        let half = hd / 2;
        for head in x.chunks_exact_mut(hd) {
            for (i, &(sin, cos)) in rot.iter().enumerate() {
                let (a, b) = match self.shape.arch {
                    Arch::Llama => (2 * i, 2 * i + 1),
                    Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * cos - x1 * sin;
                head[b] = x0 * sin + x1 * cos;
            }
        }
    }
}

thread_local! {
    /// Each compute thread's attention buffers.
    static SCRATCH: std::cell::RefCell<AttentionScratch> = std::cell::RefCell::default();
}

/// The rotary (sin, cos) of every pair of dimensions (`inv_freq`) at each row's
/// position.
fn rotary_table(inv_freq: &[f64], rows: &[(usize, usize)], table: &mut Vec<(f32, f32)>) {
    table.clear();
    for &(_, pos) in rows {
        table.extend(inv_freq.iter().map(|f| {
            let (sin, cos) = (pos as f64 * f).sin_cos();
            (sin as f32, cos as f32)
        }));
    }
}

/// A gated activation (`gate = act(gate) · up`, such as [`crate::math::silu_mul`]) over
/// every row, spread over the compute threads.
fn gated_all(activation: fn(&mut [f32], &[f32]), gate: &mut [f32], up: &[f32], width: usize) {
    let rows = gate.len() / width;
    let per = rows.div_ceil(crate::compute::threads()).max(1) * width;
    let tasks: Vec<_> = gate
        .chunks_mut(per)
        .zip(up.chunks(per))
        .map(|(g, u)| move || activation(g, u))
        .collect();
    crate::compute::run_all(tasks);
}

fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// [`rms_norm_in_place`] of a copy of `x`, into `out`.
fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut Vec<f32>) {
    out.clear();
    out.extend_from_slice(x);
    rms_norm_in_place(out, w, eps);
}

/// RMS norm of each `w.len()`-wide piece of `x` (a row, or a head), in place.
fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let dim = w.len();
    for row in x.chunks_exact_mut(dim) {
        let sum: f64 = row.iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
        let scale = 1.0 / ((sum / dim as f64) as f32 + eps).sqrt();
        row.iter_mut().zip(w).for_each(|(v, w)| *v = *v * scale * w);
    }
}

/// Llama 3.1's and 3.2's per-pair rotary frequency factors.
const ROPE_FREQS: &str = "rope_freqs.weight";

fn missing(name: &str) -> GgufError {
    GgufError::Tensor {
        name: name.into(),
        message: "missing".into(),
    }
}

/// Layer `i`'s matrices, each `(name, rows, cols)`: q, k, v, o, gate, up, down.
fn layer_matrices(s: &ModelShape, i: usize) -> [(String, usize, usize); 7] {
    let (qd, kvd) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
    let n = |part: &str| format!("blk.{i}.{part}");
    [
        (n("attn_q.weight"), qd, s.dim),
        (n("attn_k.weight"), kvd, s.dim),
        (n("attn_v.weight"), kvd, s.dim),
        (n("attn_output.weight"), s.dim, qd),
        (n("ffn_gate.weight"), s.ffn, s.dim),
        (n("ffn_up.weight"), s.ffn, s.dim),
        (n("ffn_down.weight"), s.dim, s.ffn),
    ]
}

/// A 2-D weight repacked for the kernels into `memory`; the file's pages it was read
/// from are released.
fn packed(
    file: &GgufFile,
    memory: &mut WeightMemory,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<Packed, GgufError> {
    let m = matrix(file, name, rows, cols)?;
    let p = pack(file, memory, name, &m)?;
    file.release(m.start, m.len);
    Ok(p)
}

fn pack(
    file: &GgufFile,
    memory: &mut WeightMemory,
    name: &str,
    m: &Matrix,
) -> Result<Packed, GgufError> {
    Packed::new_in(
        memory,
        m.ty,
        m.rows,
        m.cols,
        &file.bytes()[m.start..m.start + m.len],
    )
    .map_err(|source| GgufError::Weight {
        name: name.into(),
        source,
    })
}

/// A 2-D weight of `rows × cols` (GGUF lists it as `[cols, rows]`).
fn matrix(file: &GgufFile, name: &str, rows: usize, cols: usize) -> Result<Matrix, GgufError> {
    let info = file.tensors.get(name).ok_or_else(|| missing(name))?;
    let err = |message: String| GgufError::Tensor {
        name: name.into(),
        message,
    };
    if info.dims != [cols as u64, rows as u64] {
        return Err(err(format!(
            "dimensions {:?}, expected [{cols}, {rows}]",
            info.dims
        )));
    }
    let weight = |source| GgufError::Weight {
        name: name.into(),
        source,
    };
    let ty = WeightType::from_ggml(info.ggml_type).map_err(weight)?;
    let len = ty
        .row_bytes(cols)
        .checked_mul(rows)
        .ok_or_else(|| err("its size overflows".into()))?;
    let data = file
        .slice(info.start, len)
        .ok_or_else(|| err("its data runs past the end of the file".into()))?;
    QView::new(ty, rows, cols, data).map_err(weight)?;
    Ok(Matrix {
        ty,
        rows,
        cols,
        start: info.start,
        len,
    })
}

/// A 1-D weight of `len` floats (norms and biases).
fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, GgufError> {
    let info = file.tensors.get(name).ok_or_else(|| missing(name))?;
    let err = |message: String| GgufError::Tensor {
        name: name.into(),
        message,
    };
    if info.dims != [len as u64] {
        return Err(err(format!("dimensions {:?}, expected [{len}]", info.dims)));
    }
    let ty = WeightType::from_ggml(info.ggml_type).map_err(|source| GgufError::Weight {
        name: name.into(),
        source,
    })?;
    if !matches!(ty, WeightType::F32 | WeightType::F16 | WeightType::BF16) {
        return Err(err(format!("a vector stored as {}", ty.name())));
    }
    let bytes = file
        .slice(info.start, ty.row_bytes(len))
        .ok_or_else(|| err("its data runs past the end of the file".into()))?;
    let mut out = vec![0f32; len];
    crate::quant::dequantize(ty, bytes, &mut out);
    if out.iter().any(|v| !v.is_finite()) {
        return Err(err("holds a value that is not a finite number".into()));
    }
    Ok(out)
}
