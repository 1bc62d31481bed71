//! f32 matrix products on Intel AMX tiles, for the sentence encoder: each f32 value is
//! split into two bf16 values, `hi = bf16(v)` and `lo = bf16(v − hi)`, and a product
//! `x · w` becomes `x_hi·w_hi + x_hi·w_lo + x_lo·w_hi` (the `lo·lo` term is below
//! f32's own rounding), each accumulated in f32 by `tdpbf16ps`. That keeps about 16
//! bits of every operand — MiniLM stays within 2e-6 in cosine of sentence-transformers,
//! where one bf16 product alone is off by 8e-4 — at a fraction of AVX-512's cost.
//!
//! Weights are split once, at load, into the tile layout (`B` operands: for each panel
//! of 16 outputs and block of 32 inputs, 16 rows of 16 bf16 pairs); activations are
//! split per call. A row's outputs depend only on that row (AMX sums every output on
//! its own), so a sentence's vector does not depend on what else is in its batch.

use std::arch::asm;
use std::arch::x86_64::*;
use std::ops::Range;

/// A weight matrix `[n, k]` (row-major, `n` outputs of `k` inputs) split for the tiles.
pub struct Bf16x3 {
    n: usize,
    k: usize,
    /// Per pair of panels of 16 outputs, per block of 32 inputs: each panel's `hi` tile
    /// then its `lo` tile, 512 bf16 each.
    tiles: Aligned,
}

/// bf16 values on 64-byte boundaries: a tile row that straddles two cache lines makes
/// every tile load twice as slow and more.
#[derive(Default)]
struct Aligned(Vec<Line>, usize);

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u16; 32]);

impl Aligned {
    /// `len` zeros.
    fn zeros(len: usize) -> Self {
        let mut a = Aligned::default();
        a.reset(len);
        a
    }

    fn reset(&mut self, len: usize) {
        self.0.clear();
        self.0.resize(len.div_ceil(32), Line([0; 32]));
        self.1 = len;
    }

    fn as_slice(&self) -> &[u16] {
        // SAFETY: `Line` is 32 plain u16s with no padding; `1 ≤ 32 · lines`.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr() as *const u16, self.1) }
    }

    fn as_mut_slice(&mut self) -> &mut [u16] {
        // SAFETY: as above, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut u16, self.1) }
    }
}

const TILE: usize = 512;
/// Cache lines of weights one step (a block of 32 inputs for a pair of panels) reads.
const LINES_PER_STEP: usize = 4 * TILE * 2 / 64;
/// How many pairs of panels ahead the weights are fetched (two ahead measured slower:
/// the first pairs of every product then wait on memory).
const AHEAD: usize = 1;
/// Products with fewer multiply-adds than this run on the calling thread: a message
/// of up to about a hundred tokens (measured on the aiwaves debate with retrieval:
/// 20% less CPU per turn on one thread, the same wall time).
const SERIAL_MACS: usize = 1 << 26;

impl std::fmt::Debug for Bf16x3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bf16x3")
            .field("n", &self.n)
            .field("k", &self.k)
            .finish()
    }
}

/// Whether this CPU has AMX-BF16 and the system lets this process use the tiles (and
/// the kernels are not lowered below AMX with `SOPSIM_KERNELS`).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid_count;
        crate::quant::Kernels::detect() == crate::quant::Kernels::Amx
            && __cpuid_count(7, 0).edx & (1 << 22) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `v` rounded to the nearest bf16 (ties to even), as bits; NaN stays NaN. Written
/// without branches, so that loops over it vectorise.
#[inline(always)]
fn bf16_bits(v: f32) -> u16 {
    let bits = v.to_bits();
    let rounded = (bits.wrapping_add(0x7FFF + ((bits >> 16) & 1)) >> 16) as u16;
    let quiet = ((bits >> 16) as u16) | 0x40;
    if v.is_nan() {
        quiet
    } else {
        rounded
    }
}

