//! AVX2 kernels over the panel layout (with AVX-VNNI where the CPU has it): the
//! AVX-512 kernel's scheme in 256-bit registers, a tile's sixteen rows as two halves
//! of eight lanes. Without VNNI, bytes are multiplied with `maddubs`, which cannot
//! overflow for values of up to six bits; Q8_0's bytes are multiplied as magnitude
//! times signed activation instead. Every lane takes the reference's float steps.

use std::arch::x86_64::*;
use std::ops::Range;

use super::acts::Acts;
use super::formats::{Bits, Scale, WeightType};
use super::packed::{Dest, Packed, TileLayout, HEADER_MINS_AT, PANEL};
use super::x86_512::{by_format, prefetch_ahead, Format};
use super::Kernels;

/// Tokens that share one widening of a tile: eight, which amortises the widening
/// (five bits take more instructions to widen than four tokens' products), but four
/// for Q8_0, whose signed products keep two copies of the tile in registers.
const fn group_of<F: Format>() -> usize {
    if matches!(F::BITS, Bits::Eight) {
        4
    } else {
        8
    }
}

pub(super) fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

pub(super) fn has_vnni() -> bool {
    is_x86_feature_detected!("avxvnni")
}

/// # Safety
/// The CPU must support `kernels` (AVX2, FMA, F16C, and AVX-VNNI for
/// [`Kernels::AvxVnni`]); `dest` must be valid for `panels` (see [`Dest`]).
pub(super) unsafe fn matmul(
    kernels: Kernels,
    w: &Packed,
    acts: &Acts,
    panels: Range<usize>,
    dest: Dest,
) {
    if kernels == Kernels::AvxVnni {
        run_vnni(w, acts, panels, dest)
    } else {
        run_avx2(w, acts, panels, dest)
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run_avx2(w: &Packed, acts: &Acts, panels: Range<usize>, dest: Dest) {
    let Some(layout) = w.layout() else { return };
    by_format!(w.ty(), panels_of_avx2, w, &layout, acts, panels, dest)
}

#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn run_vnni(w: &Packed, acts: &Acts, panels: Range<usize>, dest: Dest) {
    let Some(layout) = w.layout() else { return };
    by_format!(w.ty(), panels_of_vnni, w, &layout, acts, panels, dest)
}

#[inline(always)]
unsafe fn panels_of_avx2<F: Format>(
    w: &Packed,
    layout: &TileLayout,
    acts: &Acts,
    panels: Range<usize>,
    dest: Dest,
) {
    panels_of::<F, Avx2>(w, layout, acts, panels, dest)
}

#[inline(always)]
unsafe fn panels_of_vnni<F: Format>(
    w: &Packed,
    layout: &TileLayout,
    acts: &Acts,
    panels: Range<usize>,
    dest: Dest,
) {
    panels_of::<F, AvxVnni>(w, layout, acts, panels, dest)
}

/// Byte products of weights and activations, summed per lane.
trait Dot {
    /// Σ over registers `c` in `regs` of each lane's four products `u[c]·x(c)`, `u`
    /// unsigned and at most `bits` wide (full bytes only where [`Dot::FULL_BYTES`]).
    unsafe fn sum(
        bits: Bits,
        u: &[__m256i; 8],
        x: impl Fn(usize) -> __m256i,
        regs: Range<usize>,
    ) -> __m256i;
    /// Whether [`Dot::sum`] takes full unsigned bytes (Q8_0 as stored).
    const FULL_BYTES: bool;
    /// A tile half's sub-scales (Q6_K's two per row), as [`Dot::scaled_halves`] takes
    /// them, from the eight rows' bytes for the tile's first half at `at` and for its
    /// second [`PANEL`] bytes on.
    type Subs: Copy;
    unsafe fn subs(at: *const u8) -> Self::Subs;
    /// Σ over the tile's halves `k` (registers `4k..4k + 4`) of each row's sub-scale
    /// for `k` times its sum of products less `offset` times the activations' sum over
    /// `k` (`half_sums[k]`).
    unsafe fn scaled_halves(
        bits: Bits,
        u: &[__m256i; 8],
        x: impl Fn(usize) -> __m256i,
        subs: Self::Subs,
        half_sums: *const i32,
        offset: i32,
    ) -> __m256i;
}

/// Each row's sub-scale in both 16-bit halves of its lane, for either half of a
/// tile; and the row's two sub-scales paired in its lane.
#[derive(Clone, Copy)]
struct DoubledSubs {
    doubled: [__m256i; 2],
    paired: __m256i,
}

struct Avx2;
struct AvxVnni;

impl Dot for Avx2 {
    const FULL_BYTES: bool = false;
    /// `maddubs` gives pairs of products in 16 bits, at most 2 · (2^bits − 1) · 128 in
    /// size: eight registers' worth of four-bit weights, four of five-bit and two of
    /// six-bit add up in 16 bits without overflow before one `madd` widens them, so
    /// the sums are exact and a third of the multiplies are saved.
    #[inline(always)]
    unsafe fn sum(
        bits: Bits,
        u: &[__m256i; 8],
        x: impl Fn(usize) -> __m256i,
        regs: Range<usize>,
    ) -> __m256i {
        let per = match bits {
            Bits::Four => 8,
            Bits::Five => 4,
            Bits::Six => 2,
            Bits::Eight => 1,
        };
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_si256();
        let mut c = regs.start;
        while c < regs.end {
            let end = (c + per).min(regs.end);
            let mut pairs = _mm256_maddubs_epi16(u[c], x(c));
            for (k, u) in u.iter().enumerate().take(end).skip(c + 1) {
                pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(*u, x(k)));
            }
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
            c = end;
        }
        acc
    }

    type Subs = DoubledSubs;

    #[inline(always)]
    unsafe fn subs(at: *const u8) -> DoubledSubs {
        let first = _mm_loadl_epi64(at as *const __m128i);
        let second = _mm_loadl_epi64(at.add(PANEL) as *const __m128i);
        DoubledSubs {
            doubled: [
                _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(first, first)),
                _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(second, second)),
            ],
            paired: _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(first, second)),
        }
    }

    /// The sub-scales multiply the 16-bit pair sums in the `madd` that widens them,
    /// and the offset's share is one more `madd` of the paired sub-scales with the
    /// two half sums (at most 16 · 128 in size, so 16 bits hold them), shifted by the
    /// offset's power of two: no 32-bit multiplies. Six-bit weights only, whose pair
    /// sums over two registers stay within 16 bits (see [`Dot::sum`]).
    #[inline(always)]
    unsafe fn scaled_halves(
        bits: Bits,
        u: &[__m256i; 8],
        x: impl Fn(usize) -> __m256i,
        subs: DoubledSubs,
        half_sums: *const i32,
        offset: i32,
    ) -> __m256i {
        debug_assert!(bits == Bits::Six && offset.count_ones() == 1);
        let mut acc = _mm256_setzero_si256();
        for c in (0..8).step_by(2) {
            let pairs = _mm256_add_epi16(
                _mm256_maddubs_epi16(u[c], x(c)),
                _mm256_maddubs_epi16(u[c + 1], x(c + 1)),
            );
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, subs.doubled[c / 4]));
        }
        let sums = (*half_sums as u32 & 0xFFFF) | ((*half_sums.add(1) as u32) << 16);
        let shares = _mm256_madd_epi16(subs.paired, _mm256_set1_epi32(sums as i32));
        let shift = _mm_cvtsi32_si128(offset.trailing_zeros() as i32);
        _mm256_sub_epi32(acc, _mm256_sll_epi32(shares, shift))
    }
}

