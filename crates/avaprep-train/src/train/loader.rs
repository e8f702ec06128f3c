//! The parallel clip loader: JPEG decode, SIMD resize and crop, flip and (for a network on the
//! CPU) normalisation on a rayon pool, batches produced by one thread into a bounded channel
//! ahead of the training step. For a GPU, clips stay bytes until they reach it, where
//! [`normalise`] makes them the network's input: a quarter of what f32 would be to copy.
//!
//! Deterministic for a seed: the order of an epoch and every clip's augmentation are functions
//! of (seed, epoch, clip), never of which thread ran first, so the same batches arrive in the
//! same order for any thread count, and a resumed run sees what the uninterrupted one saw.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, bounded};
use fast_image_resize::images::{TypedImage, TypedImageRef};
use fast_image_resize::pixels::U8x3;
use fast_image_resize::{FilterType, ImageView, ResizeAlg, ResizeOptions, Resizer};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use tch::{Device, Kind, Tensor};
use zune_jpeg::JpegDecoder;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

use super::DataError;
use super::augment::{Geometry, eval_geometry, eval_short_side, train_geometry};
use super::dataset::ClipSample;
use super::model::upload;
use avaprep::trainer_settings::TrainConfig;

/// PySlowFast's `DATA.MEAN` / `DATA.STD`, applied to RGB in [0, 1].
const MEAN: f32 = 0.45;
const STD: f32 = 0.225;

/// A batch ready to become tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// `[B, 3, T, H, W]`; evaluation batches are padded to the largest frame.
    pub clips: Pixels,
    pub shape: [i64; 5],
    /// Each clip's own `(width, height)`: what lies beyond is padding.
    pub sizes: Vec<(i64, i64)>,
    /// `(batch index, x1, y1, x2, y2)` in input pixels.
    pub boxes: Vec<[f32; 5]>,
    /// `[K, num_classes]`, 0 or 1.
    pub targets: Vec<f32>,
    /// For each box: the sample it belongs to and its position among that sample's boxes.
    pub owners: Vec<(usize, usize)>,
}

/// A batch's pixels, as [`PixelFormat`] asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Pixels {
    /// PySlowFast's normalisation, the padding zero (the mean colour).
    Normalised(Vec<f32>),
    /// RGB bytes, for [`normalise`].
    Bytes(Vec<u8>),
}

/// Where clips are normalised: by the loader's threads alongside the training step, for a
/// network on the CPU; by the GPU, which takes a quarter of the bytes to copy and normalises
/// them in a fraction of a millisecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelFormat {
    Normalised,
    Bytes,
}

impl PixelFormat {
    pub fn for_device(device: Device) -> Self {
        if device == Device::Cpu {
            Self::Normalised
        } else {
            Self::Bytes
        }
    }
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
    pub pixels: PixelFormat,
}

impl LoaderSpec {
    /// The loader a training configuration asks for, for `num_classes` targets and a network
    /// on `device`.
    pub fn of(config: &TrainConfig, num_classes: usize, device: Device) -> Self {
        Self {
            crop: config.crop_size,
            num_classes,
            threads: config.threads,
            prefetch: config.prefetch,
            pixels: PixelFormat::for_device(device),
        }
    }
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

/// Decodes and assembles one batch (runs inside the loader's pool): every frame of every clip
/// is decoded and resampled in parallel, then each clip is laid out in its place in the batch,
/// normalised there if the spec asks.
pub fn load_batch(
    samples: &[ClipSample],
    members: &[usize],
    augment: Augment,
    spec: &LoaderSpec,
) -> Result<Batch, DataError> {
    let geometries: Vec<Geometry> = members
        .iter()
        .map(|&i| geometry_of(&samples[i], i, augment, spec.crop))
        .collect();
    let frames = samples[members[0]].frames.len();
    let pixels: Vec<Vec<u8>> = (0..members.len() * frames)
        .into_par_iter()
        .map(|job| {
            let (b, t) = (job / frames, job % frames);
            let sample = &samples[members[b]];
            load_frame(&sample.frames[t], sample.size, &geometries[b])
        })
        .collect::<Result<_, DataError>>()?;
    let width = geometries.iter().map(|g| g.output().0).max().unwrap_or(0);
    let height = geometries.iter().map(|g| g.output().1).max().unwrap_or(0);
    let padded = (width, height);
    let clips = match spec.pixels {
        PixelFormat::Normalised => {
            let table = normalised();
            let map = |v: u8| table[usize::from(v)];
            Pixels::Normalised(lay_out_clips(&pixels, &geometries, padded, map))
        }
        PixelFormat::Bytes => Pixels::Bytes(lay_out_clips(&pixels, &geometries, padded, |v| v)),
    };
    let mut batch = Batch {
        clips,
        shape: [
            members.len() as i64,
            3,
            frames as i64,
            height as i64,
            width as i64,
        ],
        sizes: geometries
            .iter()
            .map(|g| (i64::from(g.output().0), i64::from(g.output().1)))
            .collect(),
        boxes: Vec::new(),
        targets: Vec::new(),
        owners: Vec::new(),
    };
    for (b, geometry) in geometries.iter().enumerate() {
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
        Augment::Eval => eval_geometry(w, h, eval_short_side(crop)),
    }
}

/// `(v / 255 - MEAN) / STD` for every byte value.
fn normalised() -> &'static [f32; 256] {
    static TABLE: std::sync::OnceLock<[f32; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| std::array::from_fn(|v| (v as f32 / 255.0 - MEAN) / STD))
}

