//! One sequence's keys and values (f16, as llama.cpp keeps them), and the tokens they
//! belong to. A cache can be cut back to any prefix and continued from there, and whole
//! blocks of it copied out ([`KvBlocks`]) and into another.
//!
//! Values are kept a position after another. Keys are kept in blocks of
//! [`KEY_BLOCK`] positions, each block a dimension after another with the block's
//! positions side by side ([`key_at`]): attention scores sixteen positions per
//! register, and so reads each dimension's sixteen keys as one load.

use crate::error::InferError;

use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

/// Capacity grows in steps of this many positions (a multiple of the attention score
/// loop's 64 positions, so that loop never reads past the buffers).
const STEP: usize = 256;

/// Positions side by side in the keys' layout.
pub const KEY_BLOCK: usize = 16;

/// Where position `pos`'s key value `c` (of `width` per position) is in a layer's keys.
#[inline(always)]
pub fn key_at(pos: usize, width: usize, c: usize) -> usize {
    ((pos / KEY_BLOCK) * width + c) * KEY_BLOCK + pos % KEY_BLOCK
}

/// One sequence's keys and values, layer by layer, with the tokens they belong to.
pub struct KvCache {
    /// Floats per position per layer: KV heads × head size.
    width: usize,
    cap: usize,
    /// Per layer, `cap × width` f16 bit patterns (keys laid out by [`key_at`]).
    k: Vec<Vec<u16>>,
    v: Vec<Vec<u16>>,
    tokens: Vec<u32>,
}

impl KvCache {
    /// An empty cache for `layers` layers of `width` values per position.
    pub fn new(layers: usize, width: usize) -> Self {
        Self {
            width,
            cap: 0,
            k: vec![Vec::new(); layers],
            v: vec![Vec::new(); layers],
            tokens: Vec::new(),
        }
    }

    /// Positions held: the tokens whose keys and values are stored.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no positions are held.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The tokens whose keys and values are stored, in order.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Forgets everything after the first `n` tokens.
    pub fn truncate(&mut self, n: usize) {
        self.tokens.truncate(n);
    }

    /// Bytes held by the buffers.
    pub fn bytes(&self) -> usize {
        2 * 2 * self.cap * self.width * self.k.len()
    }

    /// Makes room for `n` positions in all; refuses, rather than aborting, when memory
    /// runs out.
    pub fn reserve(&mut self, n: usize) -> Result<(), InferError> {
        if n <= self.cap {
            return Ok(());
        }
        let cap = n.div_ceil(STEP) * STEP;
        let no_memory = InferError::NoMemory { positions: n };
        let want = cap.checked_mul(self.width).ok_or(no_memory)?;
        for buf in self.k.iter_mut().chain(self.v.iter_mut()) {
            buf.try_reserve_exact(want.saturating_sub(buf.len()))
                .map_err(|_| InferError::NoMemory { positions: cap })?;
            buf.resize(want, 0);
        }
        self.cap = cap;
        Ok(())
    }

    /// A new cache holding the first `n` positions of this one (which stays as it is).
    pub fn copy_prefix(&self, n: usize) -> Result<KvCache, InferError> {
        let n = n.min(self.len());
        let mut out = KvCache::new(self.k.len(), self.width);
        out.reserve(n)?;
        // Whole key blocks: the last one's unused positions come along.
        let len = n.div_ceil(KEY_BLOCK) * KEY_BLOCK * self.width;
        for (dst, src) in out
            .k
            .iter_mut()
            .zip(&self.k)
            .chain(out.v.iter_mut().zip(&self.v))
        {
            dst[..len].copy_from_slice(&src[..len]);
        }
        out.tokens = self.tokens[..n].to_vec();
        Ok(out)
    }