#[inline(always)]
fn bf16_value(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// `(hi, lo)` of `v`.
#[inline(always)]
fn split(v: f32) -> (u16, u16) {
    let hi = bf16_bits(v);
    (hi, bf16_bits(v - bf16_value(hi)))
}

impl Bf16x3 {
    /// `None` unless `n` is a multiple of 16 and `k` of 32.
    pub fn new(w: &[f32], n: usize, k: usize) -> Option<Self> {
        if n == 0 || k == 0 || !n.is_multiple_of(16) || !k.is_multiple_of(32) || w.len() != n * k {
            return None;
        }
        let blocks = k / 32;
        // Per pair of panels (the last one zero if the count is odd), per block: the
        // first panel's hi and lo tiles, then the second's — what one step loads, side
        // by side.
        let pairs = (n / 16).div_ceil(2);
        let mut tiles = Aligned::zeros(pairs * blocks * 4 * TILE);
        for (step, four) in tiles.as_mut_slice().chunks_exact_mut(4 * TILE).enumerate() {
            let (q, kb) = (step / blocks, step % blocks);
            for (slot, pair) in four.chunks_exact_mut(2 * TILE).enumerate() {
                let p = 2 * q + slot;
                if p * 16 >= n {
                    break;
                }
                let (hi, lo) = pair.split_at_mut(TILE);
                for kk in 0..16 {
                    for c in 0..16 {
                        for e in 0..2 {
                            let v = w[(p * 16 + c) * k + kb * 32 + 2 * kk + e];
                            let (h, l) = split(v);
                            let at = kk * 32 + c * 2 + e;
                            hi[at] = h;
                            lo[at] = l;
                        }
                    }
                }
            }
        }
        Some(Self { n, k, tiles })
    }

    /// `out[r] = x[r] · wᵀ + bias` for `rows` rows of `k` values (`out` is `rows × n`),
    /// spread over the compute threads.
    pub fn product(&self, x: &[f32], rows: usize, bias: &[f32], out: &mut [f32]) {
        let (n, k) = (self.n, self.k);
        assert!(x.len() >= rows * k && out.len() >= rows * n && bias.len() == n);
        let padded = rows.div_ceil(16) * 16;
        SPLIT.with(|buffers| {
            let (hi, lo) = &mut *buffers.borrow_mut();
            hi.reset(padded * k);
            lo.reset(padded * k);
            // SAFETY: `available()` implies AVX-512F (checked when the weights were split).
            unsafe { split_all(&x[..rows * k], hi.as_mut_slice(), lo.as_mut_slice()) };
            self.spread(hi.as_slice(), lo.as_slice(), rows, bias, out);
        })
    }

    fn spread(&self, hi: &[u16], lo: &[u16], rows: usize, bias: &[f32], out: &mut [f32]) {
        let n = self.n;
        let padded = rows.div_ceil(16) * 16;
        // Units of work: a pair of output panels × a tile of 16 rows, the row tiles
        // inner, so that a pair's weights come from memory once and from the cache for
        // the other row tiles.
        let (row_tiles, pairs) = (padded / 16, (n / 16).div_ceil(2));
        let units = row_tiles * pairs;
        // A short text's products are done before a second thread would have woken
        // and gone back to sleep, which costs more CPU than it saves time.
        let pieces = if rows * n * self.k < SERIAL_MACS {
            1
        } else {
            (crate::compute::threads() * 4).min(units)
        };
        let per = units.div_ceil(pieces);
        let dest = Dest(out.as_mut_ptr());
        let tasks: Vec<_> = (0..units)
            .step_by(per)
            .map(|start| {
                let range = start..(start + per).min(units);
                // SAFETY: `available()` was checked when the weights were split; each
                // task writes the outputs of its own units only.
                move || unsafe { self.units(range, row_tiles, hi, lo, rows, bias, dest) }
            })
            .collect();
        crate::compute::run_all(tasks);
    }

    /// # Safety
    /// AMX-BF16 must be usable; `dest` must hold `rows × n` floats, and no other task
    /// may write these units' outputs.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn units(
        &self,
        units: Range<usize>,
        row_tiles: usize,
        hi: &[u16],
        lo: &[u16],
        rows: usize,
        bias: &[f32],
        dest: Dest,
    ) {
        let (n, k) = (self.n, self.k);
        let blocks = k / 32;
        let panels = n / 16;
        let pairs_total = panels.div_ceil(2);
        let lines_per_step = LINES_PER_STEP.div_ceil(row_tiles);
        let config = config();
        asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly));
        let mut c = Products([0f32; 512]);
        let stride = k * 2;
        for unit in units {
            let (rt, pair) = (unit % row_tiles, unit / row_tiles);
            let (p0, p1) = (2 * pair, 2 * pair + 1);
            asm!("tilezero tmm0", "tilezero tmm1", options(nostack, nomem));
            for kb in 0..blocks {
                let a_hi = hi.as_ptr().add(rt * 16 * k + kb * 32);
                let a_lo = lo.as_ptr().add(rt * 16 * k + kb * 32);
                let b0 = self
                    .tiles
                    .as_slice()
                    .as_ptr()
                    .add((pair * blocks + kb) * 4 * TILE);
                let b1 = b0.add(2 * TILE);
                // Every step fetches its share of the next pair's weights into L2, so
                // that they stream from memory while this pair's products run (a
                // model's weights are far larger than the caches).
                if pair + AHEAD < pairs_total {
                    let next = self
                        .tiles
                        .as_slice()
                        .as_ptr()
                        .add((pair + AHEAD) * blocks * 4 * TILE);
                    let first = (rt * blocks + kb) * lines_per_step;
                    for line in first..(first + lines_per_step).min(blocks * LINES_PER_STEP) {
                        _mm_prefetch::<_MM_HINT_T1>(next.add(line * 32) as *const i8);
                    }
                }
                asm!(
                    "tileloadd tmm2, [{a_hi} + {stride} * 1]",
                    "tileloadd tmm3, [{a_lo} + {stride} * 1]",
                    "tileloadd tmm4, [{b0} + {sixty_four} * 1]",
                    "tileloadd tmm5, [{b0_lo} + {sixty_four} * 1]",
                    "tileloadd tmm6, [{b1} + {sixty_four} * 1]",
                    "tileloadd tmm7, [{b1_lo} + {sixty_four} * 1]",
                    // The two accumulators take turns: a product into one waits on
                    // the one before it into the same, not on the other's.
                    "tdpbf16ps tmm0, tmm2, tmm4",
                    "tdpbf16ps tmm1, tmm2, tmm6",
                    "tdpbf16ps tmm0, tmm2, tmm5",
                    "tdpbf16ps tmm1, tmm2, tmm7",
                    "tdpbf16ps tmm0, tmm3, tmm4",
                    "tdpbf16ps tmm1, tmm3, tmm6",
                    a_hi = in(reg) a_hi,
                    a_lo = in(reg) a_lo,
                    stride = in(reg) stride,
                    b0 = in(reg) b0,
                    b0_lo = in(reg) b0.add(TILE),
                    b1 = in(reg) b1,
                    b1_lo = in(reg) b1.add(TILE),
                    sixty_four = in(reg) 64usize,
                    options(nostack, readonly),
                );
            }
            asm!(
                "tilestored [{c0} + {sixty_four} * 1], tmm0",
                "tilestored [{c1} + {sixty_four} * 1], tmm1",
                c0 = in(reg) c.0.as_mut_ptr(),
                c1 = in(reg) c.0.as_mut_ptr().add(256),
                sixty_four = in(reg) 64usize,
                options(nostack),
            );
            for r in 0..16.min(rows - rt * 16) {
                let row = rt * 16 + r;
                for (slot, p) in [p0, p1].into_iter().enumerate() {
                    if p == panels {
                        break;
                    }
                    let v = _mm512_add_ps(
                        _mm512_load_ps(c.0.as_ptr().add(slot * 256 + r * 16)),
                        _mm512_loadu_ps(bias.as_ptr().add(p * 16)),
                    );
                    _mm512_storeu_ps(dest.0.add(row * n + p * 16), v);
                }
            }
        }
        asm!("tilerelease", options(nostack, nomem));
    }
}