impl Dot for AvxVnni {
    const FULL_BYTES: bool = true;
    #[inline(always)]
    unsafe fn sum(
        _bits: Bits,
        u: &[__m256i; 8],
        x: impl Fn(usize) -> __m256i,
        regs: Range<usize>,
    ) -> __m256i {
        let mut acc = _mm256_setzero_si256();
        for c in regs {
            acc = _mm256_dpbusd_avx_epi32(acc, u[c], x(c));
        }
        acc
    }

    type Subs = [__m256i; 2];

    #[inline(always)]
    unsafe fn subs(at: *const u8) -> [__m256i; 2] {
        [
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(at as *const __m128i)),
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(at.add(PANEL) as *const __m128i)),
        ]
    }

    #[inline(always)]
    unsafe fn scaled_halves(
        bits: Bits,
        u: &[__m256i; 8],
        x: impl Fn(usize) -> __m256i,
        subs: [__m256i; 2],
        half_sums: *const i32,
        offset: i32,
    ) -> __m256i {
        let lo = Self::sum(bits, u, &x, 0..4);
        let hi = Self::sum(bits, u, &x, 4..8);
        let lo = _mm256_sub_epi32(lo, _mm256_set1_epi32(offset * *half_sums));
        let hi = _mm256_sub_epi32(hi, _mm256_set1_epi32(offset * *half_sums.add(1)));
        _mm256_add_epi32(
            _mm256_mullo_epi32(subs[0], lo),
            _mm256_mullo_epi32(subs[1], hi),
        )
    }
}

