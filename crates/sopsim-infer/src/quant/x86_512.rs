//! AVX-512 VNNI kernels over the panel layout: one output row per lane, so a tile's
//! sixteen rows are computed together with no horizontal sums. A tile's integers are
//! widened to bytes once and used for up to [`GROUP`] tokens; each token's four
//! activation bytes are broadcast against four values of every row (`vpdpbusd`,
//! unsigned weights × signed activations). Then each lane takes exactly the
//! reference's float steps.

use std::arch::x86_64::*;
use std::ops::Range;

use super::acts::Acts;
use super::formats::{Bits, Scale, WeightType};
use super::packed::{Dest, Packed, TileLayout, HEADER_MINS_AT, PANEL};

/// Tokens that share one widening of a tile.
const GROUP: usize = 8;

/// How many tiles ahead the weights are prefetched.
const PREFETCH: usize = 16;

pub(super) fn supported() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512dq")
        && is_x86_feature_detected!("avx512vnni")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// A format's constants, so that each gets its own compiled loop.
pub(super) trait Format {
    const BITS: Bits;
    const OFFSET: i32;
    const SCALE: Scale;
    const MIN: bool;
    const HALVES: bool;
}

macro_rules! format {
    ($name:ident, $bits:expr, $offset:expr, $scale:expr, $min:expr, $halves:expr) => {
        pub(super) struct $name;
        impl Format for $name {
            const BITS: Bits = $bits;
            const OFFSET: i32 = $offset;
            const SCALE: Scale = $scale;
            const MIN: bool = $min;
            const HALVES: bool = $halves;
        }
    };
}

format!(Q4_0, Bits::Four, 8, Scale::F16, false, false);
format!(Q4_1, Bits::Four, 0, Scale::F16, true, false);
format!(Q5_0, Bits::Five, 16, Scale::F16, false, false);
format!(Q5_1, Bits::Five, 0, Scale::F16, true, false);
format!(Q8_0, Bits::Eight, 128, Scale::F16, false, false);
format!(Q4K, Bits::Four, 0, Scale::SuperTimesU8, true, false);
format!(Q5K, Bits::Five, 0, Scale::SuperTimesU8, true, false);
format!(Q6K, Bits::Six, 32, Scale::Super, false, true);

/// Calls `$go::<Format>($args)` for `$ty`'s format.
macro_rules! by_format {
    ($ty:expr, $go:ident, $($args:expr),*) => {
        match $ty {
            WeightType::Q4_0 => $go::<$crate::quant::x86_512::Q4_0>($($args),*),
            WeightType::Q4_1 => $go::<$crate::quant::x86_512::Q4_1>($($args),*),
            WeightType::Q5_0 => $go::<$crate::quant::x86_512::Q5_0>($($args),*),
            WeightType::Q5_1 => $go::<$crate::quant::x86_512::Q5_1>($($args),*),
            WeightType::Q8_0 => $go::<$crate::quant::x86_512::Q8_0>($($args),*),
            WeightType::Q4K => $go::<$crate::quant::x86_512::Q4K>($($args),*),
            WeightType::Q5K => $go::<$crate::quant::x86_512::Q5K>($($args),*),
            WeightType::Q6K => $go::<$crate::quant::x86_512::Q6K>($($args),*),
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => {
                unreachable!("float formats have their own kernel")
            }
        }
    };
}
pub(super) use by_format;

/// # Safety
/// The CPU must support the features [`supported`] checks, and `dest` must be valid
/// for `panels` (see [`Dest`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn matmul(w: &Packed, acts: &Acts, panels: Range<usize>, dest: Dest) {
    let Some(layout) = w.layout() else { return };
    by_format!(w.ty(), panels_of, w, &layout, acts, panels, dest)
}

#[inline(always)]
unsafe fn panels_of<F: Format>(
    w: &Packed,
    layout: &TileLayout,
    acts: &Acts,
    panels: Range<usize>,
    dest: Dest,
) {
    let tokens = acts.tokens();
    for p in panels {
        let mut t0 = 0;
        while t0 < tokens {
            let n = (tokens - t0).min(GROUP);
            match n {
                8 => group::<F, 8>(w, layout, acts, p, t0, dest),
                7 => group::<F, 7>(w, layout, acts, p, t0, dest),
                6 => group::<F, 6>(w, layout, acts, p, t0, dest),
                5 => group::<F, 5>(w, layout, acts, p, t0, dest),
                4 => group::<F, 4>(w, layout, acts, p, t0, dest),
                3 => group::<F, 3>(w, layout, acts, p, t0, dest),
                2 => group::<F, 2>(w, layout, acts, p, t0, dest),
                _ => group::<F, 1>(w, layout, acts, p, t0, dest),
            }
            t0 += n;
        }
    }
}

