//! A llama-architecture forward pass on candle operations, written for this service:
//! - the KV cache is a preallocated buffer that can be cut back to any prefix, so a
//!   prompt that shares a prefix with an earlier one only processes its new tokens;
//! - Q, K and V are one matrix multiply, and so are the FFN's gate and up projections;
//! - grouped-query attention folds the query heads onto their KV head instead of copying
//!   K and V per query head;
//! - weights in formats candle has no SIMD kernel for (Q4_1, Q5_x) are requantised to
//!   Q8_0 at load, and prompt tokens go through a dense f32 copy of each matrix, which
//!   is faster than quantized kernels when many tokens go through at once.
//!
//! Which weights a token meets depends only on whether it is a prompt token or a
//! generated one, never on how the prompt was split into chunks, so a reply does not
//! depend on what the cache happened to hold.

use std::path::Path;

use candle_core::quantized::{gguf_file, GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::ops::{rms_norm, silu, softmax_last_dim};
use candle_nn::rotary_emb::rope_i;

use super::gguf::LlamaShape;

/// KV cache capacity grows in steps of this many tokens.
const KV_STEP: usize = 256;

struct Linear {
    quant: QMatMul,
    dense: Option<QMatMul>,
}

impl Linear {
    fn new(weights: Vec<QTensor>, dense: bool, device: &Device) -> Result<Self> {
        let requantize = |parts: &[QTensor]| -> Result<QTensor> {
            let parts = parts
                .iter()
                .map(|w| w.dequantize(device))
                .collect::<Result<Vec<_>>>()?;
            QTensor::quantize(&Tensor::cat(&parts, 0)?, GgmlDType::Q8_0)
        };
        let fused = match <[QTensor; 1]>::try_from(weights) {
            Ok([single]) if has_simd_kernel(single.dtype()) => single,
            Ok(single) => requantize(&single)?,
            Err(parts) => requantize(&parts)?,
        };
        let dense = if dense {
            Some(QMatMul::Tensor(fused.dequantize(device)?))
        } else {
            None
        };
        Ok(Self {
            quant: QMatMul::from_qtensor(fused)?,
            dense,
        })
    }

    fn forward(&self, x: &Tensor, pass: Pass) -> Result<Tensor> {
        match (&self.dense, pass) {
            (Some(d), Pass::Prompt) => d.forward(x),
            _ => self.quant.forward(x),
        }
    }
}

/// Whether a forward pass runs prompt tokens or a generated one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    Prompt,
    Generated,
}

fn has_simd_kernel(dtype: GgmlDType) -> bool {
    matches!(
        dtype,
        GgmlDType::Q4_0
            | GgmlDType::Q8_0
            | GgmlDType::Q2K
            | GgmlDType::Q3K
            | GgmlDType::Q4K
            | GgmlDType::Q5K
            | GgmlDType::Q6K
            | GgmlDType::Q8K
    )
}

struct Layer {
    attn_norm: Tensor,
    qkv: Linear,
    out: Linear,
    ffn_norm: Tensor,
    gate_up: Linear,
    down: Linear,
    ffn: usize,
}

pub struct Llama {
    pub shape: LlamaShape,
    embed: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    head: QMatMul,
    cos: Tensor,
    sin: Tensor,
    device: Device,
    max_positions: usize,
}

/// The keys and values of one sequence, and the tokens they belong to.
pub struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    cap: usize,
    tokens: Vec<u32>,
}

impl KvCache {
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Forgets everything after the first `n` tokens.
    pub fn truncate(&mut self, n: usize) {
        self.tokens.truncate(n);
    }
}

impl Llama {
    pub fn load(
        ct: &gguf_file::Content,
        file: &mut std::fs::File,
        path: &Path,
        dense_prefill: bool,
    ) -> std::result::Result<Self, String> {
        let shape = LlamaShape::read(ct)?;
        let device = Device::Cpu;
        let err = |e: candle_core::Error| format!("{}: {e}", path.display());
        let mut get = |name: &str| ct.tensor(file, name, &device).map_err(err);
        let embed_q = get("token_embd.weight")?;
        let embed = embed_q.dequantize(&device).map_err(err)?;
        let head = match get("output.weight") {
            Ok(w) => w,
            Err(_) => embed_q,
        };
        let norm = get("output_norm.weight")?
            .dequantize(&device)
            .map_err(err)?;
        let mut layers = Vec::with_capacity(shape.layers);
        for i in 0..shape.layers {
            let p = |n: &str| format!("blk.{i}.{n}.weight");
            let (q, k, v) = (get(&p("attn_q"))?, get(&p("attn_k"))?, get(&p("attn_v"))?);
            let (gate, up) = (get(&p("ffn_gate"))?, get(&p("ffn_up"))?);
            let ffn = gate.shape().dims()[0];
            let linear = |w: Vec<QTensor>| Linear::new(w, dense_prefill, &device).map_err(err);
            layers.push(Layer {
                attn_norm: get(&p("attn_norm"))?.dequantize(&device).map_err(err)?,
                qkv: linear(vec![q, k, v])?,
                out: linear(vec![get(&p("attn_output"))?])?,
                ffn_norm: get(&p("ffn_norm"))?.dequantize(&device).map_err(err)?,
                gate_up: linear(vec![gate, up])?,
                down: linear(vec![get(&p("ffn_down"))?])?,
                ffn,
            });
        }
        let head = if has_simd_kernel(head.dtype()) {
            head
        } else {
            QTensor::quantize(&head.dequantize(&device).map_err(err)?, GgmlDType::Q8_0)
                .map_err(err)?
        };
        let max_positions = shape.context.min(8192);
        let (cos, sin) = rope_tables(&shape, max_positions, &device).map_err(err)?;
        Ok(Self {
            shape,
            embed,
            layers,
            norm,
            head: QMatMul::from_qtensor(head).map_err(err)?,
            cos,
            sin,
            device,
            max_positions,
        })
    }

    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    pub fn new_cache(&self) -> KvCache {
        KvCache {
            k: Vec::new(),
            v: Vec::new(),
            cap: 0,
            tokens: Vec::new(),
        }
    }

