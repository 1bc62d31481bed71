//! Float functions computed in a fixed order over sixteen lanes, so that every build
//! (portable, AVX2, AVX-512) gives the same bits: sopsim's own `exp` (the platform's
//! differs between libraries and versions), a fixed-order sum, and the MLP's
//! activation.

/// Lanes of the fixed-order functions.
pub const L: usize = 16;

/// The sixteen lanes summed in a fixed order: halves, quarters, pairs, then the last two.
#[inline(always)]
pub fn sum16(a: &[f32; L]) -> f32 {
    let mut h = [0f32; 8];
    for i in 0..8 {
        h[i] = a[i] + a[i + 8];
    }
    let mut q = [0f32; 4];
    for i in 0..4 {
        q[i] = h[i] + h[i + 4];
    }
    let p = [q[0] + q[2], q[1] + q[3]];
    p[0] + p[1]
}

/// ln 2 in two parts, so that `x − n·ln 2` loses nothing for the `n` that occur.
pub const LN2_HI: f32 = 0.693_145_75;
/// The low part: what `LN2_HI` leaves of ln 2.
pub const LN2_LO: f32 = 1.428_606_8e-6;
/// Horner coefficients of e^r's Taylor polynomial, highest power first (the constant
/// 1 is added last).
pub const EXP_POLY: [f32; 6] = [1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0];

/// `e^x` for each lane, to within a couple of units in the last place, by the same
/// operations on every CPU: `x = n·ln 2 + r`, a degree-6 polynomial in `r`, times
/// `2^n`. Inputs below −87 give `e^−87` rather than a subnormal.
#[inline(always)]
pub fn exp(x: [f32; L]) -> [f32; L] {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C: [f32; 6] = EXP_POLY;
    let mut out = [0f32; L];
    for l in 0..L {
        // max, then min: NaN becomes −87, as the SIMD version's operand order gives
        // (`clamp` would keep NaN).
        #[allow(clippy::manual_clamp)]
        let x = x[l].max(-87.0).min(88.0);
        let n = (x * LOG2E).round_ties_even();
        let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, x));
        let mut p = C[0];
        for c in &C[1..] {
            p = p.mul_add(r, *c);
        }
        let p = p.mul_add(r, 1.0);
        // SAFETY: `n` is a finite whole number in −126..=127 (x was clamped, NaN
        // included), so the plain conversion (which vectorises, unlike `as`'s
        // saturating one) is exact.
        let n = unsafe { n.to_int_unchecked::<i32>() };
        let two_n = f32::from_bits(((n + 127) as u32) << 23);
        out[l] = p * two_n;
    }
    out
}

/// Attention's softmax, unnormalised: the first `len` scores (already scaled; `scores`
/// a multiple of [`L`] long) turned into `e^(score − max)`, the rest into 0; returns
/// their sum, added lane by lane and then across the lanes in a fixed order.
#[inline(always)]
pub fn softmax_weights(len: usize, scores: &mut [f32]) -> f32 {
    softmax_weights_from(0, len, scores)
}

/// [`softmax_weights`] over positions `from..len` only: those before `from` weigh
/// nothing (a sliding-window layer's keys out of its window).
#[inline(always)]
pub fn softmax_weights_from(from: usize, len: usize, scores: &mut [f32]) -> f32 {
    let mut max = f32::NEG_INFINITY;
    for v in &scores[from.min(len)..len] {
        max = max.max(*v);
    }
    let mut total = [0f32; L];
    for (b, block) in scores.chunks_exact_mut(L).enumerate() {
        let mut x = [0f32; L];
        for l in 0..L {
            x[l] = block[l] - max;
        }
        let e = exp(x);
        for l in 0..L {
            // Positions outside `from..len` weigh nothing.
            let at = b * L + l;
            block[l] = if at >= from && at < len { e[l] } else { 0.0 };
            total[l] += block[l];
        }
    }
    sum16(&total)
}

