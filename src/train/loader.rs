//! The parallel clip loader: JPEG decode, SIMD resize and crop, flip and normalisation on a
//! rayon pool, batches produced by one thread into a bounded channel ahead of the training step.
//!
//! Deterministic for a seed: the order of an epoch and every clip's augmentation are functions
//! of (seed, epoch, clip), never of which thread ran first, so the same batches arrive in the
//! same order for any thread count, and a resumed run sees what the uninterrupted one saw.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, bounded};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer, images::Image};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::DataError;
use super::augment::{Geometry, eval_geometry, train_geometry};
use super::dataset::ClipSample;

/// PySlowFast's `DATA.MEAN` / `DATA.STD`, applied to RGB in [0, 1].
const MEAN: f32 = 0.45;
const STD: f32 = 0.225;

/// A batch ready to become tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// `[B, 3, T, H, W]`, normalised; evaluation batches are zero-padded to the largest frame.
    pub clips: Vec<f32>,
    pub shape: [i64; 5],
    /// `(batch index, x1, y1, x2, y2)` in input pixels.
    pub boxes: Vec<[f32; 5]>,
    /// `[K, num_classes]`, 0 or 1.
    pub targets: Vec<f32>,
    /// For each box: the sample it belongs to and its position among that sample's boxes.
    pub owners: Vec<(usize, usize)>,
}

/// How clips are transformed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Augment {
    /// Random scale, crop and (when `hflip`) flip, drawn from (seed, epoch, sample).
    Train {
        seed: u64,
        epoch: usize,
        hflip: bool,
    },
    /// Short side = crop size, whole frame.
    Eval,
}

#[derive(Debug, Clone, Copy)]
pub struct LoaderSpec {
    pub crop: u32,
    pub num_classes: usize,
    /// Pool size; 0 uses every core.
    pub threads: usize,
    /// Batches waiting in the channel.
    pub prefetch: usize,
}

/// A seed for one (seed, epoch, item) triple: splitmix64 over the three, so neighbouring
/// triples get unrelated streams.
pub fn mix_seed(seed: u64, epoch: u64, item: u64) -> u64 {
    let mut z = seed;
    for part in [epoch, item] {
        z = splitmix(z ^ splitmix(part.wrapping_add(0x9e37_79b9_7f4a_7c15)));
    }
    z
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The training batches of `epoch`: a permutation of the samples drawn from (seed, epoch), cut
/// into batches; the last may be short.
pub fn train_batches(
    samples: usize,
    batch_size: usize,
    seed: u64,
    epoch: usize,
) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..samples).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(mix_seed(
        seed,
        epoch as u64,
        u64::MAX,
    )));
    order.chunks(batch_size).map(<[usize]>::to_vec).collect()
}

/// Evaluation batches: the samples in order.
pub fn eval_batches(samples: usize, batch_size: usize) -> Vec<Vec<usize>> {
    let order: Vec<usize> = (0..samples).collect();
    order.chunks(batch_size).map(<[usize]>::to_vec).collect()
}

/// Batches produced in the background; iterate to receive them in order.
pub struct Loader {
    receiver: Option<Receiver<Result<Batch, DataError>>>,
    producer: Option<JoinHandle<()>>,
}

impl Loader {
    pub fn spawn(
        samples: Arc<Vec<ClipSample>>,
        batches: Vec<Vec<usize>>,
        augment: Augment,
        spec: LoaderSpec,
    ) -> Self {
        let (sender, receiver) = bounded(spec.prefetch.max(1));
        let producer = std::thread::spawn(move || {
            let pool = match rayon::ThreadPoolBuilder::new()
                .num_threads(spec.threads)
                .build()
            {
                Ok(pool) => pool,
                Err(error) => {
                    let _ = sender.send(Err(DataError::Pool(error.to_string())));
                    return;
                }
            };
            for members in batches {
                let batch = pool.install(|| load_batch(&samples, &members, augment, &spec));
                let failed = batch.is_err();
                // A closed channel means the consumer stopped early (cancel, error): stop too.
                if sender.send(batch).is_err() || failed {
                    return;
                }
            }
        });
        Self {
            receiver: Some(receiver),
            producer: Some(producer),
        }
    }
}

impl Iterator for Loader {
    type Item = Result<Batch, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.receiver.as_ref()?.recv().ok()
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        // Closing the channel first unblocks a producer waiting to send.
        self.receiver.take();
        if let Some(producer) = self.producer.take() {
            let _ = producer.join();
        }
    }
}

/// Decodes and assembles one batch (runs inside the loader's pool).
pub fn load_batch(
    samples: &[ClipSample],
    members: &[usize],
    augment: Augment,
    spec: &LoaderSpec,
) -> Result<Batch, DataError> {
    let clips: Vec<(Vec<f32>, Geometry)> = members
        .par_iter()
        .map(|&i| {
            let sample = &samples[i];
            let geometry = geometry_of(sample, i, augment, spec.crop);
            Ok((load_clip(sample, &geometry)?, geometry))
        })
        .collect::<Result<_, DataError>>()?;
    let frames = samples[members[0]].frames.len();
    let width = clips.iter().map(|c| c.1.output().0).max().unwrap_or(0);
    let height = clips.iter().map(|c| c.1.output().1).max().unwrap_or(0);
    let mut batch = Batch {
        clips: Vec::new(),
        shape: [
            members.len() as i64,
            3,
            frames as i64,
            height as i64,
            width as i64,
        ],
        boxes: Vec::new(),
        targets: Vec::new(),
        owners: Vec::new(),
    };
    for (b, (pixels, geometry)) in clips.iter().enumerate() {
        pad_into(
            &mut batch.clips,
            pixels,
            3 * frames,
            geometry.output(),
            (width, height),
        );
        let sample = &samples[members[b]];
        for (j, labelled) in sample.boxes.iter().enumerate() {
            let [x1, y1, x2, y2] = geometry.transform_box(&labelled.bbox);
            batch.boxes.push([b as f32, x1, y1, x2, y2]);
            let mut target = vec![0.0; spec.num_classes];
            for &class in &labelled.classes {
                target[class] = 1.0;
            }
            batch.targets.extend(target);
            batch.owners.push((members[b], j));
        }
    }
    Ok(batch)
}