    fn reserve(&self, cache: &mut KvCache, needed: usize) -> Result<()> {
        if needed <= cache.cap {
            return Ok(());
        }
        let cap = needed.div_ceil(KV_STEP) * KV_STEP;
        let s = &self.shape;
        let len = cache.tokens.len();
        for buffers in [&mut cache.k, &mut cache.v] {
            let mut grown = Vec::with_capacity(s.layers);
            for l in 0..s.layers {
                let t = Tensor::zeros((1, s.kv_heads, cap, s.head_dim), DType::F32, &self.device)?;
                if let Some(old) = buffers.get(l) {
                    if len > 0 {
                        t.slice_set(&old.narrow(2, 0, len)?.contiguous()?, 2, 0)?;
                    }
                }
                grown.push(t);
            }
            *buffers = grown;
        }
        cache.cap = cap;
        Ok(())
    }

    /// Runs `tokens` after what `cache` holds; returns the logits after the last one.
    pub fn forward(&self, cache: &mut KvCache, tokens: &[u32], pass: Pass) -> Result<Tensor> {
        let s = &self.shape;
        let (t, pos) = (tokens.len(), cache.tokens.len());
        if t == 0 || pos + t > self.max_positions {
            candle_core::bail!(
                "{} tokens do not fit the model's {} positions",
                pos + t,
                self.max_positions
            );
        }
        self.reserve(cache, pos + t)?;
        let group = s.heads / s.kv_heads;
        let (cos, sin) = (self.cos.narrow(0, pos, t)?, self.sin.narrow(0, pos, t)?);
        let mask = if t > 1 {
            Some(causal_mask(t, pos, group, &self.device)?)
        } else {
            None
        };
        let scale = 1.0 / (s.head_dim as f64).sqrt();
        let (qd, kvd) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        let mut x = self
            .embed
            .index_select(&Tensor::new(tokens, &self.device)?, 0)?
            .unsqueeze(0)?;
        for (i, l) in self.layers.iter().enumerate() {
            let h = rms_norm(&x, &l.attn_norm, s.rms_eps)?;
            let qkv = l.qkv.forward(&h, pass)?;
            let heads = |from: usize, n: usize| -> Result<Tensor> {
                qkv.narrow(2, from, n * s.head_dim)?
                    .reshape((1, t, n, s.head_dim))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let q = rope_i(&heads(0, s.heads)?, &cos, &sin)?;
            let k = rope_i(&heads(qd, s.kv_heads)?, &cos, &sin)?;
            let v = heads(qd + kvd, s.kv_heads)?;
            cache.k[i].slice_set(&k, 2, pos)?;
            cache.v[i].slice_set(&v, 2, pos)?;
            let keys = cache.k[i].narrow(2, 0, pos + t)?;
            let values = cache.v[i].narrow(2, 0, pos + t)?;
            // Each KV head serves `group` consecutive query heads: fold them into rows.
            let q = q.reshape((1, s.kv_heads, group * t, s.head_dim))?;
            let att = q.matmul(&keys.t()?)?.affine(scale, 0.0)?;
            let att = match &mask {
                Some(m) => att.broadcast_add(m)?,
                None => att,
            };
            let y = softmax_last_dim(&att)?.matmul(&values)?;
            let y = y
                .reshape((1, s.heads, t, s.head_dim))?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((1, t, qd))?;
            x = (x + l.out.forward(&y, pass)?)?;
            let h = rms_norm(&x, &l.ffn_norm, s.rms_eps)?;
            let gu = l.gate_up.forward(&h, pass)?;
            let act = (silu(&gu.narrow(2, 0, l.ffn)?)? * gu.narrow(2, l.ffn, l.ffn)?)?;
            x = (x + l.down.forward(&act, pass)?)?;
        }
        cache.tokens.extend_from_slice(tokens);
        let last = x.i((.., t - 1, ..))?.contiguous()?;
        self.head
            .forward(&rms_norm(&last, &self.norm, s.rms_eps)?)?
            .squeeze(0)
    }
}

fn rope_tables(s: &LlamaShape, positions: usize, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = s.head_dim / 2;
    let inv: Vec<f32> = (0..half)
        .map(|i| 1.0 / s.rope_base.powf(2.0 * i as f32 / s.head_dim as f32))
        .collect();
    let inv = Tensor::from_vec(inv, (1, half), device)?;
    let pos = Tensor::arange(0u32, positions as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((positions, 1))?;
    let freqs = pos.broadcast_mul(&inv)?;
    Ok((freqs.cos()?, freqs.sin()?))
}

/// Rows are (query head in group, new token); token `i` sees positions up to `pos + i`.
fn causal_mask(t: usize, pos: usize, group: usize, device: &Device) -> Result<Tensor> {
    let total = pos + t;
    let row =
        |i: usize| (0..total).map(move |j| if j <= pos + i { 0.0 } else { f32::NEG_INFINITY });
    let data: Vec<f32> = (0..group).flat_map(|_| (0..t).flat_map(row)).collect();
    Tensor::from_vec(data, (group * t, total), device)
}
