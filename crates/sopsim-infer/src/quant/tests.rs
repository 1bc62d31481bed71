use candle_core::quantized::k_quants::{
    BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0, GgmlType,
};
use half::f16;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

const ALL: [WeightType; 11] = [
    WeightType::F32,
    WeightType::F16,
    WeightType::BF16,
    WeightType::Q4_0,
    WeightType::Q4_1,
    WeightType::Q5_0,
    WeightType::Q5_1,
    WeightType::Q8_0,
    WeightType::Q4K,
    WeightType::Q5K,
    WeightType::Q6K,
];

/// Random blocks whose scale fields hold small, finite f16 values.
fn random_matrix(ty: WeightType, rows: usize, cols: usize, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut data = vec![0u8; ty.row_bytes(cols) * rows];
    rng.fill(&mut data[..]);
    let put = |data: &mut [u8], at: usize, v: f32| {
        data[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes())
    };
    match ty {
        WeightType::F32 => {
            for c in data.chunks_exact_mut(4) {
                c.copy_from_slice(&rng.random_range(-1.0f32..1.0).to_le_bytes());
            }
        }
        WeightType::F16 => {
            for c in data.chunks_exact_mut(2) {
                c.copy_from_slice(&f16::from_f32(rng.random_range(-1.0..1.0)).to_le_bytes());
            }
        }
        WeightType::BF16 => {
            for c in data.chunks_exact_mut(2) {
                c.copy_from_slice(&half::bf16::from_f32(rng.random_range(-1.0..1.0)).to_le_bytes());
            }
        }
        _ => {
            let gb = ty.row_bytes(ty.group());
            for g in data.chunks_exact_mut(gb) {
                match ty {
                    WeightType::Q6K => put(g, 208, rng.random_range(0.001..0.01)),
                    WeightType::Q4K | WeightType::Q5K => {
                        put(g, 0, rng.random_range(0.001..0.01));
                        put(g, 2, rng.random_range(0.001..0.01));
                    }
                    WeightType::Q4_1 | WeightType::Q5_1 => {
                        put(g, 0, rng.random_range(0.01..0.1));
                        put(g, 2, rng.random_range(-0.5..0.5));
                    }
                    _ => put(g, 0, rng.random_range(0.01..0.1)),
                }
            }
        }
    }
    data
}

fn random_acts(tokens: usize, cols: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
    (0..tokens * cols)
        .map(|i| {
            // An outlier now and then, as real activations have.
            let v: f32 = rng.random_range(-1.0..1.0);
            if i % 97 == 0 {
                v * 20.0
            } else {
                v
            }
        })
        .collect()
}

/// Every row of `w` times every token of `x`, by `kernels`: `[token][row]`.
fn product(kernels: Kernels, w: QView<'_>, x: &[f32]) -> Vec<f32> {
    let mut acts = Acts::default();
    acts.quantize(w.ty.act_format(), x, w.cols);
    let packed = w.pack().unwrap();
    let mut out = vec![0f32; w.rows * acts.tokens()];
    matmul(kernels, &packed, &acts, &mut out);
    out
}

/// The reference, from the file's own layout.
fn reference(w: QView<'_>, x: &[f32]) -> Vec<f32> {
    let mut acts = Acts::default();
    acts.quantize(w.ty.act_format(), x, w.cols);
    let mut out = vec![0f32; w.rows * acts.tokens()];
    for t in 0..acts.tokens() {
        for r in 0..w.rows {
            out[t * w.rows + r] = dot_reference(w.ty, w.row(r), &acts, t);
        }
    }
    out
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn every_kernel_matches_the_reference_bit_for_bit() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let kernels = Kernels::supported();
    assert!(kernels.len() > 1 || cfg!(not(target_arch = "x86_64")));
    for ty in ALL {
        // Rows that do not fill the last panel.
        let (rows, cols) = (37, 512);
        let data = random_matrix(ty, rows, cols, &mut rng);
        let w = QView::new(ty, rows, cols, &data).unwrap();
        for tokens in [1, 2, 3, 4, 5, 8, 9, 16, 17, 33] {
            let x = random_acts(tokens, cols, &mut rng);
            let want = reference(w, &x);
            for &k in &kernels {
                let got = product(k, w, &x);
                assert_eq!(bits(&want), bits(&got), "{ty:?} {k:?} tokens={tokens}");
            }
        }
    }
}

