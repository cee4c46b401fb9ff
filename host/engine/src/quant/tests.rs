//! The block kernels against a plain reference, each instruction set against the others.

use burn::prelude::*;
use half::f16;

use super::ggml::{dequantize, GgmlType};
use super::isa::detect;
use super::matmul::PANEL_TASK_ROWS;
use super::storage::Blocks;
#[cfg(target_arch = "x86_64")]
use super::x86;
use super::{QuantMatrix, Simd, EIGHT_ROWS_MAX_COLS, MAX_KERNEL_ROWS};
use crate::device::{CpuBackend, CpuDevice};
#[cfg(target_arch = "x86_64")]
use crate::kernels::sum16;
use crate::kernels::sum8;

fn f16_bytes(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_bits().to_le_bytes()
}

/// `values` (a whole number of 32-value blocks) as ggml's reference quantiser writes Q8_0.
pub(crate) fn quantise_q8_0(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in values.chunks_exact(32) {
        let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
        out.extend(f16_bytes(d));
        out.extend(b.iter().map(|v| (v * inv).round() as i8 as u8));
    }
    out
}

/// `values` as Q4_1 (ggml's reference: min and scale over each 32 values).
pub(crate) fn quantise_q4_1(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in values.chunks_exact(32) {
        let min = b.iter().fold(f32::MAX, |m, v| m.min(*v));
        let max = b.iter().fold(f32::MIN, |m, v| m.max(*v));
        let d = (max - min) / 15.0;
        let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
        out.extend(f16_bytes(d));
        out.extend(f16_bytes(min));
        let q = |v: f32| (((v - min) * inv + 0.5) as u8).min(15);
        out.extend((0..16).map(|j| q(b[j]) | (q(b[j + 16]) << 4)));
    }
    out
}

/// `values` as Q4_0 (ggml's reference: the value of largest magnitude maps to -8).
pub(crate) fn quantise_q4_0(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in values.chunks_exact(32) {
        let max = b
            .iter()
            .fold(0f32, |m, v| if v.abs() > m.abs() { *v } else { m });
        let d = max / -8.0;
        let inv = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend(f16_bytes(d));
        let q = |v: f32| ((v * inv + 8.5) as u8).min(15);
        out.extend((0..16).map(|j| q(b[j]) | (q(b[j + 16]) << 4)));
    }
    out
}

/// `len` values in [-1, 1], spread by a multiplicative hash of the index and `seed`.
pub(crate) fn values(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| {
            (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2001) as f32 / 1000.0
                - 1.0
        })
        .collect()
}

/// Blocks of `ty` with arbitrary quant bits and small, finite scales.
fn random_blocks(ty: GgmlType, n_blocks: usize, seed: u32) -> Vec<u8> {
    let (_, bytes) = ty.block_layout().unwrap();
    let mut out: Vec<u8> = (0..n_blocks * bytes)
        .map(|i| ((i as u32).wrapping_mul(2246822519).wrapping_add(seed) >> 13) as u8)
        .collect();
    let scale_at: &[usize] = match ty {
        GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::Q4_0 => &[0],
        GgmlType::Q5_1 | GgmlType::Q4_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => unreachable!(),
    };
    for (b, block) in out.chunks_exact_mut(bytes).enumerate() {
        for (s, &at) in scale_at.iter().enumerate() {
            let v = 0.002 + 0.001 * ((b + s) % 7) as f32;
            block[at..at + 2].copy_from_slice(&f16_bytes(v));
        }
    }
    out
}

/// `x [m, k] · wᵀ` for `w [n, k]`, in f64.
fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut y = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k)
                .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                .sum();
            y[i * n + j] = s as f32;
        }
    }
    y
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * scale * 8.0,
            "{what}: element {i}: {a} vs {b} (scale {scale})"
        );
    }
}

const TYPES: [GgmlType; 8] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q8_0,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

#[test]
fn the_block_kernel_matches_the_dequantised_product_for_every_type_and_row_count() {
    for ty in TYPES {
        let (block, _) = ty.block_layout().unwrap();
        let (n, k) = (37, 2 * block);
        let data = random_blocks(ty, n * k / block, 11);
        let q = QuantMatrix::from_gguf(ty, n, k, &data).unwrap();
        let w = dequantize(ty, &data, n * k).unwrap();
        assert_eq!(
            q.dequantise(),
            w,
            "{ty}: the kept blocks decode as the loader does"
        );
        for m in [1, 2, 3, 5, 8, 9, 17, 64] {
            let x = values(m * k, m as u32);
            let got = q.matmul(&x, m);
            assert_close(&got, &reference(&x, &w, m, k, n), &format!("{ty} m {m}"));
        }
    }
}

