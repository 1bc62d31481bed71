//! Intel AMX kernels: one `tdpbssd` multiplies sixteen tokens' activations (signed
//! bytes, read in place with the row stride) by a tile of sixteen rows × 32 values
//! (the panel layout widened to signed bytes), giving every block's exact integer
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
use super::formats::WeightType;
use super::packed::{Dest, Packed, TileLayout, PANEL, TILE_VALUES};
use super::x86_512::{by_format, finish, scales, subs, widen, Format};

/// Fewer tokens than this go to the AVX-512 kernel, which is faster for them: a tile's
/// products cost about the same whether it multiplies 1 or 16 tokens (measured with
/// `kernel_speed`: AMX overtakes AVX-512 VNNI at about 12 tokens).
pub(super) const MIN_TOKENS: usize = 12;

/// Whether the CPU has AMX-INT8 and the operating system lets this process use it.
pub(super) fn supported() -> bool {
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
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
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

/// A tile's sixteen rows' scales and minimums as floats, made once per panel rather
/// than once per token.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct TileFloats {
    s: [f32; PANEL],
    m: [f32; PANEL],
}

/// A panel's tiles made ready for the token tiles: widened integers and float scales.
struct Panel<'a> {
    ints: &'a [Widened],
    floats: &'a [TileFloats],
}

/// # Safety
/// [`supported`] must hold, and `dest` must be valid for `panels` (see [`Dest`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn matmul(w: &Packed, acts: &Acts, panels: Range<usize>, dest: Dest) {
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
    // A panel's tiles are widened once, all of them before the first is multiplied:
    // a tile load right after the stores that wrote its bytes waits for them (about
    // as long as the product itself), one long after does not.
    let mut panel: Vec<Widened> = Vec::new();
    panel.resize_with(w.blocks(), || Widened([0; TILE_VALUES]));
    let zero = TileFloats {
        s: [0.0; PANEL],
        m: [0.0; PANEL],
    };
    let mut floats = vec![zero; w.blocks()];
    for p in panels {
        for (b, (out, f)) in panel.iter_mut().zip(floats.iter_mut()).enumerate() {
            let tile = w.tile(layout, p, b).as_ptr();
            let header = w.header(layout, p, b).as_ptr();
            widen_signed::<F>(tile, out);
            let s = scales::<F, false>(tile.add(layout.scales_at), header);
            _mm512_store_ps(f.s.as_mut_ptr(), s);
            if F::MIN {
                let m = scales::<F, true>(tile.add(layout.mins_at), header);
                _mm512_store_ps(f.m.as_mut_ptr(), m);
            }
        }
        let panel = Panel {
            ints: &panel,
            floats: &floats,
        };
        for tt in 0..tiles {
            token_tile::<F>(w, layout, acts, p, tt, &panel, dest);
        }
    }
}

/// A tile's integers as signed bytes, their format's offset taken off — so that the
/// tiles' products are the blocks' exact integers with nothing to correct.
#[inline(always)]
unsafe fn widen_signed<F: Format>(tile: *const u8, out: &mut Widened) {
    let v = widen::<F>(tile);
    let offset = _mm512_set1_epi8(F::OFFSET as i8);
    for (c, r) in v.iter().enumerate() {
        // Q8_0's offset is 128: wrapping subtraction flips the sign bit, as wanted.
        let r = if F::OFFSET != 0 {
            _mm512_sub_epi8(*r, offset)
        } else {
            *r
        };
        _mm512_store_si512(out.0.as_mut_ptr().add(64 * c) as *mut _, r);
    }
}

/// The products of block `b` (widened in `panel`) for the token tile starting at
/// `x0`, stored to `lo` (and `hi`, Q6_K's second half).
#[inline(always)]
unsafe fn products<F: Format>(
    b: usize,
    x0: *const i8,
    cols: usize,
    panel: &[Widened],
    lo: &mut Products,
    hi: &mut Products,
) {
    let weights = panel[b].0.as_ptr();
    let x = x0.add(b * 32);
    if F::HALVES {
        asm!(
            "tileloadd tmm3, [{x} + {stride} * 1]",
            "tileloadd tmm4, [{xh} + {stride} * 1]",
            "tileloadd tmm5, [{w} + {sixty_four} * 1]",
            "tileloadd tmm6, [{wh} + {sixty_four} * 1]",
            "tilezero tmm0",
            "tilezero tmm7",
            "tdpbssd tmm0, tmm3, tmm5",
            "tdpbssd tmm7, tmm4, tmm6",
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
            "tdpbssd tmm0, tmm1, tmm2",
            "tilestored [{lo} + {sixty_four} * 1], tmm0",
            x = in(reg) x,
            stride = in(reg) cols,
            w = in(reg) weights,
            sixty_four = in(reg) 64usize,
            lo = in(reg) lo.0.as_mut_ptr(),
            options(nostack),
        );
    }
}

