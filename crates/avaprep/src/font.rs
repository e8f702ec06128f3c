//! The one font avaprep draws text with, embedded at build time (see build.rs): the report's
//! labels on frames and the training curves look the same on every machine.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};
use image::{Rgb, RgbImage};

pub static SANS: &[u8] = include_bytes!(env!("AVAPREP_FONT_FILE"));

pub fn sans() -> FontRef<'static> {
    FontRef::try_from_slice(SANS).expect("the embedded font is a TrueType file (build.rs)")
}

/// Width and height in pixels of `text` set in one line at `size` pixels.
pub fn text_size(text: &str, size: f32) -> (u32, u32) {
    let font = sans();
    let scaled = font.as_scaled(PxScale::from(size));
    let width: f32 = text
        .chars()
        .map(|c| scaled.h_advance(font.glyph_id(c)))
        .sum();
    (width.ceil() as u32, scaled.height().ceil() as u32)
}

/// Draws `text` with its top-left corner at (`x`, `y`), blending `colour` by glyph coverage;
/// what falls outside the image is clipped.
pub fn draw_text(image: &mut RgbImage, x: i32, y: i32, size: f32, colour: Rgb<u8>, text: &str) {
    let font = sans();
    let scale = PxScale::from(size);
    let scaled = font.as_scaled(scale);
    let mut pen = x as f32;
    let baseline = y as f32 + scaled.ascent();
    for c in text.chars() {
        let id = font.glyph_id(c);
        let glyph = id.with_scale_and_position(scale, ab_glyph::point(pen, baseline));
        pen += scaled.h_advance(id);
        let Some(outline) = font.outline_glyph(glyph) else {
            continue;
        };
        let bounds = outline.px_bounds();
        outline.draw(|gx, gy, coverage| {
            let px = bounds.min.x as i32 + gx as i32;
            let py = bounds.min.y as i32 + gy as i32;
            if px < 0 || py < 0 || px >= image.width() as i32 || py >= image.height() as i32 {
                return;
            }
            let pixel = image.get_pixel_mut(px as u32, py as u32);
            for (channel, target) in pixel.0.iter_mut().zip(colour.0) {
                let blended = f32::from(*channel) * (1.0 - coverage) + f32::from(target) * coverage;
                *channel = blended.round() as u8;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_drawn_inside_its_measured_box() {
        let (w, h) = text_size("move left 0.87", 16.0);
        assert!(w > 60 && h >= 16, "{w}x{h}");
        let mut image = RgbImage::from_pixel(w + 20, h + 20, Rgb([255, 255, 255]));
        draw_text(&mut image, 10, 10, 16.0, Rgb([0, 0, 0]), "move left 0.87");
        let dark: Vec<(u32, u32)> = image
            .enumerate_pixels()
            .filter(|(_, _, p)| p.0[0] < 128)
            .map(|(x, y, _)| (x, y))
            .collect();
        assert!(dark.len() > 100, "{} dark pixels", dark.len());
        assert!(
            dark.iter()
                .all(|&(x, y)| (9..=w + 11).contains(&x) && (9..=h + 11).contains(&y)),
            "ink outside the measured box"
        );
    }
}