/// The kernels this CPU runs: the portable one, and AVX2 and AVX-512 where it has them.
fn kernels_here() -> Vec<Simd> {
    let best = detect();
    let mut isas = vec![Simd::Generic];
    if best != Simd::Generic {
        isas.push(Simd::Avx2);
    }
    if best == Simd::Avx512 {
        isas.push(Simd::Avx512);
    }
    eprintln!("kernels available here: {isas:?}");
    isas
}

/// The AVX2 kernel's sums for Q4 rows of at most [`EIGHT_ROWS_MAX_COLS`] values, one
/// output at a time: lane `l` takes values `l`, `8 + l`, `16 + l` and `24 + l` of each block
/// (widened by one multiply-add, as the kernel does), block after block; then [`sum8`].
fn eight_lane_q4(q: &QuantMatrix, x: &[f32], m: usize) -> Vec<f32> {
    let Blocks::Q4 {
        quants,
        scales,
        mins,
    } = &q.blocks
    else {
        panic!("Q4 blocks");
    };
    let (n, k) = (q.rows, q.cols);
    let nb = k / 32;
    let mut y = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = [0f32; 8];
            for b in 0..nb {
                let at = j * nb + b;
                let w: [f32; 32] = std::array::from_fn(|v| {
                    let byte = quants[at * 16 + v % 16];
                    let nibble = if v < 16 { byte & 0x0F } else { byte >> 4 };
                    (nibble as f32).mul_add(scales[at], mins[at])
                });
                for v in 0..32 {
                    acc[v % 8] = w[v].mul_add(x[i * k + b * 32 + v], acc[v % 8]);
                }
            }
            y[i * n + j] = sum8(&acc);
        }
    }
    y
}

#[test]
fn each_kernel_keeps_its_sum_order_and_all_agree_within_rounding() {
    let isas = kernels_here();
    // Rows narrow and wide enough for each way the AVX2 kernels split a batch into passes.
    for (ty, k) in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0]
        .into_iter()
        .flat_map(|ty| [(ty, 96), (ty, 800)])
    {
        // Tasks whose weight rows are odd and not a multiple of four, so every kernel's
        // last weight rows go alone, whatever the thread count.
        let n = 71;
        let data = random_blocks(ty, n * k / 32, 21);
        let q = QuantMatrix::from_gguf(ty, n, k, &data).unwrap();
        let w = q.dequantise();
        for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 13] {
            let x = values(m * k, 7 + m as u32);
            let want = reference(&x, &w, m, k, n);
            let ys: Vec<Vec<f32>> = isas.iter().map(|&i| q.matmul_on(i, &x, m)).collect();
            for (isa, y) in isas.iter().zip(&ys) {
                assert_close(y, &want, &format!("{ty} k {k} m {m} {isa:?}"));
            }
            // Narrow Q4 rows take the AVX2 kernel's eight-lane sums; everything else the
            // AVX-512 kernel's sixteen-lane ones.
            let eight_lanes = ty != GgmlType::Q8_0 && k <= EIGHT_ROWS_MAX_COLS;
            if ys.len() >= 2 && eight_lanes {
                let lanes8 = eight_lane_q4(&q, &x, m);
                assert_eq!(
                    ys[1], lanes8,
                    "{ty} k {k} m {m}: AVX2 and its eight-lane order"
                );
            } else if ys.len() == 3 {
                assert_eq!(ys[1], ys[2], "{ty} k {k} m {m}: AVX2 and AVX-512 differ");
            }
        }
    }
}