#[test]
fn a_row_gives_the_same_bits_alone_and_in_any_batch() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for ty in ALL {
        let (rows, cols) = (19, 256);
        let data = random_matrix(ty, rows, cols, &mut rng);
        let w = QView::new(ty, rows, cols, &data).unwrap();
        let x = random_acts(21, cols, &mut rng);
        let together = product(Kernels::detect(), w, &x);
        for t in 0..21 {
            let alone = product(Kernels::detect(), w, &x[t * cols..(t + 1) * cols]);
            assert_eq!(
                bits(&alone),
                bits(&together[t * rows..(t + 1) * rows]),
                "{ty:?} token {t}"
            );
        }
    }
}

#[test]
fn one_panel_gives_the_rows_of_the_whole_product() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for ty in ALL {
        let (rows, cols) = (40, 256);
        let data = random_matrix(ty, rows, cols, &mut rng);
        let w = QView::new(ty, rows, cols, &data).unwrap();
        let packed = w.pack().unwrap();
        let x = random_acts(5, cols, &mut rng);
        let whole = product(Kernels::detect(), w, &x);
        let mut acts = Acts::default();
        acts.quantize(ty.act_format(), &x, cols);
        for p in 0..packed.panels() {
            let mut out = vec![0f32; PANEL * 5];
            matmul_panel(Kernels::detect(), &packed, &acts, p, &mut out);
            for t in 0..5 {
                for n in 0..PANEL {
                    let r = p * PANEL + n;
                    if r < rows {
                        assert_eq!(out[t * PANEL + n].to_bits(), whole[t * rows + r].to_bits());
                    }
                }
            }
        }
    }
}

/// candle's dequantisation, an independent reading of the block layouts.
fn candle_dequantize(ty: WeightType, data: &[u8], out: &mut [f32]) {
    fn run<B: GgmlType>(data: &[u8], out: &mut [f32]) {
        assert_eq!(data.len() % std::mem::size_of::<B>(), 0);
        // SAFETY: the block types are `repr(C)` structs of bytes and f16s with no padding
        // requirements beyond 2-byte alignment; copy into an aligned Vec first.
        let n = data.len() / std::mem::size_of::<B>();
        let mut blocks: Vec<B> = Vec::with_capacity(n);
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                blocks.as_mut_ptr() as *mut u8,
                data.len(),
            );
            blocks.set_len(n);
        }
        B::to_float(&blocks, out);
    }
    match ty {
        WeightType::Q4_0 => run::<BlockQ4_0>(data, out),
        WeightType::Q4_1 => run::<BlockQ4_1>(data, out),
        WeightType::Q5_0 => run::<BlockQ5_0>(data, out),
        WeightType::Q5_1 => run::<BlockQ5_1>(data, out),
        WeightType::Q8_0 => run::<BlockQ8_0>(data, out),
        WeightType::Q4K => run::<BlockQ4K>(data, out),
        WeightType::Q5K => run::<BlockQ5K>(data, out),
        WeightType::Q6K => run::<BlockQ6K>(data, out),
        _ => unreachable!(),
    }
}

#[test]
fn dequantisation_agrees_with_candle() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for ty in ALL.into_iter().filter(|t| t.group() > 1) {
        let cols = 512;
        let data = random_matrix(ty, 1, cols, &mut rng);
        let mut ours = vec![0f32; cols];
        let mut theirs = vec![0f32; cols];
        formats::dequantize(ty, &data, &mut ours);
        candle_dequantize(ty, &data, &mut theirs);
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                "{ty:?} value {i}: {a} vs {b}"
            );
        }
    }
}

