//! Quantised matrix products for the local model, written so that a result never
//! depends on how many rows or tokens were computed together.
//!
//! Weights are repacked once, at load, into panels of sixteen output rows
//! ([`Packed`]), keeping their file's bits per value. Activations are quantised to
//! int8 with a scale per 32 values, as llama.cpp does. Each 32-value block's product
//! is then an exact integer, and every output is one fixed chain of float operations
//! over the blocks (see [`dot_reference`]): the same whether its token ran alone or
//! among others, on any thread, with any of the kernels — which is what makes batched
//! replies byte-identical to unbatched ones.
//!
//! - `formats`: the block layouts, dequantisation, and the reference product.
//! - `acts`: quantising activations.
//! - `memory`: one huge-page allocation holding a model's packed weights.
//! - `packed`: the panel layout, repacking, and the portable kernel.
//! - `x86_512`: AVX-512 VNNI (one row per lane, a few tokens at a time).
//! - `amx`: Intel AMX tiles (sixteen tokens × sixteen rows per instruction) for
//!   prompts and batches.
//! - `x86`: AVX2, with AVX-VNNI where the CPU has it.

mod acts;
#[cfg(target_arch = "x86_64")]
mod amx;
mod formats;
mod memory;
mod packed;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_512;

use std::sync::OnceLock;

pub use acts::{ActFormat, Acts};
pub use formats::{dequantize, dot_reference, WeightType};
pub use memory::WeightMemory;
pub use packed::{Packed, PANEL};

use packed::Dest;

/// A weight matrix as the file stores it: `rows` output rows of `cols` inputs.
#[derive(Debug, Clone, Copy)]
pub struct QView<'a> {
    /// The format the values are stored in.
    pub ty: WeightType,
    /// Output rows.
    pub rows: usize,
    /// Inputs per row.
    pub cols: usize,
    /// The stored bytes, row after row.
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
        packed::check_size(ty, rows, cols, data.len())?;
        Ok(Self {
            ty,
            rows,
            cols,
            data,
        })
    }

    /// Row `r`'s bytes as the file stores them.
    pub fn row(&self, r: usize) -> &'a [u8] {
        let n = self.ty.row_bytes(self.cols);
        &self.data[r * n..(r + 1) * n]
    }

    /// Row `r` as floats.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        formats::dequantize(self.ty, self.row(r), out);
    }

    /// The matrix in the kernels' layout.
    pub fn pack(&self) -> Result<Packed, crate::error::WeightError> {
        Packed::new(self.ty, self.rows, self.cols, self.data)
    }
}

/// Which kernels this CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kernels {
    /// Portable Rust.
    Scalar,
    /// AVX2 with FMA and F16C.
    Avx2,
    /// AVX2 with AVX-VNNI's integer dot products.
    AvxVnni,
    /// AVX-512 with VNNI.
    Avx512,
    /// AVX-512 for a few tokens, AMX tiles for more.
    Amx,
}

static CHOSEN: OnceLock<Kernels> = OnceLock::new();

impl Kernels {
    /// The kernels model work uses: the best this CPU supports, or the ones the program
    /// chose with [`Kernels::choose`] before any model work (every choice gives the same
    /// results, only faster or slower).
    pub fn detect() -> Kernels {
        *CHOSEN.get_or_init(|| Self::supported().last().copied().unwrap_or(Kernels::Scalar))
    }

    /// Chooses the kernels by name (`scalar`, `avx2`, `avx-vnni`, `avx512`, `amx`) before
    /// any model work; a set this CPU lacks leaves the best it has. `false` once model
    /// work has started. The program's edge decides (the command line reads
    /// `SOPSIM_KERNELS`).
    pub fn choose(name: &str) -> bool {
        let supported = Self::supported();
        let pick = supported
            .iter()
            .rev()
            .find(|k| k.name() == name)
            .or(supported.last())
            .copied()
            .unwrap_or(Kernels::Scalar);
        CHOSEN.set(pick).is_ok()
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
                    if amx::supported() {
                        out.push(Kernels::Amx);
                    }
                }
            }
        }
        out
    }

    /// The kernel set's name, as `choose` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Kernels::Scalar => "scalar",
            Kernels::Avx2 => "avx2",
            Kernels::AvxVnni => "avx-vnni",
            Kernels::Avx512 => "avx512",
            Kernels::Amx => "amx",
        }
    }
}

