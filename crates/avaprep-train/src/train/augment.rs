//! Spatial augmentation: where each clip is scaled, cropped and flipped, and where its boxes go.
//!
//! Train (PySlowFast's AVA recipe, scaled to the crop): the short side is drawn as
//! `1 / U(1 / max, 1 / min)` with `[min, max] = crop * [256, 320] / 224`, then a random square
//! crop and a horizontal flip with p = 0.5. Evaluation: the short side is scaled to the low end
//! of the training scales, `crop * 256 / 224` (256 for a 224 crop, PySlowFast's Kinetics test
//! size; its AVA test transform uses the crop size, below every training scale, which cost the
//! tiny model 2 points of val mAP), and the whole frame is kept, so no person is cut away.
//! Boxes are in continuous pixel coordinates of the output (0..=W), clipped to it.

use rand::Rng;

use avaprep::annotations::NormBox;

/// Where one clip's pixels come from: resize the frame to `resized`, cut `crop` out of it
/// (x, y, w, h in resized pixels), then mirror when `flip`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Geometry {
    pub resized: (u32, u32),
    pub crop: (u32, u32, u32, u32),
    pub flip: bool,
}

/// `(w, h)` with the short side `short`, the long side rounded to keep the aspect ratio.
pub fn resized_size(width: u32, height: u32, short: u32) -> (u32, u32) {
    let scale = f64::from(short) / f64::from(width.min(height));
    let long = |side: u32| ((f64::from(side) * scale).round() as u32).max(short);
    if width <= height {
        (short, long(height))
    } else {
        (long(width), short)
    }
}

/// A random training geometry for a `width` x `height` frame; `hflip` allows the mirror (the
/// coin is tossed either way, so the scale and crop draws do not depend on it).
pub fn train_geometry(
    rng: &mut impl Rng,
    width: u32,
    height: u32,
    crop: u32,
    hflip: bool,
) -> Geometry {
    let (lo, hi) = (
        f64::from(crop) * 256.0 / 224.0,
        f64::from(crop) * 320.0 / 224.0,
    );
    let short = (1.0 / rng.random_range(1.0 / hi..=1.0 / lo)).round() as u32;
    let resized = resized_size(width, height, short.max(crop));
    let x = rng.random_range(0..=resized.0 - crop);
    let y = rng.random_range(0..=resized.1 - crop);
    Geometry {
        resized,
        crop: (x, y, crop, crop),
        flip: rng.random_bool(0.5) && hflip,
    }
}

/// The short side frames are scaled to for evaluation with a `crop` training crop: the smallest
/// training scale.
pub fn eval_short_side(crop: u32) -> u32 {
    crop * 256 / 224
}

/// The evaluation geometry: short side = `short`, no crop, no flip.
pub fn eval_geometry(width: u32, height: u32, short: u32) -> Geometry {
    let resized = resized_size(width, height, short);
    Geometry {
        resized,
        crop: (0, 0, resized.0, resized.1),
        flip: false,
    }
}

impl Geometry {
    /// The output size `(w, h)`.
    pub fn output(&self) -> (u32, u32) {
        (self.crop.2, self.crop.3)
    }

    /// The box in output pixels `[x1, y1, x2, y2]`: scaled, shifted by the crop, clipped to the
    /// output, then mirrored. A box wholly outside the crop becomes degenerate (zero width or
    /// height) and is kept, as PySlowFast keeps it.
    pub fn transform_box(&self, b: &NormBox) -> [f32; 4] {
        let (rw, rh) = (self.resized.0 as f32, self.resized.1 as f32);
        let (cx, cy, cw, ch) = (
            self.crop.0 as f32,
            self.crop.1 as f32,
            self.crop.2 as f32,
            self.crop.3 as f32,
        );
        let x = |v: f32| (v * rw - cx).clamp(0.0, cw);
        let y = |v: f32| (v * rh - cy).clamp(0.0, ch);
        let (x1, x2) = (x(b.x1()), x(b.x2()));
        let (x1, x2) = if self.flip {
            (cw - x2, cw - x1)
        } else {
            (x1, x2)
        };
        [x1, y(b.y1()), x2, y(b.y2())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn nb(x1: f32, y1: f32, x2: f32, y2: f32) -> NormBox {
        NormBox::new(x1, y1, x2, y2).unwrap()
    }

    fn assert_close(a: [f32; 4], b: [f32; 4]) {
        assert!(
            a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4),
            "{a:?} != {b:?}"
        );
    }

    #[test]
    fn resize_keeps_the_aspect_ratio() {
        assert_eq!(resized_size(854, 480, 112), (199, 112));
        assert_eq!(resized_size(480, 854, 112), (112, 199));
        assert_eq!(resized_size(100, 100, 64), (64, 64));
    }

    #[test]
    fn crop_shifts_and_clips_boxes() {
        let g = Geometry {
            resized: (200, 100),
            crop: (50, 10, 80, 80),
            flip: false,
        };
        // x: 0.2*200 - 50 = -10 -> 0; 0.5*200 - 50 = 50. y: 0.3*100 - 10 = 20; 0.95*100 - 10 = 85 -> 80.
        assert_close(
            g.transform_box(&nb(0.2, 0.3, 0.5, 0.95)),
            [0.0, 20.0, 50.0, 80.0],
        );
        // Wholly right of the crop: degenerate at the edge.
        assert_close(
            g.transform_box(&nb(0.9, 0.3, 1.0, 0.5)),
            [80.0, 20.0, 80.0, 40.0],
        );
    }

    #[test]
    fn flip_mirrors_boxes_inside_the_crop() {
        let g = Geometry {
            resized: (200, 100),
            crop: (50, 10, 80, 80),
            flip: true,
        };
        // Unflipped x: 10..30 -> mirrored 80-30 .. 80-10.
        assert_close(
            g.transform_box(&nb(0.3, 0.3, 0.4, 0.5)),
            [50.0, 20.0, 70.0, 40.0],
        );
    }

    #[test]
    fn eval_geometry_keeps_the_whole_frame() {
        let g = eval_geometry(640, 360, 112);
        assert_eq!(g.output(), (199, 112));
        assert_close(
            g.transform_box(&nb(0.0, 0.0, 1.0, 1.0)),
            [0.0, 0.0, 199.0, 112.0],
        );
    }

    #[test]
    fn train_scale_jitter_follows_the_recipe_scaled_to_the_crop() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let (mut shorts, mut flips) = (Vec::new(), 0);
        for _ in 0..500 {
            let g = train_geometry(&mut rng, 640, 360, 112, true);
            shorts.push(g.resized.1);
            flips += usize::from(g.flip);
            assert_eq!(g.output(), (112, 112));
            assert!(g.crop.0 + 112 <= g.resized.0 && g.crop.1 + 112 <= g.resized.1);
        }
        assert!(
            shorts.iter().all(|&s| (128..=160).contains(&s)),
            "crop * 256/224 .. crop * 320/224"
        );
        assert!(shorts.contains(&128) && shorts.contains(&160));
        assert!((200..300).contains(&flips));
    }
}