fn geometry_of(sample: &ClipSample, index: usize, augment: Augment, crop: u32) -> Geometry {
    let (w, h) = sample.size;
    match augment {
        Augment::Train { seed, epoch, hflip } => {
            let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(seed, epoch as u64, index as u64));
            train_geometry(&mut rng, w, h, crop, hflip)
        }
        Augment::Eval => eval_geometry(w, h, crop),
    }
}

/// Appends `planes` planes of `size` to `out`, each zero-padded at the right and bottom to
/// `padded` (zero is the mean colour after normalisation).
fn pad_into(
    out: &mut Vec<f32>,
    pixels: &[f32],
    planes: usize,
    size: (u32, u32),
    padded: (u32, u32),
) {
    let (w, h) = (size.0 as usize, size.1 as usize);
    let (pw, ph) = (padded.0 as usize, padded.1 as usize);
    if (w, h) == (pw, ph) {
        out.extend_from_slice(pixels);
        return;
    }
    for plane in pixels.chunks(w * h).take(planes) {
        for row in plane.chunks(w) {
            out.extend_from_slice(row);
            out.extend(std::iter::repeat_n(0.0, pw - w));
        }
        out.extend(std::iter::repeat_n(0.0, (ph - h) * pw));
    }
}

/// One clip as `[3, T, h, w]` floats.
pub fn load_clip(sample: &ClipSample, geometry: &Geometry) -> Result<Vec<f32>, DataError> {
    let frames: Vec<Vec<u8>> = sample
        .frames
        .par_iter()
        .map(|path| load_frame(path, sample.size, geometry))
        .collect::<Result<_, DataError>>()?;
    let (w, h) = geometry.output();
    let plane = (w * h) as usize;
    let t = frames.len();
    let mut out = vec![0.0f32; 3 * t * plane];
    for (ti, rgb) in frames.iter().enumerate() {
        for c in 0..3 {
            let dst = &mut out[(c * t + ti) * plane..][..plane];
            write_channel(dst, rgb, c, w as usize, geometry.flip);
        }
    }
    Ok(out)
}

fn write_channel(dst: &mut [f32], rgb: &[u8], channel: usize, width: usize, flip: bool) {
    for (y, row) in dst.chunks_mut(width).enumerate() {
        let src = &rgb[y * width * 3..][..width * 3];
        for (x, value) in row.iter_mut().enumerate() {
            let sx = if flip { width - 1 - x } else { x };
            *value = (f32::from(src[sx * 3 + channel]) / 255.0 - MEAN) / STD;
        }
    }
}

/// Decodes one JPEG and resamples the geometry's crop of it to the output size, as RGB8.
fn load_frame(
    path: &Path,
    expected: (u32, u32),
    geometry: &Geometry,
) -> Result<Vec<u8>, DataError> {
    let bad = |message: String| DataError::Image {
        path: path.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|source| DataError::io(path, source))?;
    let image = image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg)
        .map_err(|e| bad(e.to_string()))?
        .into_rgb8();
    let (w, h) = image.dimensions();
    if (w, h) != expected {
        return Err(bad(format!(
            "frame is {w}x{h}, the index says {}x{}",
            expected.0, expected.1
        )));
    }
    let source = Image::from_vec_u8(w, h, image.into_raw(), PixelType::U8x3)
        .map_err(|e| bad(e.to_string()))?;
    let (out_w, out_h) = geometry.output();
    let mut target = Image::new(out_w, out_h, PixelType::U8x3);
    let (sx, sy) = (
        f64::from(w) / f64::from(geometry.resized.0),
        f64::from(h) / f64::from(geometry.resized.1),
    );
    let (cx, cy, cw, ch) = geometry.crop;
    // Resampling only the crop's source rectangle equals resizing the frame and cropping it. A
    // crop flush with the resized frame's edge can overshoot the source by a rounding error,
    // which the resizer refuses: clamp it to the frame.
    let (left, top) = (f64::from(cx) * sx, f64::from(cy) * sy);
    let options = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
        .crop(
            left,
            top,
            (f64::from(cw) * sx).min(f64::from(w) - left),
            (f64::from(ch) * sy).min(f64::from(h) - top),
        );
    Resizer::new()
        .resize(&source, &mut target, &options)
        .map_err(|e| bad(e.to_string()))?;
    Ok(target.into_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_order_depends_on_seed_and_epoch_only() {
        let a = train_batches(50, 8, 3, 1);
        assert_eq!(a, train_batches(50, 8, 3, 1));
        assert_ne!(a, train_batches(50, 8, 3, 2));
        assert_ne!(a, train_batches(50, 8, 4, 1));
        assert_eq!(a.len(), 7);
        let mut all: Vec<usize> = a.concat();
        all.sort_unstable();
        assert_eq!(all, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn padding_extends_rows_and_planes_with_zeros() {
        let mut out = Vec::new();
        pad_into(&mut out, &[1.0, 2.0, 3.0, 4.0], 1, (2, 2), (3, 3));
        assert_eq!(out, vec![1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0]);
    }
}