/// Probabilities from `scores` at temperature `t`: `e^((s − max) / t)`, normalised to
/// sum 1, in double precision (a choice's options and a draw's candidates).
pub fn softmax(scores: impl Iterator<Item = f32> + Clone, t: f64) -> Vec<f64> {
    let max = scores
        .clone()
        .fold(f64::NEG_INFINITY, |m, s| m.max(f64::from(s)));
    let mut p: Vec<f64> = scores.map(|s| ((f64::from(s) - max) / t).exp()).collect();
    let total: f64 = p.iter().sum();
    p.iter_mut().for_each(|x| *x /= total);
    p
}

/// `out[i] = e^((logits[i] − best) · inv)` for the finite logits, 0 for the others
/// (`out` is resized to `logits`' length rounded up to 16, the padding 0).
pub fn weights(logits: &[f32], best: f32, inv: f32, out: &mut Vec<f32>) {
    out.clear();
    out.resize(logits.len().div_ceil(L) * L, 0.0);
    #[cfg(target_arch = "x86_64")]
    {
        use crate::quant::Kernels;
        let k = Kernels::detect();
        if k >= Kernels::Avx512 {
            // SAFETY: AVX-512 kernels are chosen only on CPUs with AVX-512F.
            return unsafe { weights_avx512(logits, best, inv, out) };
        }
        if k >= Kernels::Avx2 {
            // SAFETY: AVX2 kernels are chosen only on CPUs with AVX2 and FMA.
            return unsafe { weights_avx2(logits, best, inv, out) };
        }
    }
    weights_generic(logits, best, inv, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
unsafe fn weights_avx512(logits: &[f32], best: f32, inv: f32, out: &mut [f32]) {
    weights_generic(logits, best, inv, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn weights_avx2(logits: &[f32], best: f32, inv: f32, out: &mut [f32]) {
    weights_generic(logits, best, inv, out)
}

#[inline(always)]
fn weights_generic(logits: &[f32], best: f32, inv: f32, out: &mut [f32]) {
    for (w, l) in out.chunks_exact_mut(L).zip(logits.chunks(L)) {
        let mut x = [f32::NEG_INFINITY; L];
        for (x, l) in x.iter_mut().zip(l) {
            if l.is_finite() {
                *x = (l - best) * inv;
            }
        }
        let e = exp(x);
        for ((w, e), x) in w.iter_mut().zip(e).zip(x) {
            *w = if x == f32::NEG_INFINITY { 0.0 } else { e };
        }
    }
}

/// `gate[i] = gate[i] / (1 + e^−gate[i]) · up[i]` (SiLU times the up projection),
/// sixteen at a time with [`exp`].
pub fn silu_mul(gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::quant::Kernels;
        let k = Kernels::detect();
        if k >= Kernels::Avx512 {
            // SAFETY: AVX-512 kernels are chosen only on CPUs with AVX-512F.
            return unsafe { silu_mul_avx512(gate, up) };
        }
        if k >= Kernels::Avx2 {
            // SAFETY: AVX2 kernels are chosen only on CPUs with AVX2 and FMA.
            return unsafe { silu_mul_avx2(gate, up) };
        }
    }
    silu_mul_generic(gate, up)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
unsafe fn silu_mul_avx512(gate: &mut [f32], up: &[f32]) {
    silu_mul_generic(gate, up)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn silu_mul_avx2(gate: &mut [f32], up: &[f32]) {
    silu_mul_generic(gate, up)
}

#[inline(always)]
fn silu_mul_generic(gate: &mut [f32], up: &[f32]) {
    let mut g16 = gate.chunks_exact_mut(L);
    let mut u16 = up.chunks_exact(L);
    for (g, u) in (&mut g16).zip(&mut u16) {
        let mut neg = [0f32; L];
        for l in 0..L {
            neg[l] = -g[l];
        }
        let e = exp(neg);
        for l in 0..L {
            g[l] = g[l] / (1.0 + e[l]) * u[l];
        }
    }
    for (g, u) in g16.into_remainder().iter_mut().zip(u16.remainder()) {
        let e = exp([-*g; L])[0];
        *g = *g / (1.0 + e) * u;
    }
}

/// `gate[i] = gelu(gate[i]) · up[i]` with GELU's tanh approximation (Gemma's MLP),
/// written as `x / (1 + e^(−2y))` with `y = √(2/π)·(x + 0.044715·x³)`, sixteen at a
/// time with [`exp`].
pub fn gelu_mul(gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::quant::Kernels;
        let k = Kernels::detect();
        if k >= Kernels::Avx512 {
            // SAFETY: AVX-512 kernels are chosen only on CPUs with AVX-512F.
            return unsafe { gelu_mul_avx512(gate, up) };
        }
        if k >= Kernels::Avx2 {
            // SAFETY: AVX2 kernels are chosen only on CPUs with AVX2 and FMA.
            return unsafe { gelu_mul_avx2(gate, up) };
        }
    }
    gelu_mul_generic(gate, up)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
unsafe fn gelu_mul_avx512(gate: &mut [f32], up: &[f32]) {
    gelu_mul_generic(gate, up)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_mul_avx2(gate: &mut [f32], up: &[f32]) {
    gelu_mul_generic(gate, up)
}

/// `−2·√(2/π)`: GELU's tanh argument, doubled and negated for the sigmoid form.
const GELU_K: f32 = -1.595_769;

#[inline(always)]
fn gelu_mul_generic(gate: &mut [f32], up: &[f32]) {
    let arg = |x: f32| GELU_K * (0.044_715 * x * x).mul_add(x, x);
    let mut g16 = gate.chunks_exact_mut(L);
    let mut u16 = up.chunks_exact(L);
    for (g, u) in (&mut g16).zip(&mut u16) {
        let mut z = [0f32; L];
        for l in 0..L {
            z[l] = arg(g[l]);
        }
        let e = exp(z);
        for l in 0..L {
            g[l] = g[l] / (1.0 + e[l]) * u[l];
        }
    }
    for (g, u) in g16.into_remainder().iter_mut().zip(u16.remainder()) {
        let e = exp([arg(*g); L])[0];
        *g = *g / (1.0 + e) * u;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_is_the_tanh_approximation() {
        let xs: Vec<f32> = (0..40).map(|i| i as f32 * 0.3 - 6.0).collect();
        let mut g = xs.clone();
        gelu_mul(&mut g, &vec![1.0; xs.len()]);
        for (x, got) in xs.iter().zip(&g) {
            let x = f64::from(*x);
            let want = 0.5
                * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh());
            assert!(
                (f64::from(*got) - want).abs() < 1e-5,
                "gelu({x}) = {got}, not {want}"
            );
        }
    }

    #[test]
    fn exp_is_close_to_the_library_exp() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x < 10.0 {
            let got = exp([x; L])[0];
            let want = f64::from(x).exp();
            worst = worst.max((f64::from(got) - want).abs() / want);
            x += 0.0137;
        }
        assert!(worst < 1e-6, "relative error {worst}");
    }

    #[test]
    fn weights_are_the_same_in_every_build() {
        let logits: Vec<f32> = (0..1000)
            .map(|i| {
                if i % 97 == 0 {
                    f32::NAN
                } else {
                    (i as f32 * 0.37).sin() * 20.0
                }
            })
            .collect();
        let mut a = Vec::new();
        weights(&logits, 20.0, 1.0 / 0.7, &mut a);
        let mut b = vec![0f32; a.len()];
        weights_generic(&logits, 20.0, 1.0 / 0.7, &mut b);
        assert_eq!(
            a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            b.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(a[97], 0.0);
    }

    #[test]
    fn silu_is_the_same_in_every_build_and_close_to_the_formula() {
        let gate: Vec<f32> = (0..100).map(|i| (i as f32 - 50.0) / 7.0).collect();
        let up: Vec<f32> = (0..100).map(|i| (i as f32 * 0.3).cos()).collect();
        let (mut a, mut b) = (gate.clone(), gate.clone());
        silu_mul(&mut a, &up);
        silu_mul_generic(&mut b, &up);
        assert_eq!(
            a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            b.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        for ((got, g), u) in a.iter().zip(&gate).zip(&up) {
            let want = f64::from(*g) / (1.0 + (-f64::from(*g)).exp()) * f64::from(*u);
            assert!((f64::from(*got) - want).abs() < 1e-5, "{got} vs {want}");
        }
    }
}
