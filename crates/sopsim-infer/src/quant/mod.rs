//! Quantised matrix products for the local model, written so that a result never
//! depends on how many rows were computed together.
//!
//! Weights stay in their GGUF block formats (read from the memory map). Activations are
//! quantised to int8 per group (32 values for the legacy formats, 256 for the k-quants,
//! as llama.cpp does), so each block's product is an exact integer. Every output is then
//! one fixed sequence of float operations: eight lanes (lane `j` holds the integer sum
//! over elements `4j..4j+4` of each 32-value chunk), each accumulating
//! `lanes × (weight scale × activation scale)` group by group with a fused multiply-add,
//! summed in a fixed order at the end, plus one scalar chain for the formats with a
//! minimum. That sequence is the same whether the row ran alone or among others, on any
//! thread, and in the scalar reference and the SIMD kernels alike — which is what makes
//! batched replies byte-identical to unbatched ones.
//!
//! - `formats`: the block layouts, dequantisation, and the reference products.
//! - `acts`: quantising activations.
//! - `x86`: the AVX2 / AVX-VNNI kernels, chosen at run time.

mod acts;
mod formats;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_512;

use std::ops::Range;
use std::sync::OnceLock;

pub use acts::Acts;
pub use formats::{dequantize, WeightType};

/// A weight matrix: `rows` output rows of `cols` inputs each, in GGUF block format.
#[derive(Debug, Clone, Copy)]
pub struct QView<'a> {
    pub ty: WeightType,
    pub rows: usize,
    pub cols: usize,
    pub data: &'a [u8],
}

impl<'a> QView<'a> {
    /// Checks that `data` holds exactly `rows × cols` values of type `ty`.
    pub fn new(
        ty: WeightType,
        rows: usize,
        cols: usize,
        data: &'a [u8],
    ) -> Result<Self, crate::error::WeightError> {
        use crate::error::WeightError;
        if cols == 0 || rows == 0 {
            return Err(WeightError::ZeroDimension);
        }
        if !cols.is_multiple_of(ty.group()) || !cols.is_multiple_of(32) {
            return Err(WeightError::Row {
                cols,
                ty: ty.name(),
                group: ty.group().max(32),
            });
        }
        let want = ty.row_bytes(cols).checked_mul(rows);
        if want != Some(data.len()) {
            return Err(WeightError::Size {
                bytes: data.len(),
                rows,
                cols,
                ty: ty.name(),
                need: want,
            });
        }
        Ok(Self {
            ty,
            rows,
            cols,
            data,
        })
    }

    pub fn row(&self, r: usize) -> &'a [u8] {
        let n = self.ty.row_bytes(self.cols);
        &self.data[r * n..(r + 1) * n]
    }

    /// Row `r` as floats.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        formats::dequantize(self.ty, self.row(r), out);
    }
}

/// Which kernels this CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernels {
    Scalar,
    Avx2,
    AvxVnni,
    Avx512,
}

impl Kernels {
    /// The best kernels this CPU supports (`SOPSIM_KERNELS=scalar|avx2|avx-vnni` lowers
    /// it; every choice gives the same results, only faster or slower).
    pub fn detect() -> Kernels {
        static CHOSEN: OnceLock<Kernels> = OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let supported = Self::supported();
            let wanted = std::env::var("SOPSIM_KERNELS").ok();
            supported
                .iter()
                .rev()
                .find(|k| wanted.as_deref().is_none_or(|w| w == k.name()))
                .or(supported.last())
                .copied()
                .unwrap_or(Kernels::Scalar)
        })
    }

    /// Every kernel set this CPU can run, slowest first.
    pub fn supported() -> Vec<Kernels> {
        let mut out = vec![Kernels::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if x86::has_avx2() {
                out.push(Kernels::Avx2);
                if x86::has_vnni() {
                    out.push(Kernels::AvxVnni);
                }
                if x86_512::supported() {
                    out.push(Kernels::Avx512);
                }
            }
        }
        out
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernels::Scalar => "scalar",
            Kernels::Avx2 => "avx2",
            Kernels::AvxVnni => "avx-vnni",
            Kernels::Avx512 => "avx512",
        }
    }
}

/// `out[t * rows.len() + (r - rows.start)] = Σ_k W[r][k] · x[t][k]` for the rows in
/// `rows` and every token `t` of `acts`. `acts` must be in `w.ty.act_format()`.
pub fn matmul_rows(
    kernels: Kernels,
    w: QView<'_>,
    acts: &Acts,
    rows: Range<usize>,
    out: &mut [f32],
) {
    debug_assert_eq!(acts.format(), w.ty.act_format());
    debug_assert_eq!(acts.cols(), w.cols);
    debug_assert_eq!(out.len(), rows.len() * acts.tokens());
    match kernels {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernels::Avx512` is only chosen when `x86_512::supported()` holds.
        Kernels::Avx512 if x86_512::handles(w.ty) => unsafe {
            x86_512::matmul_rows(w, acts, rows, out)
        },
        #[cfg(target_arch = "x86_64")]
        Kernels::Avx2 | Kernels::AvxVnni | Kernels::Avx512 => {
            x86::matmul_rows(kernels, w, acts, rows, out)
        }
        _ => {
            let len = rows.len();
            for (i, r) in rows.enumerate() {
                let row = w.row(r);
                for tok in 0..acts.tokens() {
                    out[tok * len + i] = formats::dot_reference(w.ty, row, acts, tok);
                }
            }
        }
    }
}

/// The fixed order in which the eight lanes are summed (the order the SIMD reduction
/// uses: halves, then quarters, then pairs).
#[inline]
pub fn sum_lanes(a: &[f32; 8]) -> f32 {
    let h = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
    let q = [h[0] + h[2], h[1] + h[3]];
    q[0] + q[1]
}

#[cfg(test)]
mod tests;
