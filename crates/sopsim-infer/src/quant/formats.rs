//! GGUF weight formats: their block layouts, dequantisation, and the reference
//! definition of every product (the packed kernels reproduce it bit for bit).

use half::{bf16, f16};

use super::acts::{ActFormat, Acts};
use super::sum_lanes;

/// A weight format sopsim can compute with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum WeightType {
    /// 32-bit floats.
    F32,
    /// IEEE half-precision floats.
    F16,
    /// bfloat16 floats.
    BF16,
    /// 4-bit values in blocks of 32 with an f16 scale.
    Q4_0,
    /// 4-bit values in blocks of 32 with an f16 scale and minimum.
    Q4_1,
    /// 5-bit values in blocks of 32 with an f16 scale.
    Q5_0,
    /// 5-bit values in blocks of 32 with an f16 scale and minimum.
    Q5_1,
    /// 8-bit values in blocks of 32 with an f16 scale.
    Q8_0,
    /// 4-bit values in super-blocks of 256, with a 6-bit scale and minimum per 32 (Q4_K).
    Q4K,
    /// 5-bit values in super-blocks of 256, with a 6-bit scale and minimum per 32 (Q5_K).
    Q5K,
    /// 6-bit values in super-blocks of 256, with an 8-bit scale per 16 (Q6_K).
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

    /// ggml's name for the format (`Q4_K`, `BF16`…).
    pub fn name(self) -> &'static str {
        GGML_TYPES
            .iter()
            .find(|(_, _, t)| *t == Some(self))
            .map_or("?", |(_, name, _)| name)
    }

    /// Values stored together with their scales (1 for float formats).
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

    /// Bytes a row of `cols` values takes (`cols` a multiple of the group).
    pub fn row_bytes(self, cols: usize) -> usize {
        cols / self.group() * self.group_bytes()
    }

    /// Whether the format stores plain floats (F32, F16 or BF16).
    pub fn is_float(self) -> bool {
        matches!(self, WeightType::F32 | WeightType::F16 | WeightType::BF16)
    }

    /// How a product with weights of this format wants its activations stored.
    pub fn act_format(self) -> ActFormat {
        if self.is_float() {
            ActFormat::Float
        } else {
            ActFormat::Q8
        }
    }

    /// What every 32-value block's integers look like (`None` for float formats).
    #[inline(always)]
    pub(super) fn ints(self) -> Option<Ints> {
        let (bits, offset, scale, min) = match self {
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => return None,
            WeightType::Q4_0 => (Bits::Four, 8, Scale::F16, None),
            WeightType::Q4_1 => (Bits::Four, 0, Scale::F16, Some(Scale::F16)),
            WeightType::Q5_0 => (Bits::Five, 16, Scale::F16, None),
            WeightType::Q5_1 => (Bits::Five, 0, Scale::F16, Some(Scale::F16)),
            WeightType::Q8_0 => (Bits::Eight, 128, Scale::F16, None),
            WeightType::Q4K => (
                Bits::Four,
                0,
                Scale::SuperTimesU8,
                Some(Scale::SuperTimesU8),
            ),
            WeightType::Q5K => (
                Bits::Five,
                0,
                Scale::SuperTimesU8,
                Some(Scale::SuperTimesU8),
            ),
            WeightType::Q6K => (Bits::Six, 32, Scale::Super, None),
        };
        Some(Ints {
            bits,
            offset,
            scale,
            min,
            halves: self == WeightType::Q6K,
            group_blocks: self.group() / 32,
        })
    }
}

/// How many bits each stored value takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bits {
    Four,
    Five,
    Six,
    Eight,
}

/// How a block's float scale (or minimum) is kept, as the file keeps it, so that the
/// kernels read no more bytes than the file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scale {
    /// An f16 per block (the 32-value formats).
    F16,
    /// The super-block's f16, shared by its eight blocks (Q6_K's `d`).
    Super,
    /// The super-block's f16 times the block's 6-bit integer (Q4_K and Q5_K: `d·sc`,
    /// and `−dmin·m` for the minimum), multiplied in f32 as the reference does.
    SuperTimesU8,
}

impl Scale {
    /// Bytes per row in each block's tile.
    pub(super) fn bytes(self) -> usize {
        match self {
            Scale::F16 => 2,
            Scale::Super => 0,
            Scale::SuperTimesU8 => 1,
        }
    }

