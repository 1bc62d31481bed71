//! GGUF weight formats: their block layouts, dequantisation, and the reference
//! definition of every product (the SIMD kernels reproduce it bit for bit).

use half::{bf16, f16};

use super::acts::{ActFormat, Acts};
use super::sum_lanes;

/// A weight format sopsim can compute with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum WeightType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q4K,
    Q5K,
    Q6K,
}

/// ggml's type numbers and names, for the formats read and for error messages.
const GGML_TYPES: &[(u32, &str, Option<WeightType>)] = &[
    (0, "F32", Some(WeightType::F32)),
    (1, "F16", Some(WeightType::F16)),
    (2, "Q4_0", Some(WeightType::Q4_0)),
    (3, "Q4_1", Some(WeightType::Q4_1)),
    (6, "Q5_0", Some(WeightType::Q5_0)),
    (7, "Q5_1", Some(WeightType::Q5_1)),
    (8, "Q8_0", Some(WeightType::Q8_0)),
    (9, "Q8_1", None),
    (10, "Q2_K", None),
    (11, "Q3_K", None),
    (12, "Q4_K", Some(WeightType::Q4K)),
    (13, "Q5_K", Some(WeightType::Q5K)),
    (14, "Q6_K", Some(WeightType::Q6K)),
    (15, "Q8_K", None),
    (30, "BF16", Some(WeightType::BF16)),
];

impl WeightType {
    /// The format of ggml type number `n`, or its name if sopsim cannot compute with it.
    pub fn from_ggml(n: u32) -> Result<Self, crate::error::WeightError> {
        match GGML_TYPES.iter().find(|(id, _, _)| *id == n) {
            Some((_, _, Some(t))) => Ok(*t),
            Some((_, name, None)) => Err(crate::error::WeightError::Unsupported(name)),
            None => Err(crate::error::WeightError::UnknownType(n)),
        }
    }

    pub fn name(self) -> &'static str {
        GGML_TYPES
            .iter()
            .find(|(_, _, t)| *t == Some(self))
            .map_or("?", |(_, name, _)| name)
    }

    /// Values that share a scale (1 for float formats).
    pub fn group(self) -> usize {
        match self {
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => 1,
            WeightType::Q4K | WeightType::Q5K | WeightType::Q6K => 256,
            _ => 32,
        }
    }

    /// Bytes per group.
    fn group_bytes(self) -> usize {
        match self {
            WeightType::F32 => 4,
            WeightType::F16 | WeightType::BF16 => 2,
            WeightType::Q4_0 => 18,
            WeightType::Q4_1 => 20,
            WeightType::Q5_0 => 22,
            WeightType::Q5_1 => 24,
            WeightType::Q8_0 => 34,
            WeightType::Q4K => 144,
            WeightType::Q5K => 176,
            WeightType::Q6K => 210,
        }
    }

    pub fn row_bytes(self, cols: usize) -> usize {
        cols / self.group() * self.group_bytes()
    }

    pub fn act_format(self) -> ActFormat {
        match self {
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => ActFormat::Float,
            WeightType::Q4K | WeightType::Q5K | WeightType::Q6K => ActFormat::Q8x256,
            _ => ActFormat::Q8x32,
        }
    }
}