/// The clips of a batch, each of `frames.len() / geometries.len()` frames, laid out as
/// `[B, 3, T, H, W]` for the batch's `padded` size `(W, H)`, each pixel value through `map`.
/// The padding is `T::default()`, zero.
fn lay_out_clips<T: Copy + Default + Send + Sync>(
    frames: &[Vec<u8>],
    geometries: &[Geometry],
    padded: (u32, u32),
    map: impl Fn(u8) -> T + Sync,
) -> Vec<T> {
    let frames_per_clip = frames.len() / geometries.len();
    let clip_len = 3 * frames_per_clip * (padded.0 * padded.1) as usize;
    // Zeroed memory comes from the system already zero: the padding costs nothing.
    let mut clips = vec![T::default(); geometries.len() * clip_len];
    clips
        .par_chunks_mut(clip_len)
        .zip(frames.par_chunks(frames_per_clip))
        .zip(geometries.par_iter())
        .for_each(|((out, rgb), geometry)| write_clip(out, rgb, geometry, padded, &map));
    clips
}

/// A batch's clips as the network takes them, on the device of `bytes` (`[B, 3, T, H, W]`):
/// PySlowFast's `(v / 255 - MEAN) / STD` in f32, and each clip's padding beyond its own
/// `(width, height)` in `sizes` zero, the mean colour: the loader's table, to the bit.
pub fn normalise(bytes: &Tensor, sizes: &[(i64, i64)]) -> Tensor {
    let mut clips = bytes.to_kind(Kind::Float);
    // Divisors on the clips' device: CUDA turns a division by a host scalar into a product with
    // its reciprocal, an ulp away from the formula.
    let divisor = |value: f32| upload(&Tensor::from(value), clips.device());
    let (by_255, by_std) = (divisor(255.0), divisor(STD));
    let _ = clips.f_div_(&by_255);
    let _ = clips.f_sub_scalar_(f64::from(MEAN));
    let _ = clips.f_div_(&by_std);
    let (height, width) = (clips.size()[3], clips.size()[4]);
    for (index, &(w, h)) in sizes.iter().enumerate() {
        let clip = clips.get(index as i64);
        if h < height {
            let _ = clip.narrow(2, h, height - h).f_zero_();
        }
        if w < width {
            let _ = clip.narrow(3, w, width - w).f_zero_();
        }
    }
    clips
}

/// Writes one clip's RGB frames (each the geometry's output size) into `out`, laid out as
/// `[3, T, H, W]` for the batch's `padded` size `(W, H)`, mirrored when the geometry flips.
fn write_clip<T: Copy>(
    out: &mut [T],
    frames: &[Vec<u8>],
    geometry: &Geometry,
    padded: (u32, u32),
    map: impl Fn(u8) -> T,
) {
    let (w, h) = geometry.output();
    let (w, h) = (w as usize, h as usize);
    let (pw, ph) = (padded.0 as usize, padded.1 as usize);
    let t_len = frames.len();
    for (t, rgb) in frames.iter().enumerate() {
        for (y, row) in rgb.chunks_exact(w * 3).take(h).enumerate() {
            let at = |c: usize| ((c * t_len + t) * ph + y) * pw;
            let (r, g, b) = (at(0), at(1), at(2));
            for (x, pixel) in row.chunks_exact(3).enumerate() {
                let dx = if geometry.flip { w - 1 - x } else { x };
                out[r + dx] = map(pixel[0]);
                out[g + dx] = map(pixel[1]);
                out[b + dx] = map(pixel[2]);
            }
        }
    }
}