#[test]
fn quantised_products_are_close_to_float_products() {
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    for ty in ALL {
        let cols = 1024;
        let data = random_matrix(ty, 4, cols, &mut rng);
        let w = QView::new(ty, 4, cols, &data).unwrap();
        let x = random_acts(2, cols, &mut rng);
        let got = product(Kernels::detect(), w, &x);
        let mut row = vec![0f32; cols];
        for r in 0..4 {
            w.dequantize_row(r, &mut row);
            for t in 0..2 {
                let exact: f64 = row
                    .iter()
                    .zip(&x[t * cols..])
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                let norm: f64 = row
                    .iter()
                    .zip(&x[t * cols..])
                    .map(|(a, b)| (f64::from(*a) * f64::from(*b)).abs())
                    .sum();
                let err = (f64::from(got[t * 4 + r]) - exact).abs();
                assert!(
                    err <= 0.02 * norm + 1e-4,
                    "{ty:?}: {} vs {exact} (scale {norm})",
                    got[t * 4 + r]
                );
            }
        }
    }
}

#[test]
fn views_refuse_sizes_that_do_not_match() {
    assert!(QView::new(WeightType::Q4K, 2, 100, &[0u8; 10]).is_err());
    assert!(QView::new(WeightType::Q8_0, 2, 64, &[0u8; 100]).is_err());
    assert!(QView::new(WeightType::Q8_0, 2, 64, &[0u8; 136]).is_ok());
    assert!(QView::new(WeightType::Q8_0, usize::MAX / 2, 64, &[0u8; 136]).is_err());
}

#[test]
fn packed_tiles_hold_the_files_values() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for ty in ALL.into_iter().filter(|t| !t.is_float()) {
        let (rows, cols) = (21, 512);
        let data = random_matrix(ty, rows, cols, &mut rng);
        let w = QView::new(ty, rows, cols, &data).unwrap();
        let packed = w.pack().unwrap();
        let layout = packed.layout().unwrap();
        for r in 0..rows {
            for b in 0..cols / 32 {
                let tile = packed.tile(&layout, r / PANEL, b);
                let values = packed::unpack(layout.ints.bits, tile);
                let want = formats::block(ty, w.row(r), b);
                for k in 0..32 {
                    assert_eq!(
                        values[packed::position(r % PANEL, k)],
                        want.u[k],
                        "{ty:?} row {r} block {b}"
                    );
                }
            }
        }
    }
}

/// `cargo test -p sopsim-infer --release kernel_speed -- --ignored --nocapture`
#[test]
#[ignore]
fn kernel_speed() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for ty in [
        WeightType::Q5_0,
        WeightType::Q8_0,
        WeightType::Q4K,
        WeightType::Q6K,
        WeightType::Q4_1,
    ] {
        let big = std::env::var("SPEED_ROWS")
            .ok()
            .and_then(|v| v.parse().ok());
        let (rows, cols) = (
            big.unwrap_or(4864),
            if ty.group() == 256 { 4864 } else { 896 },
        );
        let data = random_matrix(ty, rows, cols, &mut rng);
        let w = QView::new(ty, rows, cols, &data).unwrap();
        let packed = w.pack().unwrap();
        for n in [1, 2, 4, 8, 16, 64] {
            let x = random_acts(n, cols, &mut rng);
            let mut acts = Acts::default();
            acts.quantize(ty.act_format(), &x, cols);
            let mut out = vec![0f32; rows * n];
            for k in Kernels::supported().into_iter().skip(1) {
                let reps = 256 / n.min(64);
                matmul(k, &packed, &acts, &mut out);
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    matmul(k, &packed, &acts, &mut out);
                }
                let s = t.elapsed().as_secs_f64() / reps as f64;
                println!(
                    "{ty:?} n={n} {k:?}: {:.2} GB/s weights, {:.1} GMAC/s",
                    packed.bytes() as f64 / s / 1e9,
                    (rows * cols * n) as f64 / s / 1e9
                );
            }
        }
    }
}
