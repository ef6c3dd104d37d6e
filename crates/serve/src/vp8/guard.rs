//! A floor under VP8's quantizer from the frame about to be encoded, so a
//! frame stays near its budget when the picture's detail jumps.
//!
//! libvpx's real-time rate control picks a frame's quantizer before encoding
//! it, from what the frames before it cost: it does not look at the frame.
//! Where the picture's detail swings (a fractal whose parameter moves: a frame
//! nearly flat, the next one noise; a simulation that fills in), the frame
//! after a few flat ones is encoded at the fine quantizer they allowed and
//! comes out many times its budget; it then takes that many frame times to
//! cross the link, and the frames behind it wait. The guard estimates the
//! frame's cost before it is encoded: its luma's detail (second
//! differences) or, where less, its change from the previous frame (a picture
//! that moves little is cheap whatever its detail), to a power, times the
//! bits VP8's own model gives a quantizer, times a scale learned from the
//! frames encoded so far. The quantizer may then go no finer than the one at
//! which the estimate fits the cap. docs/streaming.md has the measurements
//! (the bench's julia frames: bytes over budget with and without it).

/// VP8's quantizer (0–63) to its index (0–127), libvpx's `q_trans`.
const Q_INDEX: [u8; 64] = [
    0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 12, 13, 15, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28, 29, 30, 31, 33,
    35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 64, 67, 70, 73, 76, 79, 82, 85, 88, 91, 94, 97,
    100, 103, 106, 109, 112, 115, 118, 121, 124, 127,
];

/// An inter frame's bits a macroblock at each quantizer index, in libvpx's own
/// rate model (`vp8_bits_per_mb[INTER_FRAME]`, 285000 / the quantizer step).
const INTER_BITS: [u32; 128] = [
    712500, 570000, 475000, 407142, 356250, 316666, 285000, 259090, 237500, 219230, 203571, 190000, 178125,
    167647, 158333, 150000, 142500, 135714, 129545, 123913, 118750, 114000, 109615, 105555, 101785, 98275,
    95000, 91935, 89062, 86363, 83823, 81428, 79166, 77027, 75000, 73076, 71250, 69512, 67857, 66279, 64772,
    63333, 61956, 60638, 59375, 58163, 57000, 55882, 54807, 53773, 52777, 51818, 50892, 50000, 49137, 47500,
    45967, 44531, 43181, 41911, 40714, 39583, 38513, 37500, 36538, 35625, 34756, 33928, 33139, 32386, 31666,
    30978, 30319, 29687, 29081, 28500, 27941, 27403, 26886, 26388, 25909, 25446, 25000, 24568, 23949, 23360,
    22800, 22265, 21755, 21268, 20802, 20357, 19930, 19520, 19127, 18750, 18387, 18037, 17701, 17378, 17065,
    16764, 16473, 16101, 15745, 15405, 15079, 14766, 14467, 14179, 13902, 13636, 13380, 13133, 12895, 12666,
    12445, 12179, 11924, 11632, 11445, 11220, 11003, 10795, 10594, 10401, 10215, 10035,
];

/// How a frame's bytes grow with its detail: bytes ∝ detail^this (a fit over
/// the bench's julia frames, whose detail spans 150×; within ±20 % there).
const DETAIL_POWER: f64 = 0.67;
/// Luma is sampled every this many rows and every [`COLUMN_STEP`] pixels: 0.9
/// ms a 1080p frame on CI's 2-core machine under load (the VP8 encode: 20–30 ms).
const ROW_STEP: usize = 4;
const COLUMN_STEP: usize = 2;
/// The newest frame's weight in the learned scale (in logarithms: a ratio):
/// half. Design; bench-25 (2026-11-29) measured the guard with it.
const SCALE_GAIN: f64 = 0.5;

/// One stream's estimate of what its next frame will cost.
#[derive(Debug, Default)]
pub struct Guard {
    /// Bytes per unit of (detail^power × model bits), learned from the frames encoded.
    scale: Option<f64>,
    /// The previous frame's luma samples, and this frame's measure.
    previous: Vec<u8>,
    samples: Vec<u8>,
    measure: f64,
}

impl Guard {
    /// Measures the frame about to be encoded (its luma plane, `stride` bytes a
    /// row, `width` pixels by `rows`), and returns the finest quantizer at which it is
    /// expected to take at most `cap` bytes (the finest, [`super::FINEST_QUANTIZER`]:
    /// no floor, nothing learned yet).
    pub fn floor(&mut self, luma: &[u8], stride: usize, width: usize, rows: usize, cap: f64) -> u32 {
        self.measure = self.sample(luma, stride, width, rows);
        let Some(scale) = self.scale else { return super::FINEST_QUANTIZER };
        let cost = scale * self.measure.powf(DETAIL_POWER);
        (super::FINEST_QUANTIZER..=super::MAX_QUANTIZER)
            .find(|&q| cost * model_bits(q) <= cap)
            .unwrap_or(super::MAX_QUANTIZER)
    }

    /// The frame measured last was encoded at `quantizer` into `bytes`
    /// (`key`: a key frame, coded alone: it teaches nothing of inter frames).
    pub fn encoded(&mut self, bytes: usize, quantizer: u8, key: bool) {
        std::mem::swap(&mut self.previous, &mut self.samples);
        if key || self.measure <= 0.0 {
            return;
        }
        let seen = bytes as f64 / (self.measure.powf(DETAIL_POWER) * model_bits(u32::from(quantizer)));
        // The newest frame by SCALE_GAIN, what came before by the rest (in logarithms: a ratio).
        let learned = |s: f64| ((1.0 - SCALE_GAIN) * s.ln() + SCALE_GAIN * seen.ln()).exp();
        self.scale = Some(self.scale.map_or(seen, learned));
    }

    /// Mean second difference (across and down: what a smooth ramp lacks and
    /// fine detail has) of the sampled luma, or its mean change from the previous
    /// frame's samples where that is less.
    fn sample(&mut self, luma: &[u8], stride: usize, width: usize, rows: usize) -> f64 {
        self.samples.clear();
        let (mut detail, mut change) = (0u64, 0u64);
        for r in (1..rows.saturating_sub(1)).step_by(ROW_STEP) {
            let line = |r: usize| &luma[r * stride..r * stride + width];
            let (above, row, below) = (line(r - 1), line(r), line(r + 1));
            for x in (1..width.saturating_sub(1)).step_by(COLUMN_STEP) {
                let p = i32::from(row[x]);
                let across = 2 * p - i32::from(row[x - 1]) - i32::from(row[x + 1]);
                let down = 2 * p - i32::from(above[x]) - i32::from(below[x]);
                detail += u64::from(across.unsigned_abs() + down.unsigned_abs());
                if let Some(&was) = self.previous.get(self.samples.len()) {
                    change += u64::from(row[x].abs_diff(was));
                }
                self.samples.push(row[x]);
            }
        }
        let n = self.samples.len().max(1) as f64;
        // The first frame (an encoder is made for one size): nothing to compare with.
        match self.previous.len() == self.samples.len() {
            true => (detail as f64 / n).min(change as f64 / n),
            false => detail as f64 / n,
        }
    }
}

/// VP8's model of an inter frame's bits at quantizer `q` (0–63), relative.
fn model_bits(q: u32) -> f64 {
    f64::from(INTER_BITS[usize::from(Q_INDEX[q.min(63) as usize])]) / 1e5
}
