//! Intel AMX kernels: one `tdpbsud` multiplies sixteen tokens' activations (signed
//! bytes, read in place with the row stride) by a tile of sixteen rows × 32 values
//! (unsigned bytes, the panel layout as it is), giving every block's exact integer
//! product for 256 outputs at once. The products are stored and each token's row of
//! them then takes the reference's float steps with AVX-512, exactly as in
//! [`super::x86_512`], so the results are the same bits.
//!
//! AMX needs the operating system's leave (Linux: `arch_prctl(ARCH_REQ_XCOMP_PERM)`),
//! asked once; the tile configuration is loaded at the start of every piece of work
//! and released at its end, on whichever thread runs it. Rust has no stable AMX
//! intrinsics, so the instructions are written as inline assembly.

use std::arch::asm;
use std::arch::x86_64::*;
use std::ops::Range;
use std::sync::OnceLock;

use super::acts::{Acts, TOKEN_TILE};
use super::formats::{Bits, WeightType};
use super::packed::{Dest, Packed, TileLayout, TILE_VALUES};
use super::x86_512::{by_format, finish, scales, step, subs, widen, Format};

/// Fewer tokens than this go to the AVX-512 kernel, which is faster for them.
pub const MIN_TOKENS: usize = 4;

/// Whether the CPU has AMX-INT8 and the operating system lets this process use it.
pub fn supported() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let leaf = __cpuid_count(7, 0);
        let tile = leaf.edx & (1 << 24) != 0;
        let int8 = leaf.edx & (1 << 25) != 0;
        tile && int8 && permitted() && super::x86_512::supported()
    })
}

#[cfg(target_os = "linux")]
fn permitted() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: a plain system call; it only grants (or refuses) the tile state.
    unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn permitted() -> bool {
    false
}

/// The tile registers: tmm0 products (16 tokens × 16 rows), tmm1 activations (16 × 32
/// bytes), tmm2 weights (8 × 64 bytes); for Q6_K's halves, tmm3/tmm4 the activations'
/// halves (16 × 16 bytes), tmm5/tmm6 the weights' halves (4 × 64) and tmm7 the second
/// half's products.
#[repr(C, align(64))]
struct Config([u8; 64]);

impl Config {
    fn new() -> Self {
        let mut c = [0u8; 64];
        c[0] = 1; // palette
        let tiles: [(u16, u8); 8] = [
            (64, 16),
            (32, 16),
            (64, 8),
            (16, 16),
            (16, 16),
            (64, 4),
            (64, 4),
            (64, 16),
        ];
        for (i, (bytes, rows)) in tiles.iter().enumerate() {
            c[16 + 2 * i..18 + 2 * i].copy_from_slice(&bytes.to_le_bytes());
            c[48 + i] = *rows;
        }
        Self(c)
    }
}

#[repr(C, align(64))]
struct Products([i32; 256]);

#[repr(C, align(64))]
struct Widened([u8; TILE_VALUES]);

/// # Safety
/// [`supported`] must hold, and `dest` must be valid for `panels` (see [`Dest`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
pub unsafe fn matmul(w: &Packed, acts: &Acts, panels: Range<usize>, dest: Dest) {
    let Some(layout) = w.layout() else { return };
    let config = Config::new();
    asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly));
    by_format!(w.ty(), panels_of, w, &layout, acts, panels, dest);
    asm!("tilerelease", options(nostack, nomem));
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
    let tiles = tokens.div_ceil(TOKEN_TILE);
    // With several tiles of tokens, a panel's tiles are widened once, into here.
    let mut panel: Vec<Widened> = Vec::new();
    if tiles > 1 {
        panel.resize_with(w.blocks(), || Widened([0; TILE_VALUES]));
    }
    for p in panels {
        if tiles > 1 {
            for (b, out) in panel.iter_mut().enumerate() {
                store_widened::<F>(w.tile(layout, p, b).as_ptr(), out);
            }
        }
        for tt in 0..tiles {
            token_tile::<F>(w, layout, acts, p, tt, &panel, dest);
        }
    }
}