    /// Stores position `pos`'s keys and values for `layer` (room must be reserved).
    /// Rounded to the nearest f16, ties to even (in SIMD where the CPU has F16C: the
    /// same bits).
    pub fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let at = pos * self.width;
        let width = self.width;
        self.v[layer][at..at + width]
            .reinterpret_cast_mut::<f16>()
            .convert_from_f32_slice(&v[..width]);
        let keys = &mut self.k[layer];
        let mut part = [f16::ZERO; KEY_BLOCK];
        for (i, chunk) in k[..width].chunks(KEY_BLOCK).enumerate() {
            let part = &mut part[..chunk.len()];
            part.convert_from_f32_slice(chunk);
            for (j, x) in part.iter().enumerate() {
                keys[key_at(pos, width, i * KEY_BLOCK + j)] = x.to_bits();
            }
        }
    }

    /// Appends the tokens whose keys and values were stored.
    pub fn push_tokens(&mut self, tokens: &[u32]) {
        self.tokens.extend_from_slice(tokens);
    }

    /// Layer `layer`'s keys and values, as f16 bit patterns.
    pub fn layer(&self, layer: usize) -> (&[u16], &[u16]) {
        (&self.k[layer], &self.v[layer])
    }

    /// The keys and values of the whole blocks `blocks` (of [`KEY_BLOCK`] positions),
    /// copied out, with their tokens.
    pub fn blocks(&self, blocks: std::ops::Range<usize>) -> KvBlocks {
        let per_block = KEY_BLOCK * self.width;
        let span = blocks.start * per_block..blocks.end * per_block;
        KvBlocks {
            k: self.k.iter().map(|l| l[span.clone()].into()).collect(),
            v: self.v.iter().map(|l| l[span.clone()].into()).collect(),
            tokens: self.tokens[blocks.start * KEY_BLOCK..blocks.end * KEY_BLOCK].into(),
        }
    }

    /// Continues a cache that holds whole blocks only with `blocks` (room must be
    /// reserved): the keys and values are those the tokens would have been given here.
    pub fn extend_blocks(&mut self, blocks: &KvBlocks) {
        debug_assert_eq!(self.len() % KEY_BLOCK, 0, "a cache continued by blocks");
        let at = self.len() * self.width;
        for (dst, src) in self
            .k
            .iter_mut()
            .zip(&blocks.k)
            .chain(self.v.iter_mut().zip(&blocks.v))
        {
            dst[at..at + src.len()].copy_from_slice(src);
        }
        self.tokens.extend_from_slice(&blocks.tokens);
    }
}

/// One half-precision buffer per layer.
type Layers = Vec<Box<[u16]>>;

/// Whole blocks of a cache's keys and values, with their tokens: what a prefix cache
/// keeps of a sequence, so that another continues from them without computing them.
#[derive(Clone)]
pub struct KvBlocks {
    k: Layers,
    v: Layers,
    tokens: Box<[u32]>,
}

impl KvBlocks {
    /// The tokens the blocks belong to.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// How many blocks it holds.
    pub fn len(&self) -> usize {
        self.tokens.len() / KEY_BLOCK
    }

    /// Whether no blocks are held.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        2 * self.k.iter().chain(&self.v).map(|l| l.len()).sum::<usize>() + 4 * self.tokens.len()
    }

    /// The first `n` blocks, and the rest.
    pub fn split(self, n: usize) -> (KvBlocks, KvBlocks) {
        let per_block = |l: &[u16]| l.len() / self.len().max(1);
        let cut = |ls: &[Box<[u16]>]| -> (Layers, Layers) {
            ls.iter()
                .map(|l| {
                    let at = n * per_block(l);
                    (l[..at].into(), l[at..].into())
                })
                .unzip()
        };
        let (k0, k1) = cut(&self.k);
        let (v0, v1) = cut(&self.v);
        let at = n * KEY_BLOCK;
        (
            KvBlocks {
                k: k0,
                v: v0,
                tokens: self.tokens[..at].into(),
            },
            KvBlocks {
                k: k1,
                v: v1,
                tokens: self.tokens[at..].into(),
            },
        )
    }
}