thread_local! {
    /// The activations' `hi` and `lo` halves, reused from call to call.
    static SPLIT: std::cell::RefCell<(Aligned, Aligned)> = std::cell::RefCell::default();
}

/// Splits every value (the same loop compiled for AVX-512, so it runs as vectors).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn split_all(x: &[f32], hi: &mut [u16], lo: &mut [u16]) {
    for ((v, h), l) in x.iter().zip(hi).zip(lo) {
        (*h, *l) = split(*v);
    }
}

#[repr(C, align(64))]
struct Products([f32; 512]);

#[repr(C, align(64))]
struct Config([u8; 64]);

/// Every tile register as 16 rows of 64 bytes.
fn config() -> Config {
    let mut c = [0u8; 64];
    c[0] = 1; // palette
    for t in 0..8 {
        c[16 + 2 * t..18 + 2 * t].copy_from_slice(&64u16.to_le_bytes());
        c[48 + t] = 16;
    }
    Config(c)
}

#[derive(Clone, Copy)]
struct Dest(*mut f32);

// SAFETY: the tasks of one product write disjoint outputs through it while the output
// buffer stays mutably borrowed.
unsafe impl Send for Dest {}
unsafe impl Sync for Dest {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting_keeps_sixteen_bits() {
        for v in [1.0f32, -2.718_281_7, 1e-20, 123_456.79, 0.1] {
            let (h, l) = split(v);
            let back = bf16_value(h) + bf16_value(l);
            assert!((back - v).abs() <= v.abs() * 1e-5, "{v} → {back}");
        }
        assert_eq!(bf16_bits(1.0), half::bf16::from_f32(1.0).to_bits());
        assert_eq!(
            bf16_bits(1.003_906_3),
            half::bf16::from_f32(1.003_906_3).to_bits()
        );
    }