/// Values of both signs with magnitudes over forty octaves, so that any other order of
/// additions than a sum's own would round apart.
#[cfg(target_arch = "x86_64")]
fn octave_spread(seed: u32) -> impl FnMut() -> f32 {
    let mut rng = seed;
    move || {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        (rng as f32 / u32::MAX as f32 - 0.5) * 2f32.powi((rng % 40) as i32 - 20)
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn sixteen_sums_at_once_give_the_bits_of_sixteen_sums_one_by_one() {
    if detect() != Simd::Avx512 {
        eprintln!("no AVX-512 here: nothing to compare");
        return;
    }
    let mut next = octave_spread(0x2545_f491);
    for _ in 0..200 {
        let lanes: [[f32; 16]; 16] = std::array::from_fn(|_| std::array::from_fn(|_| next()));
        let mut got = [0f32; 16];
        // SAFETY: the CPU has AVX-512 (checked above).
        unsafe {
            use std::arch::x86_64::*;
            let v = std::array::from_fn(|p| _mm512_loadu_ps(lanes[p].as_ptr()));
            _mm512_storeu_ps(got.as_mut_ptr(), x86::sum16_each(v));
        }
        for (p, l) in lanes.iter().enumerate() {
            assert_eq!(got[p].to_bits(), sum16(l).to_bits(), "vector {p}");
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn eight_sums_at_once_give_the_bits_of_eight_sums_one_by_one() {
    if !is_x86_feature_detected!("avx2") {
        eprintln!("no AVX2 here: nothing to compare");
        return;
    }
    let mut next = octave_spread(0x9e37_79b9);
    for _ in 0..500 {
        let lanes: [[f32; 8]; 8] = std::array::from_fn(|_| std::array::from_fn(|_| next()));
        let mut got = [0f32; 8];
        // SAFETY: the CPU has AVX2 (checked above).
        unsafe {
            use std::arch::x86_64::*;
            let v = std::array::from_fn(|p| _mm256_loadu_ps(lanes[p].as_ptr()));
            _mm256_storeu_ps(got.as_mut_ptr(), x86::sum8_each(v));
        }
        for (p, l) in lanes.iter().enumerate() {
            assert_eq!(got[p].to_bits(), sum8(l).to_bits(), "vector {p}");
        }
    }
}

#[test]
fn the_many_row_path_matches_the_product_and_keeps_each_row_alone() {
    for ty in [GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K] {
        let (block, _) = ty.block_layout().unwrap();
        // Widths that leave a partial panel and a partial task; rows over one task.
        for (n, m) in [(70, 5), (131, PANEL_TASK_ROWS + 9)] {
            let k = 2 * block;
            let data = random_blocks(ty, n * k / block, 17);
            let q = QuantMatrix::from_gguf(ty, n, k, &data).unwrap();
            let w = q.dequantise();
            let x = values(m * k, 23);
            let all = q.matmul_many(&x, m);
            assert_close(
                &all,
                &reference(&x, &w, m, k, n),
                &format!("{ty} n {n} m {m}"),
            );
            let r = m - 1;
            let alone = q.matmul_many(&x[r * k..(r + 1) * k], 1);
            assert_eq!(alone, all[r * n..(r + 1) * n], "{ty}: row {r} alone");
        }
    }
}

#[test]
fn a_row_comes_out_the_same_whatever_shares_its_call() {
    // Every kernel this CPU has, each way it splits a call into passes (and weight rows
    // into groups): two, four and eleven rows (a pass of eight and one of three).
    let isas = kernels_here();
    for ty in [GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q6_K] {
        let (block, _) = ty.block_layout().unwrap();
        let n = 301;
        for k in [2 * block, 800usize.next_multiple_of(block)] {
            let q = QuantMatrix::from_gguf(ty, n, k, &random_blocks(ty, n * k / block, 3)).unwrap();
            for &isa in &isas {
                for m in [2, 4, 11] {
                    let x = values(m * k, 5 + m as u32);
                    let all = q.matmul_on(isa, &x, m);
                    for i in 0..m {
                        let alone = q.matmul_on(isa, &x[i * k..(i + 1) * k], 1);
                        assert_eq!(
                            alone,
                            all[i * n..(i + 1) * n],
                            "{ty} k {k} {isa:?}: row {i} of {m}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_group_of_matrices_gives_each_the_bits_of_its_own_matmul() {
    let isas = kernels_here();
    // One width, three types and heights (one under a task, two over several).
    let k = 256;
    let mats: Vec<QuantMatrix> = [
        (GgmlType::Q4_1, 70),
        (GgmlType::Q8_0, 9),
        (GgmlType::Q6_K, 300),
    ]
    .into_iter()
    .map(|(ty, n)| {
        let (block, _) = ty.block_layout().unwrap();
        QuantMatrix::from_gguf(ty, n, k, &random_blocks(ty, n * k / block, n as u32)).unwrap()
    })
    .collect();
    for &isa in &isas {
        for m in [1, 5, 8] {
            let x = values(m * k, 31 + m as u32);
            let ys = QuantMatrix::group_on(isa, [&mats[0], &mats[1], &mats[2]], &x, m);
            for (q, y) in mats.iter().zip(&ys) {
                assert_eq!(*y, q.matmul_on(isa, &x, m), "{isa:?} m {m}: {}", q.ty());
            }
        }
    }
}

#[test]
fn the_reference_quantisers_round_trip_within_their_step() {
    let v = values(64 * 3, 9);
    // Half a step, except Q4_0's far end: its largest magnitude maps to -8, so the other
    // end clips at +7, a whole step short (as in ggml).
    for (ty, bytes, max_err) in [
        (GgmlType::Q8_0, quantise_q8_0(&v), 0.5 / 127.0),
        (GgmlType::Q4_0, quantise_q4_0(&v), 1.0 / 8.0),
        (GgmlType::Q4_1, quantise_q4_1(&v), 0.5 * 2.0 / 15.0),
    ] {
        let back = dequantize(ty, &bytes, v.len()).unwrap();
        for (a, b) in back.iter().zip(&v) {
            assert!((a - b).abs() <= max_err + 1e-3, "{ty}: {a} vs {b}");
        }
    }
}

#[test]
fn permuted_rows_and_embedding_rows_decode_as_the_whole_matrix() {
    let (n, k) = (6, 64);
    let v = values(n * k, 1);
    let q = QuantMatrix::from_gguf(GgmlType::Q4_1, n, k, &quantise_q4_1(&v)).unwrap();
    let w = q.dequantise();
    let order = [3, 0, 5, 1, 4, 2];
    let p = q.permute_rows(&order).dequantise();
    for (i, &r) in order.iter().enumerate() {
        assert_eq!(p[i * k..(i + 1) * k], w[r * k..(r + 1) * k]);
    }
    let rows = q.rows_f32(&[4, 4, 0]);
    assert_eq!(rows[..k], w[4 * k..5 * k]);
    assert_eq!(rows[2 * k..], w[..k]);
    assert!(q.bytes() < n * k * 4 / 5, "{} bytes kept", q.bytes());
}

#[test]
fn tensors_take_the_kernel_for_few_rows_and_the_gemm_for_many() {
    let dev = CpuDevice::default();
    let (n, k) = (40, 96);
    let v = values(n * k, 2);
    let q = QuantMatrix::from_gguf(GgmlType::Q8_0, n, k, &quantise_q8_0(&v)).unwrap();
    let w = q.dequantise();
    for m in [1, 7, MAX_KERNEL_ROWS, MAX_KERNEL_ROWS + 3] {
        let x = values(m * k, 4);
        let xt = Tensor::<CpuBackend, 2>::from_data(TensorData::new(x.clone(), [m, k]), &dev);
        let want = reference(&x, &w, m, k, n);
        let outside = q.forward(xt.clone()).into_data().to_vec::<f32>().unwrap();
        assert_close(&outside, &want, &format!("m {m} outside a decode step"));
        assert_eq!(
            outside,
            q.matmul_many(&x, m),
            "outside a decode step: the panels"
        );
        // SAFETY: a matmul, which leaves nothing on the worker.
        let inside = unsafe { crate::kernels::small_matmul::decode_scope(|| q.forward(xt)) };
        let inside = inside.into_data().to_vec::<f32>().unwrap();
        assert_close(&inside, &want, &format!("m {m} in a decode step"));
        if m <= MAX_KERNEL_ROWS {
            assert_eq!(inside, q.matmul(&x, m), "a decode step: the block kernel");
        }
    }
    // Autodiff tensors (not the plain CPU backend) take the dequantised gemm.
    type Ad = burn::backend::Autodiff<CpuBackend>;
    let x = values(3 * k, 8);
    let xa = Tensor::<Ad, 2>::from_data(TensorData::new(x.clone(), [3, k]), &dev);
    let y = q.forward(xa).into_data().to_vec::<f32>().unwrap();
    assert_close(&y, &reference(&x, &w, 3, k, n), "autodiff");
}

#[test]
fn bad_shapes_and_types_are_refused_with_the_reason() {
    let e = QuantMatrix::from_gguf(GgmlType::F32, 2, 32, &[0; 256])
        .unwrap_err()
        .to_string();
    assert!(e.contains("F32") && e.contains("cannot be kept"), "{e}");
    let e = QuantMatrix::from_gguf(GgmlType::Q8_0, 2, 48, &[0; 102])
        .unwrap_err()
        .to_string();
    assert!(e.contains("whole 32-value blocks"), "{e}");
    let e = QuantMatrix::from_gguf(GgmlType::Q8_0, 2, 0, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no values"), "{e}");
    let e = QuantMatrix::from_gguf(GgmlType::Q8_0, 2, 32, &[0; 60])
        .unwrap_err()
        .to_string();
    assert!(e.contains("takes 68 bytes, got 60"), "{e}");
}