#[inline(always)]
unsafe fn store_widened<F: Format>(tile: *const u8, out: &mut Widened) {
    let v = widen::<F>(tile);
    for (c, r) in v.iter().enumerate() {
        _mm512_store_si512(out.0.as_mut_ptr().add(64 * c) as *mut _, *r);
    }
}

#[inline(always)]
unsafe fn token_tile<F: Format>(
    w: &Packed,
    layout: &TileLayout,
    acts: &Acts,
    p: usize,
    tt: usize,
    panel: &[Widened],
    dest: Dest,
) {
    let t0 = tt * TOKEN_TILE;
    let valid = (acts.tokens() - t0).min(TOKEN_TILE);
    let cols = acts.cols();
    let mut acc = [_mm512_setzero_ps(); TOKEN_TILE];
    let mut accm = [_mm512_setzero_ps(); TOKEN_TILE];
    let mut lo = Products([0; 256]);
    let mut hi = Products([0; 256]);
    let mut own = Widened([0; TILE_VALUES]);
    let x0 = acts.all_qs().as_ptr().add(t0 * cols);
    for b in 0..w.blocks() {
        let tile = w.tile(layout, p, b).as_ptr();
        let weights: *const u8 = if let Some(wide) = panel.get(b) {
            wide.0.as_ptr()
        } else if F::BITS == Bits::Eight {
            tile
        } else {
            store_widened::<F>(tile, &mut own);
            own.0.as_ptr()
        };
        let x = x0.add(b * 32);
        if F::HALVES {
            asm!(
                "tileloadd tmm3, [{x} + {stride} * 1]",
                "tileloadd tmm4, [{xh} + {stride} * 1]",
                "tileloadd tmm5, [{w} + {sixty_four} * 1]",
                "tileloadd tmm6, [{wh} + {sixty_four} * 1]",
                "tilezero tmm0",
                "tilezero tmm7",
                "tdpbsud tmm0, tmm3, tmm5",
                "tdpbsud tmm7, tmm4, tmm6",
                "tilestored [{lo} + {sixty_four} * 1], tmm0",
                "tilestored [{hi} + {sixty_four} * 1], tmm7",
                x = in(reg) x,
                xh = in(reg) x.add(16),
                stride = in(reg) cols,
                w = in(reg) weights,
                wh = in(reg) weights.add(256),
                sixty_four = in(reg) 64usize,
                lo = in(reg) lo.0.as_mut_ptr(),
                hi = in(reg) hi.0.as_mut_ptr(),
                options(nostack),
            );
        } else {
            asm!(
                "tileloadd tmm1, [{x} + {stride} * 1]",
                "tileloadd tmm2, [{w} + {sixty_four} * 1]",
                "tilezero tmm0",
                "tdpbsud tmm0, tmm1, tmm2",
                "tilestored [{lo} + {sixty_four} * 1], tmm0",
                x = in(reg) x,
                stride = in(reg) cols,
                w = in(reg) weights,
                sixty_four = in(reg) 64usize,
                lo = in(reg) lo.0.as_mut_ptr(),
                options(nostack),
            );
        }
        let s = scales(tile.add(layout.scales_at), F::SCALE_F32);
        let m = if F::MIN {
            scales(tile.add(layout.mins_at), F::SCALE_F32)
        } else {
            _mm512_setzero_ps()
        };
        let sub = if F::HALVES {
            subs(tile.add(layout.subs_at))
        } else {
            [_mm512_setzero_si512(); 2]
        };
        for i in 0..valid {
            let row = |buf: &Products| _mm512_load_si512(buf.0.as_ptr().add(16 * i) as *const _);
            let (l, h) = if F::HALVES {
                (row(&lo), row(&hi))
            } else {
                (row(&lo), _mm512_setzero_si512())
            };
            step::<F>(l, h, acts, t0 + i, b, s, m, &sub, &mut acc[i], &mut accm[i]);
        }
    }
    for i in 0..valid {
        finish(dest, t0 + i, p, acc[i], accm[i]);
    }
}
