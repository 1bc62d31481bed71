//! Activations quantised for a product: int8 values with one scale per group, plus the
//! integer sums the kernels need to remove a format's offset or apply its minimum.

/// How the inputs of a product with a given weight format are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActFormat {
    /// Plain floats (for float weights).
    Float,
    /// int8 with a scale per 32 values (llama.cpp's Q8_0 / Q8_1).
    Q8x32,
    /// int8 with a scale per 256 values (llama.cpp's Q8_K).
    Q8x256,
}

impl ActFormat {
    pub fn group(self) -> usize {
        match self {
            ActFormat::Float => 1,
            ActFormat::Q8x32 => 32,
            ActFormat::Q8x256 => 256,
        }
    }
}

/// `tokens` rows of `cols` activations in one [`ActFormat`]. Buffers are reused.
#[derive(Debug, Clone)]
pub struct Acts {
    format: ActFormat,
    tokens: usize,
    cols: usize,
    pub(super) floats: Vec<f32>,
    pub(super) qs: Vec<i8>,
    /// One per group.
    pub(super) scales: Vec<f32>,
    /// One per 32 values: their sum.
    pub(super) bsum: Vec<i32>,
}

impl Default for Acts {
    fn default() -> Self {
        Self {
            format: ActFormat::Float,
            tokens: 0,
            cols: 0,
            floats: Vec::new(),
            qs: Vec::new(),
            scales: Vec::new(),
            bsum: Vec::new(),
        }
    }
}

impl Acts {
    pub fn format(&self) -> ActFormat {
        self.format
    }

    pub fn tokens(&self) -> usize {
        self.tokens
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Stores `x` (`tokens × cols`, row-major) in `format`. `cols` must be a multiple
    /// of 32 (and of 256 for [`ActFormat::Q8x256`]).
    pub fn quantize(&mut self, format: ActFormat, x: &[f32], cols: usize) {
        debug_assert!(cols > 0 && x.len() % cols == 0 && cols % 32 == 0);
        let tokens = x.len() / cols;
        self.format = format;
        self.tokens = tokens;
        self.cols = cols;
        if format == ActFormat::Float {
            self.floats.clear();
            self.floats.extend_from_slice(x);
            return;
        }
        let group = format.group();
        self.qs.resize(x.len(), 0);
        self.scales.resize(x.len() / group, 0.0);
        self.bsum.resize(x.len() / 32, 0);
        for (g, (values, q)) in x.chunks_exact(group).zip(self.qs.chunks_exact_mut(group)).enumerate() {
            let amax = values.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            for (q, v) in q.iter_mut().zip(values) {
                *q = (v * id).round().clamp(-127.0, 127.0) as i8;
            }
            self.scales[g] = d;
        }
        for (sum, q) in self.bsum.iter_mut().zip(self.qs.chunks_exact(32)) {
            *sum = q.iter().map(|&v| i32::from(v)).sum();
        }
    }

    /// Token `t`'s int8 values.
    pub(super) fn qs(&self, t: usize) -> &[i8] {
        &self.qs[t * self.cols..(t + 1) * self.cols]
    }

    pub(super) fn scales(&self, t: usize) -> &[f32] {
        let n = self.cols / self.format.group();
        &self.scales[t * n..(t + 1) * n]
    }

    pub(super) fn bsum(&self, t: usize) -> &[i32] {
        let n = self.cols / 32;
        &self.bsum[t * n..(t + 1) * n]
    }

    pub(super) fn floats(&self, t: usize) -> &[f32] {
        &self.floats[t * self.cols..(t + 1) * self.cols]
    }
}