    /// Bytes per row in the super-block's header.
    pub(super) fn header_bytes(self) -> usize {
        match self {
            Scale::F16 => 0,
            Scale::Super | Scale::SuperTimesU8 => 2,
        }
    }
}

/// A K-format block's scale (and minimum) as the file stores them: the super-block's
/// f16 fields and the block's integers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SuperScales {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub sc: u8,
    pub m: u8,
}

/// Block `b`'s [`SuperScales`] in a row of a K format.
#[inline(always)]
pub(super) fn super_scales(ty: WeightType, row: &[u8], b: usize) -> SuperScales {
    let (g, c) = group_of(ty, row, b);
    match ty {
        WeightType::Q4K | WeightType::Q5K => {
            let (sc, m) = scale_min_k4(c, &g[4..16]);
            SuperScales {
                d: [g[0], g[1]],
                dmin: [g[2], g[3]],
                sc,
                m,
            }
        }
        WeightType::Q6K => SuperScales {
            d: [g[208], g[209]],
            ..SuperScales::default()
        },
        _ => SuperScales::default(),
    }
}

/// The file's group (block or super-block) holding block `b` of a row, and `b`'s
/// place in it.
#[inline(always)]
fn group_of(ty: WeightType, row: &[u8], b: usize) -> (&[u8], usize) {
    let per_group = ty.group() / 32;
    let g = &row[b / per_group * ty.group_bytes()..][..ty.group_bytes()];
    (g, b % per_group)
}

/// The integer form of a quantised format, shared by every block: values are kept as
/// unsigned integers `u` (0..2^bits), and a block's exact integer product with
/// activations `x` is `Σ u·x − offset·Σ x` — or, for Q6_K (`halves`), the same per
/// 16-value half, each times the half's integer sub-scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ints {
    pub bits: Bits,
    pub offset: i32,
    pub scale: Scale,
    /// Formats with a minimum: `+ min · dx · Σ x` per block, in a chain of its own.
    pub min: Option<Scale>,
    pub halves: bool,
    /// 32-value blocks per group of the file's format (8 for the K formats, whose
    /// 256-value super-blocks share one f16 scale per row).
    pub group_blocks: usize,
}

/// One 32-value block of a row: its unsigned integers and what scales them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    pub u: [u8; 32],
    pub scale: f32,
    pub min: f32,
    /// Q6_K's integer sub-scales of the two halves.
    pub sub: [i8; 2],
}

#[inline(always)]
pub(super) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The 6-bit scale and minimum of sub-block `j` of a Q4_K / Q5_K block.
#[inline(always)]
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

/// Block `b` (32 values) of a row in a quantised format.
#[inline(always)]
pub(super) fn block(ty: WeightType, row: &[u8], b: usize) -> Block {
    let mut u = [0u8; 32];
    let (mut min, mut sub) = (0f32, [0i8; 2]);
    let scale;
    let (g, c) = group_of(ty, row, b);
    match ty {
        WeightType::Q4_0 | WeightType::Q4_1 => {
            let qs = if ty == WeightType::Q4_0 {
                &g[2..18]
            } else {
                &g[4..20]
            };
            for i in 0..16 {
                u[i] = qs[i] & 0x0F;
                u[i + 16] = qs[i] >> 4;
            }
            scale = f16_at(g, 0);
            if ty == WeightType::Q4_1 {
                min = f16_at(g, 2);
            }
        }
        WeightType::Q5_0 | WeightType::Q5_1 => {
            let at = if ty == WeightType::Q5_0 { 2 } else { 4 };
            let qh = u32::from_le_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]]);
            let qs = &g[at + 4..at + 20];
            for i in 0..16 {
                u[i] = (qs[i] & 0x0F) | ((((qh >> i) & 1) as u8) << 4);
                u[i + 16] = (qs[i] >> 4) | ((((qh >> (i + 16)) & 1) as u8) << 4);
            }
            scale = f16_at(g, 0);
            if ty == WeightType::Q5_1 {
                min = f16_at(g, 2);
            }
        }
        WeightType::Q8_0 => {
            for (o, v) in u.iter_mut().zip(&g[2..34]) {
                *o = v ^ 0x80;
            }
            scale = f16_at(g, 0);
        }
        WeightType::Q4K | WeightType::Q5K => {
            let five = ty == WeightType::Q5K;
            let qs_at = if five { 48 } else { 16 };
            let qs = &g[qs_at + 32 * (c / 2)..][..32];
            for i in 0..32 {
                let low = if c.is_multiple_of(2) {
                    qs[i] & 0x0F
                } else {
                    qs[i] >> 4
                };
                let high = if five { ((g[16 + i] >> c) & 1) << 4 } else { 0 };
                u[i] = low | high;
            }
            let sup = super_scales(ty, row, b);
            scale = f16::from_le_bytes(sup.d).to_f32() * f32::from(sup.sc);
            min = -(f16::from_le_bytes(sup.dmin).to_f32() * f32::from(sup.m));
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
                u[l] = low | (((qh[l] >> (2 * k)) & 3) << 4);
            }
            scale = f16_at(g, 208);
            sub = [g[192 + 2 * c] as i8, g[192 + 2 * c + 1] as i8];
        }
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => {
            unreachable!("float formats have no integer blocks")
        }
    }
    Block { u, scale, min, sub }
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
            let Some(ints) = ty.ints() else { return };
            for (b, out) in out.chunks_exact_mut(32).enumerate() {
                let blk = block(ty, row, b);
                for (i, o) in out.iter_mut().enumerate() {
                    let w = i32::from(blk.u[i]) - ints.offset;
                    let scale = if ints.halves {
                        blk.scale * f32::from(blk.sub[i / 16])
                    } else {
                        blk.scale
                    };
                    *o = scale * w as f32 + blk.min;
                }
            }
        }
    }
}