/// The weights are read once, front to back: asks for the tile [`PREFETCH`] tiles
/// after `tile` early (past the end of the matrix the hint is simply wasted).
#[inline(always)]
pub(super) unsafe fn prefetch_ahead(tile: *const u8, bytes: usize) {
    let ahead = tile.wrapping_add(PREFETCH * bytes);
    for line in (0..bytes).step_by(64) {
        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line) as *const i8);
    }
}

/// A tile's 512 integers as bytes: register `c` holds values `4c..4c+4` of every row.
#[inline(always)]
pub(super) unsafe fn widen<F: Format>(q: *const u8) -> [__m512i; 8] {
    if F::BITS == Bits::Eight {
        return std::array::from_fn(|c| _mm512_loadu_si512(q.add(64 * c) as *const _));
    }
    let m4 = _mm512_set1_epi8(0x0F);
    let mut v = [_mm512_setzero_si512(); 8];
    for c in 0..4 {
        let nib = _mm512_loadu_si512(q.add(64 * c) as *const _);
        v[c] = _mm512_and_si512(nib, m4);
        v[c + 4] = _mm512_and_si512(_mm512_srli_epi16::<4>(nib), m4);
    }
    match F::BITS {
        Bits::Five => {
            let sixteen = _mm512_set1_epi8(16);
            for (c, r) in v.iter_mut().enumerate() {
                let bits: __mmask64 = (q.add(256 + 8 * c) as *const u64).read_unaligned();
                *r = _mm512_mask_add_epi8(*r, bits, *r, sixteen);
            }
        }
        Bits::Six => {
            let m = _mm512_set1_epi8(0x30);
            let h = [
                _mm512_loadu_si512(q.add(256) as *const _),
                _mm512_loadu_si512(q.add(320) as *const _),
            ];
            for (c, r) in v.iter_mut().enumerate() {
                let src = h[c % 2];
                let high = match c / 2 {
                    0 => _mm512_slli_epi16::<4>(src),
                    1 => _mm512_slli_epi16::<2>(src),
                    2 => src,
                    _ => _mm512_srli_epi16::<2>(src),
                };
                *r = _mm512_or_si512(*r, _mm512_and_si512(high, m));
            }
        }
        _ => {}
    }
    v
}

/// The sixteen rows' scales (`MIN` false) or minimums of a tile, from the tile's part
/// at `at` and its group's `header`, with the reference's float steps.
#[inline(always)]
pub(super) unsafe fn scales<F: Format, const MIN: bool>(
    at: *const u8,
    header: *const u8,
) -> __m512 {
    let sup = || {
        let from = header.add(if MIN { HEADER_MINS_AT } else { 0 });
        _mm512_cvtph_ps(_mm256_loadu_si256(from as *const __m256i))
    };
    match F::SCALE {
        Scale::F16 => _mm512_cvtph_ps(_mm256_loadu_si256(at as *const __m256i)),
        Scale::Super => sup(),
        Scale::SuperTimesU8 => {
            let ints = _mm512_cvtepu8_epi32(_mm_loadu_si128(at as *const __m128i));
            let v = _mm512_mul_ps(sup(), _mm512_cvtepi32_ps(ints));
            if MIN {
                _mm512_xor_ps(v, _mm512_set1_ps(-0.0))
            } else {
                v
            }
        }
    }
}

/// Q6_K's sub-scales of the two halves, as 32-bit integers.
#[inline(always)]
pub(super) unsafe fn subs(at: *const u8) -> [__m512i; 2] {
    [
        _mm512_cvtepi8_epi32(_mm_loadu_si128(at as *const __m128i)),
        _mm512_cvtepi8_epi32(_mm_loadu_si128(at.add(PANEL) as *const __m128i)),
    ]
}