pub(super) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The 6-bit scale and minimum of sub-block `j` of a Q4_K / Q5_K block.
pub(super) fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Integer weights of 32-value chunk `c` of a block group, after removing the format's
/// offset (Q4_0 −8, Q5_0 −16, Q6_K −32); minimum formats keep their unsigned values.
fn chunk_ints(ty: WeightType, g: &[u8], c: usize) -> [i32; 32] {
    let mut w = [0i32; 32];
    match ty {
        WeightType::Q4_0 | WeightType::Q4_1 => {
            let (qs, off) = if ty == WeightType::Q4_0 {
                (&g[2..18], 8)
            } else {
                (&g[4..20], 0)
            };
            for i in 0..16 {
                w[i] = i32::from(qs[i] & 0x0F) - off;
                w[i + 16] = i32::from(qs[i] >> 4) - off;
            }
        }
        WeightType::Q5_0 | WeightType::Q5_1 => {
            let (at, off) = if ty == WeightType::Q5_0 {
                (2, 16)
            } else {
                (4, 0)
            };
            let qh = u32::from_le_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]]);
            let qs = &g[at + 4..at + 20];
            for i in 0..16 {
                let h0 = ((qh >> i) & 1) << 4;
                let h1 = ((qh >> (i + 16)) & 1) << 4;
                w[i] = (u32::from(qs[i] & 0x0F) | h0) as i32 - off;
                w[i + 16] = (u32::from(qs[i] >> 4) | h1) as i32 - off;
            }
        }
        WeightType::Q8_0 => {
            for (i, v) in g[2..34].iter().enumerate() {
                w[i] = i32::from(*v as i8);
            }
        }
        WeightType::Q4K => {
            let qs = &g[16 + 32 * (c / 2)..16 + 32 * (c / 2) + 32];
            for (i, q) in qs.iter().enumerate() {
                w[i] = i32::from(if c.is_multiple_of(2) {
                    q & 0x0F
                } else {
                    q >> 4
                });
            }
        }
        WeightType::Q5K => {
            let qh = &g[16..48];
            let ql = &g[48 + 32 * (c / 2)..48 + 32 * (c / 2) + 32];
            for i in 0..32 {
                let low = if c.is_multiple_of(2) {
                    ql[i] & 0x0F
                } else {
                    ql[i] >> 4
                };
                let high = (qh[i] >> c) & 1;
                w[i] = i32::from(low | (high << 4));
            }
        }
        WeightType::Q6K => {
            let (n, k) = (c / 4, c % 4);
            let ql = &g[64 * n..64 * n + 64];
            let qh = &g[128 + 32 * n..128 + 32 * n + 32];
            for l in 0..32 {
                let low = match k {
                    0 => ql[l] & 0x0F,
                    1 => ql[l + 32] & 0x0F,
                    2 => ql[l] >> 4,
                    _ => ql[l + 32] >> 4,
                };
                let high = (qh[l] >> (2 * k)) & 3;
                w[l] = i32::from(low | (high << 4)) - 32;
            }
        }
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => {
            unreachable!("float formats have no integer chunks")
        }
    }
    w
}

/// Row values as floats.
pub fn dequantize(ty: WeightType, row: &[u8], out: &mut [f32]) {
    match ty {
        WeightType::F32 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        WeightType::F16 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(2)) {
                *o = f16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        WeightType::BF16 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(2)) {
                *o = bf16::from_le_bytes([b[0], b[1]]).to_f32();
            }
        }
        _ => {
            let gb = ty.group_bytes();
            let chunks = ty.group() / 32;
            for (gi, g) in row.chunks_exact(gb).enumerate() {
                for c in 0..chunks {
                    let w = chunk_ints(ty, g, c);
                    let (scales, mins) = chunk_scale_min(ty, g, c);
                    let out = &mut out[(gi * chunks + c) * 32..][..32];
                    for i in 0..32 {
                        out[i] = scales[i / 16] * w[i] as f32 - mins;
                    }
                }
            }
        }
    }
}

/// For dequantisation: the float scale of each 16-value half of chunk `c`, and the
/// value subtracted.
fn chunk_scale_min(ty: WeightType, g: &[u8], c: usize) -> ([f32; 2], f32) {
    match ty {
        WeightType::Q4_0 | WeightType::Q5_0 | WeightType::Q8_0 => {
            let d = f16_at(g, 0);
            ([d, d], 0.0)
        }
        WeightType::Q4_1 | WeightType::Q5_1 => {
            let d = f16_at(g, 0);
            ([d, d], -f16_at(g, 2))
        }
        WeightType::Q4K | WeightType::Q5K => {
            let (sc, m) = scale_min_k4(c, &g[4..16]);
            let d = f16_at(g, 0) * f32::from(sc);
            ([d, d], f16_at(g, 2) * f32::from(m))
        }
        WeightType::Q6K => {
            let d = f16_at(g, 208);
            let sc = |i: usize| f32::from(g[192 + 2 * c + i] as i8);
            ([d * sc(0), d * sc(1)], 0.0)
        }
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => {
            unreachable!("float formats have no scales")
        }
    }
}