/// Products smaller than this many multiply-adds run on the caller's thread. Small:
/// the compute team starts a piece in well under a microsecond, and a decode step's
/// key and value products (128 × 896 for qwen05) are worth splitting.
const SPREAD_ABOVE: usize = 1 << 15;

/// `out[t · rows + r] = Σ_k W[r][k] · x[t][k]` for every row `r` of `w` and token `t`
/// of `acts` (which must be in `w.ty().act_format()`), spread over the compute
/// threads by panels.
pub fn matmul(kernels: Kernels, w: &Packed, acts: &Acts, out: &mut [f32]) {
    assert_eq!(acts.format(), w.ty().act_format());
    assert_eq!(acts.cols(), w.cols());
    assert_eq!(out.len(), w.rows() * acts.tokens());
    let dest = Dest {
        ptr: out.as_mut_ptr(),
        stride: w.rows(),
        first: 0,
        rows: w.rows(),
    };
    let panels = w.panels();
    let pieces = if w.rows() * w.cols() * acts.tokens() < SPREAD_ABOVE {
        1
    } else {
        (crate::compute::threads() * 4).min(panels)
    };
    let per = panels.div_ceil(pieces);
    let tasks: Vec<_> = (0..panels)
        .step_by(per)
        .map(|start| {
            let range = start..(start + per).min(panels);
            // SAFETY: each task writes the rows of its own panels, and `out` (of the
            // asserted size) stays borrowed until every task has finished.
            move || unsafe { run(kernels, w, acts, range, dest) }
        })
        .collect();
    crate::compute::run_all(tasks);
}

/// The sixteen rows of panel `p` for every token: `out[t · 16 + n]` is row
/// `p · 16 + n` (rows past the matrix's end are left as they are). On the caller's
/// thread.
pub fn matmul_panel(kernels: Kernels, w: &Packed, acts: &Acts, p: usize, out: &mut [f32]) {
    assert_eq!(acts.format(), w.ty().act_format());
    assert_eq!(acts.cols(), w.cols());
    assert!(p < w.panels());
    assert_eq!(out.len(), PANEL * acts.tokens());
    let dest = Dest {
        ptr: out.as_mut_ptr(),
        stride: PANEL,
        first: p * PANEL,
        rows: w.rows(),
    };
    // SAFETY: `out` holds the panel's rows for every token.
    unsafe { run(kernels, w, acts, p..p + 1, dest) }
}

/// # Safety
/// `dest` must be valid for the panels in `panels`, and no other piece may write them.
unsafe fn run(
    kernels: Kernels,
    w: &Packed,
    acts: &Acts,
    panels: std::ops::Range<usize>,
    dest: Dest,
) {
    if w.ty().is_float() {
        return packed::matmul_float(w, acts, panels, dest);
    }
    match kernels {
        #[cfg(target_arch = "x86_64")]
        Kernels::Amx if acts.tokens() >= amx::MIN_TOKENS => amx::matmul(w, acts, panels, dest),
        #[cfg(target_arch = "x86_64")]
        Kernels::Amx | Kernels::Avx512 => x86_512::matmul(w, acts, panels, dest),
        #[cfg(target_arch = "x86_64")]
        Kernels::Avx2 | Kernels::AvxVnni => x86::matmul(kernels, w, acts, panels, dest),
        _ => packed::matmul_portable(w, acts, panels, dest),
    }
}

/// The fixed order in which eight lanes are summed (the order a SIMD reduction uses:
/// halves, then quarters, then pairs).
#[inline]
pub fn sum_lanes(a: &[f32; 8]) -> f32 {
    let h = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
    let q = [h[0] + h[2], h[1] + h[3]];
    q[0] + q[1]
}

#[cfg(test)]
mod tests;