#[inline(always)]
unsafe fn panels_of<F: Format, D: Dot>(
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
            let n = (tokens - t0).min(group_of::<F>());
            match n {
                8 => group::<F, D, 8>(w, layout, acts, p, t0, dest),
                7 => group::<F, D, 7>(w, layout, acts, p, t0, dest),
                6 => group::<F, D, 6>(w, layout, acts, p, t0, dest),
                5 => group::<F, D, 5>(w, layout, acts, p, t0, dest),
                4 => group::<F, D, 4>(w, layout, acts, p, t0, dest),
                3 => group::<F, D, 3>(w, layout, acts, p, t0, dest),
                2 => group::<F, D, 2>(w, layout, acts, p, t0, dest),
                _ => group::<F, D, 1>(w, layout, acts, p, t0, dest),
            }
            t0 += n;
        }
    }
}

/// Half `h` (rows 8h..8h+8) of a tile's integers as bytes: register `c` holds values
/// `4c..4c+4` of those rows.
#[inline(always)]
unsafe fn widen<F: Format>(q: *const u8, h: usize) -> [__m256i; 8] {
    let at = |c: usize| q.add(64 * c + 32 * h);
    if F::BITS == Bits::Eight {
        return std::array::from_fn(|c| _mm256_loadu_si256(at(c) as *const _));
    }
    let m4 = _mm256_set1_epi8(0x0F);
    let mut v = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let nib = _mm256_loadu_si256(at(c) as *const _);
        v[c] = _mm256_and_si256(nib, m4);
        v[c + 4] = _mm256_and_si256(_mm256_srli_epi16::<4>(nib), m4);
    }
    match F::BITS {
        Bits::Five => {
            for (c, r) in v.iter_mut().enumerate() {
                let bits = (q.add(256 + 8 * c + 4 * h) as *const u32).read_unaligned();
                *r = _mm256_or_si256(*r, bit_bytes(bits, 16));
            }
        }
        Bits::Six => {
            let m = _mm256_set1_epi8(0x30);
            for (c, r) in v.iter_mut().enumerate() {
                let src = _mm256_loadu_si256(q.add(256 + 64 * (c % 2) + 32 * h) as *const _);
                let high = match c / 2 {
                    0 => _mm256_slli_epi16::<4>(src),
                    1 => _mm256_slli_epi16::<2>(src),
                    2 => src,
                    _ => _mm256_srli_epi16::<2>(src),
                };
                *r = _mm256_or_si256(*r, _mm256_and_si256(high, m));
            }
        }
        _ => {}
    }
    v
}

/// Byte `j` is `value` where bit `j` of `bits` is set, else 0.
#[inline(always)]
unsafe fn bit_bytes(bits: u32, value: i8) -> __m256i {
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
    _mm256_and_si256(set, _mm256_set1_epi8(value))
}

/// Rows `8h..8h + 8` of a super-block's f16 scales (`MIN` false) or minimums, from
/// its group's `header` (zeros for minimums of a format without them, unused).
#[inline(always)]
unsafe fn super_values<F: Format, const MIN: bool>(header: *const u8, h: usize) -> __m256 {
    if MIN && !F::MIN {
        return _mm256_setzero_ps();
    }
    let from = header.add(if MIN { HEADER_MINS_AT } else { 0 } + 16 * h);
    _mm256_cvtph_ps(_mm_loadu_si128(from as *const __m128i))
}

/// Rows `8h..8h + 8` of a tile's scales (`MIN` false) or minimums, from the tile's
/// part at `at` and its super-block's values `sup` ([`super_values`]), with the
/// reference's float steps.
#[inline(always)]
unsafe fn scales<F: Format, const MIN: bool>(at: *const u8, sup: __m256, h: usize) -> __m256 {
    match F::SCALE {
        Scale::F16 => _mm256_cvtph_ps(_mm_loadu_si128(at.add(16 * h) as *const __m128i)),
        Scale::Super => sup,
        Scale::SuperTimesU8 => {
            let ints = _mm256_cvtepu8_epi32(_mm_loadl_epi64(at.add(8 * h) as *const __m128i));
            let v = _mm256_mul_ps(sup, _mm256_cvtepi32_ps(ints));
            if MIN {
                _mm256_xor_ps(v, _mm256_set1_ps(-0.0))
            } else {
                v
            }
        }
    }
}

/// Where one token's quantised activations start, taken once for a group of tokens
/// rather than as bounds-checked slices for every block.
struct TokenActs {
    qs: *const i8,
    scales: *const f32,
    sums: *const i32,
    half_sums: *const i32,
}

impl TokenActs {
    #[inline(always)]
    fn of(acts: &Acts, t: usize) -> Self {
        Self {
            qs: acts.qs(t).as_ptr(),
            scales: acts.scales(t).as_ptr(),
            sums: acts.sums(t).as_ptr(),
            half_sums: acts.half_sums(t).as_ptr(),
        }
    }
}