/// The reference product of one weight row with token `t` of `acts`: the definition
/// the SIMD kernels must match exactly.
///
/// Eight lanes (lane j: the exact integer sum over values 4j..4j+4 of each 32-value
/// chunk, with the k-quants' integer sub-scales applied), each accumulating
/// `lanes × (weight scale × activation scale)` with a fused multiply-add, group by
/// group. For the 32-value formats there are two such chains, one for the even blocks
/// and one for the odd ones (so that a 512-bit register can take two blocks at once);
/// the chains are summed with [`sum_lanes`], the even one first, and the minimum
/// formats' scalar chain is added last. Float formats use one eight-lane chain over the
/// values.
pub fn dot_reference(ty: WeightType, row: &[u8], acts: &Acts, t: usize) -> f32 {
    let mut acc = [0f32; 8];
    if acts.format() == ActFormat::Float {
        let x = acts.floats(t);
        let mut w = vec![0f32; x.len()];
        dequantize(ty, row, &mut w);
        for (wc, xc) in w.chunks_exact(8).zip(x.chunks_exact(8)) {
            for j in 0..8 {
                acc[j] = wc[j].mul_add(xc[j], acc[j]);
            }
        }
        return sum_lanes(&acc);
    }
    let (qs, scales, bsum) = (acts.qs(t), acts.scales(t), acts.bsum(t));
    let lanes = |w: &[i32; 32], c: usize| -> [i32; 8] {
        let x = &qs[c * 32..c * 32 + 32];
        std::array::from_fn(|j| (4 * j..4 * j + 4).map(|i| w[i] * i32::from(x[i])).sum())
    };
    let mut accm = 0f32;
    let mut acc_odd = [0f32; 8];
    let gb = ty.group_bytes();
    for (gi, g) in row.chunks_exact(gb).enumerate() {
        let dx = scales[gi];
        match ty {
            WeightType::Q4_0
            | WeightType::Q5_0
            | WeightType::Q8_0
            | WeightType::Q4_1
            | WeightType::Q5_1 => {
                let l = lanes(&chunk_ints(ty, g, 0), gi);
                let s = f16_at(g, 0) * dx;
                // Even blocks in one chain, odd ones in another.
                let chain = if gi % 2 == 0 { &mut acc } else { &mut acc_odd };
                for j in 0..8 {
                    chain[j] = (l[j] as f32).mul_add(s, chain[j]);
                }
                if matches!(ty, WeightType::Q4_1 | WeightType::Q5_1) {
                    accm = (bsum[gi] as f32).mul_add(f16_at(g, 2) * dx, accm);
                }
            }
            WeightType::Q4K | WeightType::Q5K => {
                let mut total = [0i32; 8];
                let mut m_total = 0i32;
                for c in 0..8 {
                    let (sc, m) = scale_min_k4(c, &g[4..16]);
                    let l = lanes(&chunk_ints(ty, g, c), gi * 8 + c);
                    for j in 0..8 {
                        total[j] += i32::from(sc) * l[j];
                    }
                    m_total += i32::from(m) * bsum[gi * 8 + c];
                }
                let s = f16_at(g, 0) * dx;
                for j in 0..8 {
                    acc[j] = (total[j] as f32).mul_add(s, acc[j]);
                }
                accm = (m_total as f32).mul_add(-(f16_at(g, 2) * dx), accm);
            }
            WeightType::Q6K => {
                let mut total = [0i32; 8];
                for c in 0..8 {
                    let l = lanes(&chunk_ints(ty, g, c), gi * 8 + c);
                    for j in 0..8 {
                        let sc = i32::from(g[192 + 2 * c + j / 4] as i8);
                        total[j] += sc * l[j];
                    }
                }
                let s = f16_at(g, 208) * dx;
                for j in 0..8 {
                    acc[j] = (total[j] as f32).mul_add(s, acc[j]);
                }
            }
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => unreachable!(),
        }
    }
    (sum_lanes(&acc) + sum_lanes(&acc_odd)) + accm
}
