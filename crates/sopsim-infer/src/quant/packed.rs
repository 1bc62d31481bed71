//! Weight matrices repacked for the kernels, and the portable kernel.
//!
//! A quantised matrix is cut into panels of [`PANEL`] output rows, and each panel into
//! tiles of 32 columns: 512 values whose integers are stored in the order the int8
//! dot-product instructions consume them — value `k` of row `n` at position
//! `(k / 4)·64 + n·4 + k % 4` — so that one 64-byte register holds four consecutive
//! values of all sixteen rows (for AVX-512 VNNI, one row per lane) and a tile is
//! exactly an AMX `B` operand. The integers keep their file's width (4, 5, 6 or 8
//! bits, see [`Bits`]) and are widened to bytes in registers. Each tile then holds the
//! sixteen rows' scales, minimums and sub-scales of its block, kept as the file keeps
//! them: the K formats' super-block f16 values go once per eight tiles, in a group
//! header (see [`TileLayout`]), so that a pass reads about as many bytes as the file
//! holds. Tiles are stored panel by panel, block by block, so a kernel streams the
//! weights once, front to back.
//!
//! Float matrices are kept as their file's rows.

use std::ops::Range;

use super::acts::Acts;
use super::formats::{self, block, Bits, Ints, Scale, WeightType};
use super::memory::{Part, WeightMemory};
use crate::error::WeightError;

/// Output rows per panel.
pub const PANEL: usize = 16;

/// Values per tile: [`PANEL`] rows × 32 columns.
pub(super) const TILE_VALUES: usize = PANEL * 32;

impl Bits {
    /// Bytes of a tile's integers.
    pub(super) fn bytes(self) -> usize {
        match self {
            Bits::Four => 256,
            Bits::Five => 320,
            Bits::Six => 384,
            Bits::Eight => 512,
        }
    }
}

/// A weight matrix of `rows` outputs of `cols` inputs, in the kernels' layout.
pub struct Packed {
    ty: WeightType,
    rows: usize,
    cols: usize,
    /// Quantised formats: the tiles. Float formats: the file's rows.
    data: Part,
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("ty", &self.ty)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish()
    }
}

/// Where each part of a tile starts, for one format, and how tiles are grouped.
///
/// The K formats share one f16 per row across a 256-value super-block, as their files
/// do: a panel's tiles then come in groups of eight, each group led by a header with
/// those f16 values of its sixteen rows (the scale's, then the minimum's). Other
/// formats have groups of one tile and no header.
#[derive(Debug, Clone, Copy)]
pub(super) struct TileLayout {
    pub ints: Ints,
    pub scales_at: usize,
    pub mins_at: usize,
    pub subs_at: usize,
    /// Bytes of one tile.
    pub bytes: usize,
    /// Bytes of a group's header; the minimums' f16 values start at `PANEL · 2`.
    pub header: usize,
}

/// Where the minimums' f16 values start in a group's header.
pub(super) const HEADER_MINS_AT: usize = 2 * PANEL;

impl TileLayout {
    #[inline(always)]
    pub(super) fn of(ints: Ints) -> Self {
        let scales_at = ints.bits.bytes();
        let mins_at = scales_at + PANEL * ints.scale.bytes();
        let subs_at = mins_at + ints.min.map_or(0, |m| PANEL * m.bytes());
        let bytes = subs_at + if ints.halves { 2 * PANEL } else { 0 };
        let header = PANEL * (ints.scale.header_bytes() + ints.min.map_or(0, |m| m.header_bytes()));
        Self {
            ints,
            scales_at,
            mins_at,
            subs_at,
            bytes,
            header,
        }
    }

    /// Bytes of a group: its header and its tiles.
    pub(super) fn group_bytes(&self) -> usize {
        self.header + self.ints.group_blocks * self.bytes
    }