/// Buffers each loader thread reuses from frame to frame, so decoding allocates nothing.
struct Scratch {
    jpeg: Vec<u8>,
    rgb: Vec<u8>,
    resizer: Resizer,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch {
        jpeg: Vec::new(),
        rgb: Vec::new(),
        resizer: Resizer::new(),
    });
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
    SCRATCH.with_borrow_mut(|scratch| {
        let Scratch { jpeg, rgb, resizer } = scratch;
        jpeg.clear();
        std::fs::File::open(path)
            .and_then(|mut file| file.read_to_end(jpeg))
            .map_err(|source| DataError::io(path, source))?;
        let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
        let mut decoder = JpegDecoder::new_with_options(ZCursor::new(&jpeg[..]), options);
        decoder.decode_headers().map_err(|e| bad(e.to_string()))?;
        let (w, h) = decoder
            .dimensions()
            .map(|(w, h)| (w as u32, h as u32))
            .ok_or_else(|| bad("no image size".into()))?;
        if (w, h) != expected {
            return Err(bad(format!(
                "frame is {w}x{h}, the index says {}x{}",
                expected.0, expected.1
            )));
        }
        rgb.resize(w as usize * h as usize * 3, 0);
        decoder.decode_into(rgb).map_err(|e| bad(e.to_string()))?;
        let source =
            TypedImageRef::<U8x3>::from_buffer(w, h, rgb).map_err(|e| bad(e.to_string()))?;
        resample(resizer, &source, geometry).map_err(bad)
    })
}

/// The geometry's crop of `source`, resampled to the output size. Typed to RGB8: the untyped
/// `resize` instantiates the resizer for every pixel type, which was most of the trainer's
/// compile time.
fn resample(
    resizer: &mut Resizer,
    source: &TypedImageRef<U8x3>,
    geometry: &Geometry,
) -> Result<Vec<u8>, String> {
    let (w, h) = (source.width(), source.height());
    let (out_w, out_h) = geometry.output();
    let mut pixels = vec![0u8; out_w as usize * out_h as usize * 3];
    let mut target =
        TypedImage::<U8x3>::from_buffer(out_w, out_h, &mut pixels).map_err(|e| e.to_string())?;
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
    resizer
        .resize_typed(source, &mut target, &options)
        .map_err(|e| e.to_string())?;
    Ok(pixels)
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
    fn clips_are_planar_mirrored_and_padded() {
        // Two frames of 2x1 pixels in a batch padded to 3x2.
        let frames = vec![vec![0, 255, 10, 20, 30, 40], vec![1, 2, 3, 4, 5, 6]];
        let geometry = |flip| Geometry {
            resized: (2, 1),
            crop: (0, 0, 2, 1),
            flip,
        };
        let mut out = vec![0; 3 * 2 * 6];
        write_clip(&mut out, &frames, &geometry(false), (3, 2), |v| v);
        // [channel][frame][row][column]: red of frame 0, then red of frame 1, ...
        assert_eq!(&out[..6], &[0, 20, 0, 0, 0, 0]);
        assert_eq!(&out[6..12], &[1, 4, 0, 0, 0, 0]);
        assert_eq!(&out[12..14], &[255, 30]);
        assert_eq!(&out[30..32], &[3, 6]);
        let mut mirrored = vec![0; 3 * 2 * 6];
        write_clip(&mut mirrored, &frames, &geometry(true), (3, 2), |v| v);
        assert_eq!(&mirrored[..3], &[20, 0, 0]);
    }

    /// Every byte value becomes exactly what PySlowFast's formula gives in f32, and a clip's
    /// padding becomes zero while a clip that fills the batch keeps all its pixels.
    #[test]
    fn normalisation_is_pyslowfasts_and_zeroes_the_padding() {
        let values: Vec<u8> = (0..=255).collect();
        // Two clips of one frame, 16 rows x 16 columns; the second is 10 wide and 12 high.
        let bytes = Tensor::from_slice(&[values.clone(), values].concat())
            .view([2, 1, 1, 16, 16])
            .repeat([1, 3, 1, 1, 1]);
        let clips = normalise(&bytes, &[(16, 16), (10, 12)]);
        let first = Vec::<f32>::try_from(clips.get(0).get(2).flatten(0, -1)).unwrap();
        for (v, got) in first.iter().enumerate() {
            assert_eq!(*got, (v as f32 / 255.0 - MEAN) / STD, "byte {v}");
        }
        let second = clips.get(1);
        let inside = Vec::<f32>::try_from(
            second
                .get(1)
                .get(0)
                .narrow(0, 0, 12)
                .narrow(1, 0, 10)
                .flatten(0, -1),
        )
        .unwrap();
        assert!(inside.iter().all(|&v| v != 0.0));
        assert_eq!(second.narrow(2, 12, 4).abs().max().double_value(&[]), 0.0);
        assert_eq!(second.narrow(3, 10, 6).abs().max().double_value(&[]), 0.0);
    }
}