    #[test]
    fn products_are_close_to_f32_products() {
        if !available() {
            return;
        }
        let (n, k, rows) = (48, 64, 21);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let x: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 13) % 29) as f32 / 7.0 - 2.0)
            .collect();
        let bias: Vec<f32> = (0..n).map(|i| i as f32 * 0.01).collect();
        let m = Bf16x3::new(&w, n, k).unwrap();
        let mut out = vec![0f32; rows * n];
        m.product(&x, rows, &bias, &mut out);
        for r in 0..rows {
            for c in 0..n {
                let want: f64 = (0..k)
                    .map(|i| f64::from(x[r * k + i]) * f64::from(w[c * k + i]))
                    .sum::<f64>()
                    + f64::from(bias[c]);
                let got = f64::from(out[r * n + c]);
                assert!(
                    (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                    "{r},{c}: {got} vs {want}"
                );
            }
        }
        // A row gives the same bits alone.
        let mut alone = vec![0f32; n];
        m.product(&x[5 * k..6 * k], 1, &bias, &mut alone);
        assert_eq!(
            alone.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            out[5 * n..6 * n]
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        );
    }
    /// `cargo test -p sopsim-infer --release bf16x3_speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bf16x3_speed() {
        if !available() {
            return;
        }
        for (n, k) in [(1152usize, 384usize), (1536, 384), (384, 1536)] {
            let w: Vec<f32> = (0..n * k)
                .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
                .collect();
            let m = Bf16x3::new(&w, n, k).unwrap();
            let bias = vec![0f32; n];
            for rows in [16usize, 128, 2048] {
                let x: Vec<f32> = (0..rows * k)
                    .map(|i| ((i * 13) % 29) as f32 / 7.0 - 2.0)
                    .collect();
                let mut out = vec![0f32; rows * n];
                m.product(&x, rows, &bias, &mut out);
                let reps = 20;
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    m.product(&x, rows, &bias, &mut out);
                }
                let s = t.elapsed().as_secs_f64() / reps as f64;
                println!(
                    "{n}x{k} rows {rows}: {:.3} ms, {:.0} GMAC/s",
                    s * 1e3,
                    (rows * n * k) as f64 / s / 1e9
                );
            }
        }
    }
}