    /// Bytes of a panel of `blocks` tiles.
    pub(super) fn panel_bytes(&self, blocks: usize) -> usize {
        blocks / self.ints.group_blocks * self.group_bytes()
    }
}

impl Packed {
    /// Repacks `rows × cols` values of type `ty` stored as the file stores them, into
    /// memory of its own.
    pub fn new(ty: WeightType, rows: usize, cols: usize, data: &[u8]) -> Result<Self, WeightError> {
        let mut memory = WeightMemory::for_parts([Self::size(ty, rows, cols)?])?;
        Self::new_in(&mut memory, ty, rows, cols, data)
    }

    /// The bytes [`Packed::new`] needs for a matrix.
    pub fn size(ty: WeightType, rows: usize, cols: usize) -> Result<usize, WeightError> {
        let too_big = WeightError::NoMemory { bytes: usize::MAX };
        match ty.ints() {
            None => ty.row_bytes(cols).checked_mul(rows).ok_or(too_big),
            Some(ints) => rows
                .div_ceil(PANEL)
                .checked_mul(TileLayout::of(ints).panel_bytes(cols / 32))
                .ok_or(too_big),
        }
    }

    /// [`Packed::new`], in the next part of `memory` (which must have room for it).
    pub fn new_in(
        memory: &mut WeightMemory,
        ty: WeightType,
        rows: usize,
        cols: usize,
        data: &[u8],
    ) -> Result<Self, WeightError> {
        check_size(ty, rows, cols, data.len())?;
        let total = Self::size(ty, rows, cols)?;
        let no_room = WeightError::NoMemory { bytes: total };
        let Some(ints) = ty.ints() else {
            let part = memory
                .take(total, |bytes| bytes.copy_from_slice(data))
                .ok_or(no_room)?;
            return Ok(Self {
                ty,
                rows,
                cols,
                data: part,
            });
        };
        let layout = TileLayout::of(ints);
        let panels = rows.div_ceil(PANEL);
        let panel_bytes = layout.panel_bytes(cols / 32);
        let row_bytes = ty.row_bytes(cols);
        let per = panels.div_ceil(crate::compute::threads() * 4).max(1);
        let part = memory
            .take(total, |packed| {
                let tasks = packed
                    .chunks_mut(per * panel_bytes)
                    .enumerate()
                    .map(|(i, chunk)| {
                        move || {
                            for (k, panel) in chunk.chunks_exact_mut(panel_bytes).enumerate() {
                                let p = i * per + k;
                                let native = |n: usize| {
                                    let r = p * PANEL + n;
                                    (r < rows).then(|| &data[r * row_bytes..(r + 1) * row_bytes])
                                };
                                let rows: [Option<&[u8]>; PANEL] = std::array::from_fn(native);
                                pack_panel_of(ty, &rows, panel);
                            }
                        }
                    })
                    .collect();
                crate::compute::run_all(tasks);
            })
            .ok_or(no_room)?;
        Ok(Self {
            ty,
            rows,
            cols,
            data: part,
        })
    }