/// A tile's sixteen rows' scales, minimums and (Q6_K) sub-scales.
struct TileScales {
    s: __m512,
    m: __m512,
    sub: [__m512i; 2],
}

/// What the tile of one block gives token `t`: its integers (exact, whatever way they
/// were added up; `lo` and `hi` the two halves) turned into the reference's float
/// steps on `acc` and `accm`.
#[inline(always)]
unsafe fn step<F: Format>(
    (lo, hi): (__m512i, __m512i),
    acts: &Acts,
    (t, b): (usize, usize),
    scales: &TileScales,
    acc: &mut __m512,
    accm: &mut __m512,
) {
    let (s, m, sub) = (scales.s, scales.m, &scales.sub);
    let isum = if F::HALVES {
        let h = acts.half_sums(t).as_ptr().add(2 * b);
        let lo = _mm512_sub_epi32(lo, _mm512_set1_epi32(F::OFFSET * *h));
        let hi = _mm512_sub_epi32(hi, _mm512_set1_epi32(F::OFFSET * *h.add(1)));
        _mm512_add_epi32(
            _mm512_mullo_epi32(sub[0], lo),
            _mm512_mullo_epi32(sub[1], hi),
        )
    } else if F::OFFSET != 0 {
        let sum = *acts.sums(t).get_unchecked(b);
        _mm512_sub_epi32(_mm512_add_epi32(lo, hi), _mm512_set1_epi32(F::OFFSET * sum))
    } else {
        _mm512_add_epi32(lo, hi)
    };
    let dx = _mm512_set1_ps(*acts.scales(t).get_unchecked(b));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(s, dx), *acc);
    if F::MIN {
        let sum = *acts.sums(t).get_unchecked(b) as f32;
        *accm = _mm512_fmadd_ps(_mm512_set1_ps(sum), _mm512_mul_ps(m, dx), *accm);
    }
}

/// Stores the sixteen rows of panel `p` for token `t`: `acc + accm`, as the reference
/// ends.
#[inline(always)]
pub(super) unsafe fn finish(dest: Dest, t: usize, p: usize, acc: __m512, accm: __m512) {
    let v = _mm512_add_ps(acc, accm);
    let first = p * PANEL;
    if first + PANEL <= dest.rows {
        _mm512_storeu_ps(dest.ptr.add(t * dest.stride + first - dest.first), v);
    } else {
        let mut lanes = [0f32; PANEL];
        _mm512_storeu_ps(lanes.as_mut_ptr(), v);
        for (n, x) in lanes.iter().enumerate() {
            dest.put(t, p, n, *x);
        }
    }
}

#[inline(always)]
unsafe fn group<F: Format, const N: usize>(
    w: &Packed,
    layout: &TileLayout,
    acts: &Acts,
    p: usize,
    t0: usize,
    dest: Dest,
) {
    let mut acc = [_mm512_setzero_ps(); N];
    let mut accm = [_mm512_setzero_ps(); N];
    let zero = _mm512_setzero_si512();
    for b in 0..w.blocks() {
        let tile = w.tile(layout, p, b).as_ptr();
        let header = w.header(layout, p, b).as_ptr();
        prefetch_ahead(tile, layout.bytes);
        let v = widen::<F>(tile);
        let tile_scales = TileScales {
            s: scales::<F, false>(tile.add(layout.scales_at), header),
            m: if F::MIN {
                scales::<F, true>(tile.add(layout.mins_at), header)
            } else {
                _mm512_setzero_ps()
            },
            sub: if F::HALVES {
                subs(tile.add(layout.subs_at))
            } else {
                [zero; 2]
            },
        };
        for i in 0..N {
            let t = t0 + i;
            let x = acts.qs(t).as_ptr().add(b * 32) as *const i32;
            let x = |k: usize| _mm512_set1_epi32(x.add(k).read_unaligned());
            let a0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, v[0], x(0)), v[1], x(1));
            let a1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, v[2], x(2)), v[3], x(3));
            let a2 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, v[4], x(4)), v[5], x(5));
            let a3 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, v[6], x(6)), v[7], x(7));
            step::<F>(
                (_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                acts,
                (t, b),
                &tile_scales,
                &mut acc[i],
                &mut accm[i],
            );
        }
    }
    for i in 0..N {
        finish(dest, t0 + i, p, acc[i], accm[i]);
    }
}