#[inline(always)]
unsafe fn token_tile<F: Format>(
    w: &Packed,
    layout: &TileLayout,
    acts: &Acts,
    p: usize,
    tt: usize,
    panel: &Panel<'_>,
    dest: Dest,
) {
    let valid = (acts.tokens() - tt * TOKEN_TILE).min(TOKEN_TILE);
    match valid.div_ceil(4) {
        1 => rows::<F, 4>(w, layout, acts, p, tt, panel, dest),
        2 => rows::<F, 8>(w, layout, acts, p, tt, panel, dest),
        3 => rows::<F, 12>(w, layout, acts, p, tt, panel, dest),
        _ => rows::<F, 16>(w, layout, acts, p, tt, panel, dest),
    }
}

/// A token tile whose first `R` rows are computed (the rest are padding).
#[inline(always)]
unsafe fn rows<F: Format, const R: usize>(
    w: &Packed,
    layout: &TileLayout,
    acts: &Acts,
    p: usize,
    tt: usize,
    panel: &Panel<'_>,
    dest: Dest,
) {
    let t0 = tt * TOKEN_TILE;
    let valid = (acts.tokens() - t0).min(R);
    let cols = acts.cols();
    let blocks = w.blocks();
    let mut acc = [_mm512_setzero_ps(); R];
    let (mut lo, mut hi) = (Products([0; 256]), Products([0; 256]));
    let x0 = acts.all_qs().as_ptr().add(t0 * cols);
    let dx0 = acts.all_scales().as_ptr().add(t0 * blocks);
    // The next panel's tiles are fetched while this one is multiplied (once, with the
    // first token tile), so that memory and arithmetic overlap.
    let panel_bytes = layout.panel_bytes(blocks);
    let next = w.panel(layout, p).as_ptr().wrapping_add(panel_bytes);
    let per_block = panel_bytes.div_ceil(blocks).next_multiple_of(64);
    for b in 0..blocks {
        if tt == 0 {
            let lines = b * per_block..((b + 1) * per_block).min(panel_bytes);
            for line in lines.step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(line) as *const i8);
            }
        }
        products::<F>(b, x0, cols, panel.ints, &mut lo, &mut hi);
        let s = _mm512_load_ps(panel.floats[b].s.as_ptr());
        let sub = if F::HALVES {
            subs(w.tile(layout, p, b).as_ptr().add(layout.subs_at))
        } else {
            [_mm512_setzero_si512(); 2]
        };
        for (i, acc) in acc.iter_mut().enumerate() {
            let row = |buf: &Products| _mm512_load_si512(buf.0.as_ptr().add(16 * i) as *const _);
            let isum = if F::HALVES {
                _mm512_add_epi32(
                    _mm512_mullo_epi32(sub[0], row(&lo)),
                    _mm512_mullo_epi32(sub[1], row(&hi)),
                )
            } else {
                row(&lo)
            };
            let dx = _mm512_set1_ps(*dx0.add(i * blocks + b));
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(s, dx), *acc);
        }
    }
    for (i, acc) in acc.iter().enumerate().take(valid) {
        let t = t0 + i;
        let mut accm = _mm512_setzero_ps();
        if F::MIN {
            // The minimums' chain, in its own pass so that it needs no registers above.
            for b in 0..blocks {
                let m = _mm512_load_ps(panel.floats.get_unchecked(b).m.as_ptr());
                let dx = _mm512_set1_ps(*acts.scales(t).get_unchecked(b));
                let sum = *acts.sums(t).get_unchecked(b) as f32;
                accm = _mm512_fmadd_ps(_mm512_set1_ps(sum), _mm512_mul_ps(m, dx), accm);
            }
        }
        finish(dest, t, p, *acc, accm);
    }
}