    /// The format the values are stored in.
    pub fn ty(&self) -> WeightType {
        self.ty
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Inputs per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Panels of `PANEL` output rows, the last possibly partly filled.
    pub fn panels(&self) -> usize {
        self.rows.div_ceil(PANEL)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.bytes().len()
    }

    pub(super) fn layout(&self) -> Option<TileLayout> {
        self.ty.ints().map(TileLayout::of)
    }

    pub(super) fn blocks(&self) -> usize {
        self.cols / 32
    }

    /// Panel `p` (quantised formats): its groups of tiles, front to back.
    pub(super) fn panel(&self, layout: &TileLayout, p: usize) -> &[u8] {
        let n = layout.panel_bytes(self.blocks());
        &self.data.bytes()[p * n..(p + 1) * n]
    }

    /// Where the group holding tile `b` of panel `p` starts (quantised formats).
    fn group_at(&self, layout: &TileLayout, p: usize, b: usize) -> usize {
        p * layout.panel_bytes(self.blocks()) + b / layout.ints.group_blocks * layout.group_bytes()
    }

    /// Tile `b` of panel `p` (quantised formats).
    pub(super) fn tile(&self, layout: &TileLayout, p: usize, b: usize) -> &[u8] {
        let at = self.group_at(layout, p, b)
            + layout.header
            + b % layout.ints.group_blocks * layout.bytes;
        &self.data.bytes()[at..at + layout.bytes]
    }

    /// The header of the group holding tile `b` of panel `p` (empty for formats
    /// without one).
    pub(super) fn header(&self, layout: &TileLayout, p: usize, b: usize) -> &[u8] {
        let at = self.group_at(layout, p, b);
        &self.data.bytes()[at..at + layout.header]
    }

    /// Row `r` as the file stores it (float formats).
    pub(super) fn float_row(&self, r: usize) -> &[u8] {
        let n = self.ty.row_bytes(self.cols);
        &self.data.bytes()[r * n..(r + 1) * n]
    }
}

/// Checks that `len` bytes hold exactly `rows × cols` values of type `ty`.
pub(super) fn check_size(
    ty: WeightType,
    rows: usize,
    cols: usize,
    len: usize,
) -> Result<(), WeightError> {
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
    if want != Some(len) {
        return Err(WeightError::Size {
            bytes: len,
            rows,
            cols,
            ty: ty.name(),
            need: want,
        });
    }
    Ok(())
}

/// Position of value `k` (of 32) of row `n` within a tile.
#[inline(always)]
pub(super) fn position(n: usize, k: usize) -> usize {
    (k / 4) * 64 + n * 4 + k % 4
}

/// [`pack_panel`] compiled for each format on its own, so that what depends on the
/// format is settled once per matrix rather than once per value (packing is most of
/// a model's loading).
fn pack_panel_of(ty: WeightType, rows: &[Option<&[u8]>; PANEL], panel: &mut [u8]) {
    macro_rules! each {
        ($($t:ident),*) => {
            match ty {
                $(WeightType::$t => pack_panel(WeightType::$t, rows, panel),)*
                _ => pack_panel(ty, rows, panel),
            }
        };
    }
    each!(Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4K, Q5K, Q6K)
}

/// Writes the panel whose rows are `rows` (`None` past the matrix's end): each group's
/// header, then its tiles (nothing for a float format).
#[inline(always)]
fn pack_panel(ty: WeightType, rows: &[Option<&[u8]>; PANEL], panel: &mut [u8]) {
    let Some(ints) = ty.ints() else { return };
    let layout = &TileLayout::of(ints);
    for (g, group) in panel.chunks_exact_mut(layout.group_bytes()).enumerate() {
        let (header, tiles) = group.split_at_mut(layout.header);
        let first = g * layout.ints.group_blocks;
        pack_header(ty, layout, rows, first, header);
        for (i, tile) in tiles.chunks_exact_mut(layout.bytes).enumerate() {
            pack_tile(ty, layout, rows, first + i, tile);
        }
    }
}

/// Writes tile `b` of the panel whose rows are `rows` (`None` past the matrix's end).
#[inline(always)]
fn pack_tile(
    ty: WeightType,
    layout: &TileLayout,
    rows: &[Option<&[u8]>; PANEL],
    b: usize,
    tile: &mut [u8],
) {
    let ints = layout.ints;
    let mut values = [0u8; TILE_VALUES];
    for (n, row) in rows.iter().enumerate() {
        let Some(row) = row else { continue };
        let blk = block(ty, row, b);
        for (k, u) in blk.u.iter().enumerate() {
            values[position(n, k)] = *u;
        }
        let sup = formats::super_scales(ty, row, b);
        put_scale(
            ints.scale,
            &mut tile[layout.scales_at..],
            n,
            blk.scale,
            sup.sc,
        );
        if let Some(m) = ints.min {
            put_scale(m, &mut tile[layout.mins_at..], n, blk.min, sup.m);
        }
        if ints.halves {
            tile[layout.subs_at + n] = blk.sub[0] as u8;
            tile[layout.subs_at + PANEL + n] = blk.sub[1] as u8;
        }
    }
    let q = &mut tile[..ints.bits.bytes()];
    match ints.bits {
        Bits::Eight => q.copy_from_slice(&values),
        _ => {
            for j in 0..256 {
                q[j] = (values[j] & 0x0F) | ((values[j + 256] & 0x0F) << 4);
            }
            let high = &mut q[256..];
            match ints.bits {
                Bits::Five => {
                    for (i, v) in values.iter().enumerate() {
                        high[i / 8] |= ((v >> 4) & 1) << (i % 8);
                    }
                }
                Bits::Six => {
                    for (i, h) in high.iter_mut().enumerate() {
                        *h = (0..4).fold(0, |acc, k| {
                            acc | (((values[i + 128 * k] >> 4) & 3) << (2 * k))
                        });
                    }
                }
                _ => {}
            }
        }
    }
}

/// Writes the header of the group whose first tile is `b`: each row's super-block f16
/// values (nothing for formats without a header).
#[inline(always)]
fn pack_header(
    ty: WeightType,
    layout: &TileLayout,
    rows: &[Option<&[u8]>; PANEL],
    b: usize,
    header: &mut [u8],
) {
    if layout.header == 0 {
        return;
    }
    for (n, row) in rows.iter().enumerate() {
        let Some(row) = row else { continue };
        let sup = formats::super_scales(ty, row, b);
        header[2 * n..2 * n + 2].copy_from_slice(&sup.d);
        if layout.ints.min.is_some() {
            header[HEADER_MINS_AT + 2 * n..][..2].copy_from_slice(&sup.dmin);
        }
    }
}

/// Writes row `n`'s part of a tile's scale (or minimum): `v` itself for f16 scales
/// (exact: it came from an f16 field), the block's integer `int` for scales made of a
/// super-block's f16 and an integer, nothing for the super-block's f16 alone.
#[inline(always)]
fn put_scale(kind: Scale, at: &mut [u8], n: usize, v: f32, int: u8) {
    match kind {
        Scale::F16 => at[2 * n..2 * n + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes()),
        Scale::SuperTimesU8 => at[n] = int,
        Scale::Super => {}
    }
}

/// Row `n`'s scale (or minimum, `min`) of a tile, from its part of the tile `at` and its
/// group's `header`, with the reference's float steps.
fn get_scale(kind: Scale, at: &[u8], header: &[u8], n: usize, min: bool) -> f32 {
    let sup = || formats::f16_at(header, if min { HEADER_MINS_AT } else { 0 } + 2 * n);
    match kind {
        Scale::F16 => formats::f16_at(at, 2 * n),
        Scale::Super => sup(),
        Scale::SuperTimesU8 if min => -(sup() * f32::from(at[n])),
        Scale::SuperTimesU8 => sup() * f32::from(at[n]),
    }
}

/// A tile's 512 unsigned integers, in tile order.
pub(super) fn unpack(bits: Bits, q: &[u8]) -> [u8; TILE_VALUES] {
    let mut v = [0u8; TILE_VALUES];
    if bits == Bits::Eight {
        v.copy_from_slice(&q[..TILE_VALUES]);
        return v;
    }
    for j in 0..256 {
        v[j] = q[j] & 0x0F;
        v[j + 256] = q[j] >> 4;
    }
    match bits {
        Bits::Five => {
            for (i, x) in v.iter_mut().enumerate() {
                *x |= ((q[256 + i / 8] >> (i % 8)) & 1) << 4;
            }
        }
        Bits::Six => {
            for (i, x) in v.iter_mut().enumerate() {
                *x |= ((q[256 + i % 128] >> (2 * (i / 128))) & 3) << 4;
            }
        }
        _ => {}
    }
    v
}

/// Where a product's outputs go: `tokens` rows of `stride` floats, the first holding
/// row `first` of the matrix. Kernels write only the rows of the panels they compute,
/// so pieces of one product may be computed on several threads at once.
#[derive(Clone, Copy)]
pub(super) struct Dest {
    pub ptr: *mut f32,
    pub stride: usize,
    pub first: usize,
    pub rows: usize,
}

// SAFETY: a `Dest` is handed to pieces of one product that write disjoint panels (see
// `super::matmul`), while the buffer it points into is borrowed mutably for the whole
// product.
unsafe impl Send for Dest {}
unsafe impl Sync for Dest {}

impl Dest {
    /// Writes row `p·16 + n` of token `t`, for the rows inside the matrix.
    ///
    /// # Safety
    /// The destination must hold `t`'s row and this piece must own panel `p`.
    #[inline(always)]
    pub(super) unsafe fn put(&self, t: usize, p: usize, n: usize, v: f32) {
        let r = p * PANEL + n;
        if r < self.rows {
            *self.ptr.add(t * self.stride + r - self.first) = v;
        }
    }
}

/// The portable kernel: the same float operations as the reference, from the tiles.
///
/// # Safety
/// `dest` must be valid for the panels in `panels` (see [`Dest`]).
pub(super) unsafe fn matmul_portable(w: &Packed, acts: &Acts, panels: Range<usize>, dest: Dest) {
    let Some(layout) = w.layout() else {
        return matmul_float(w, acts, panels, dest);
    };
    let ints = layout.ints;
    let tokens = acts.tokens();
    for p in panels {
        let mut acc = vec![[0f32; PANEL]; tokens];
        let mut accm = vec![[0f32; PANEL]; tokens];
        for b in 0..w.blocks() {
            let tile = w.tile(&layout, p, b);
            let header = w.header(&layout, p, b);
            let v = unpack(ints.bits, tile);
            for n in 0..PANEL {
                let scale = get_scale(ints.scale, &tile[layout.scales_at..], header, n, false);
                let min = ints.min.map_or(0.0, |m| {
                    get_scale(m, &tile[layout.mins_at..], header, n, true)
                });
                let sub = if ints.halves {
                    [
                        tile[layout.subs_at + n] as i8,
                        tile[layout.subs_at + PANEL + n] as i8,
                    ]
                } else {
                    [0, 0]
                };
                let blk = formats::Block {
                    u: std::array::from_fn(|k| v[position(n, k)]),
                    scale,
                    min,
                    sub,
                };
                for t in 0..tokens {
                    let dx = acts.scales(t)[b];
                    let i = formats::block_int(ints, &blk, acts, t, b);
                    acc[t][n] = (i as f32).mul_add(blk.scale * dx, acc[t][n]);
                    if ints.min.is_some() {
                        accm[t][n] = (acts.sums(t)[b] as f32).mul_add(blk.min * dx, accm[t][n]);
                    }
                }
            }
        }
        for t in 0..tokens {
            for n in 0..PANEL {
                dest.put(t, p, n, acc[t][n] + accm[t][n]);
            }
        }
    }
}

/// Float matrices, row by row: [`formats::float_dot`] over each row and token.
///
/// # Safety
/// As [`matmul_portable`].
pub(super) unsafe fn matmul_float(w: &Packed, acts: &Acts, panels: Range<usize>, dest: Dest) {
    let mut row = vec![0f32; w.cols()];
    for p in panels {
        for n in 0..PANEL {
            let r = p * PANEL + n;
            if r >= w.rows() {
                break;
            }
            formats::dequantize(w.ty(), w.float_row(r), &mut row);
            for t in 0..acts.tokens() {
                dest.put(t, p, n, formats::float_dot(&row, acts.floats(t)));
            }
        }
    }
}