/// Block `b`'s exact integer product with token `t`'s activations (see [`Ints`]).
pub(super) fn block_int(ints: Ints, blk: &Block, acts: &Acts, t: usize, b: usize) -> i32 {
    let x = &acts.qs(t)[b * 32..b * 32 + 32];
    let dot = |r: std::ops::Range<usize>| -> i32 {
        r.map(|i| i32::from(blk.u[i]) * i32::from(x[i])).sum()
    };
    let (lo, hi) = (dot(0..16), dot(16..32));
    let halves = &acts.half_sums(t)[2 * b..2 * b + 2];
    if ints.halves {
        i32::from(blk.sub[0]) * (lo - ints.offset * halves[0])
            + i32::from(blk.sub[1]) * (hi - ints.offset * halves[1])
    } else {
        lo + hi - ints.offset * (halves[0] + halves[1])
    }
}

/// The reference product of one weight row with token `t` of `acts`: the definition
/// the packed kernels must match exactly.
///
/// Quantised formats: for each 32-value block in order, its exact integer product
/// `i` (`block_int`) enters one chain, `acc = fma(i, scale · dx, acc)` (`dx` the
/// block's activation scale); the formats with a minimum keep a second chain,
/// `accm = fma(Σx, min · dx, accm)`; the result is `acc + accm`. Every output is that
/// one sequence of float operations whichever kernel computes it and whatever else is
/// computed with it. Float formats: one eight-lane chain of fused multiply-adds over
/// the values, summed with [`sum_lanes`].
pub fn dot_reference(ty: WeightType, row: &[u8], acts: &Acts, t: usize) -> f32 {
    let Some(ints) = ty.ints() else {
        let x = acts.floats(t);
        let mut w = vec![0f32; x.len()];
        dequantize(ty, row, &mut w);
        return float_dot(&w, x);
    };
    let (scales, sums) = (acts.scales(t), acts.sums(t));
    let (mut acc, mut accm) = (0f32, 0f32);
    for b in 0..acts.cols() / 32 {
        let blk = block(ty, row, b);
        let dx = scales[b];
        let i = block_int(ints, &blk, acts, t, b);
        acc = (i as f32).mul_add(blk.scale * dx, acc);
        if ints.min.is_some() {
            accm = (sums[b] as f32).mul_add(blk.min * dx, accm);
        }
    }
    acc + accm
}

/// Eight lanes of fused multiply-adds over chunks of eight, summed in the fixed order.
pub(super) fn float_dot(w: &[f32], x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    for (wc, xc) in w.chunks_exact(8).zip(x.chunks_exact(8)) {
        for j in 0..8 {
            acc[j] = wc[j].mul_add(xc[j], acc[j]);
        }
    }
    sum_lanes(&acc)
}