/// One half of a tile's rows, for a group of tokens: its chains (`acc` for the
/// products, `accm` for the minimums) and its super-block's current values.
#[derive(Clone, Copy)]
struct HalfChains<const N: usize> {
    acc: [__m256; N],
    accm: [__m256; N],
    sup: __m256,
    sup_min: __m256,
}

#[inline(always)]
unsafe fn group<F: Format, D: Dot, const N: usize>(
    w: &Packed,
    layout: &TileLayout,
    acts: &Acts,
    p: usize,
    t0: usize,
    dest: Dest,
) {
    let token: [TokenActs; N] = std::array::from_fn(|i| TokenActs::of(acts, t0 + i));
    let zero = _mm256_setzero_ps();
    let mut halves = [HalfChains {
        acc: [zero; N],
        accm: [zero; N],
        sup: zero,
        sup_min: zero,
    }; 2];
    // Each chain takes the blocks in order either way. One or two tokens (decode)
    // take both halves of a tile while it is at hand; more go half by half, their
    // accumulators filling the registers already.
    if N <= 2 {
        for b in 0..w.blocks() {
            let tile = w.tile(layout, p, b).as_ptr();
            prefetch_ahead(tile, layout.bytes);
            for (h, half) in halves.iter_mut().enumerate() {
                half_block::<F, D, N>(w, layout, &token, tile, p, b, h, half);
            }
        }
    } else {
        for (h, half) in halves.iter_mut().enumerate() {
            for b in 0..w.blocks() {
                let tile = w.tile(layout, p, b).as_ptr();
                if h == 0 {
                    prefetch_ahead(tile, layout.bytes);
                }
                half_block::<F, D, N>(w, layout, &token, tile, p, b, h, half);
            }
        }
    }
    for (h, half) in halves.iter().enumerate() {
        for i in 0..N {
            let mut lanes = [0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(half.acc[i], half.accm[i]));
            for (n, x) in lanes.iter().enumerate() {
                dest.put(t0 + i, p, 8 * h + n, *x);
            }
        }
    }
}

/// Half `h` (rows `8h..8h + 8`) of `tile`, block `b` of panel `p`, for each token.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn half_block<F: Format, D: Dot, const N: usize>(
    w: &Packed,
    layout: &TileLayout,
    token: &[TokenActs; N],
    tile: *const u8,
    p: usize,
    b: usize,
    h: usize,
    half: &mut HalfChains<N>,
) {
    // Q8_0 without full-byte products: signed bytes, multiplied as magnitude × sign.
    let signed = F::BITS == Bits::Eight && !D::FULL_BYTES;
    let offset = if signed { 0 } else { F::OFFSET };
    // The super-block's values change once per group of tiles (formats with a scale
    // per block have none).
    if F::SCALE != Scale::F16 && b.is_multiple_of(layout.ints.group_blocks) {
        let header = w.header(layout, p, b).as_ptr();
        half.sup = super_values::<F, false>(header, h);
        half.sup_min = super_values::<F, true>(header, h);
    }
    let mut v = widen::<F>(tile, h);
    let mut magnitude = v;
    if signed {
        for (r, m) in v.iter_mut().zip(magnitude.iter_mut()) {
            *r = _mm256_xor_si256(*r, _mm256_set1_epi8(-128));
            *m = _mm256_abs_epi8(*r);
        }
    }
    let s = scales::<F, false>(tile.add(layout.scales_at), half.sup, h);
    let m = if F::MIN {
        scales::<F, true>(tile.add(layout.mins_at), half.sup_min, h)
    } else {
        _mm256_setzero_ps()
    };
    let subs = F::HALVES.then(|| D::subs(tile.add(layout.subs_at + 8 * h)));
    for (i, (acc, accm)) in half.acc.iter_mut().zip(half.accm.iter_mut()).enumerate() {
        let ta = &token[i];
        let xp = ta.qs.add(b * 32) as *const i32;
        let x = |k: usize| {
            let x = _mm256_set1_epi32(xp.add(k).read_unaligned());
            if signed {
                _mm256_sign_epi8(x, v[k])
            } else {
                x
            }
        };
        let u = if signed { &magnitude } else { &v };
        let isum = if let Some(subs) = subs {
            let hs = ta.half_sums.add(2 * b);
            D::scaled_halves(F::BITS, u, x, subs, hs, offset)
        } else {
            let sum = *ta.sums.add(b);
            _mm256_sub_epi32(D::sum(F::BITS, u, x, 0..8), _mm256_set1_epi32(offset * sum))
        };
        let dx = _mm256_set1_ps(*ta.scales.add(b));
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(s, dx), *acc);
        if F::MIN {
            let sum = *ta.sums.add(b) as f32;
            *accm = _mm256_fmadd_ps(_mm256_set1_ps(sum), _mm256_mul_ps(m, dx), *accm);
        }
    }
}
