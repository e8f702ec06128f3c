//! Boxes and their labels drawn on a frame.

use image::{Rgb, RgbImage};

use crate::annotations::NormBox;
use crate::font;

/// The ground truth's colour: neutral, so it never reads as a coloured actor or a class.
pub const TRUTH: Rgb<u8> = Rgb([255, 255, 255]);

/// Detection colours by class (the class id picks one; neighbours differ).
const PALETTE: [Rgb<u8>; 10] = [
    Rgb([31, 119, 180]),
    Rgb([255, 127, 14]),
    Rgb([44, 160, 44]),
    Rgb([214, 39, 40]),
    Rgb([148, 103, 189]),
    Rgb([140, 86, 75]),
    Rgb([227, 119, 194]),
    Rgb([188, 189, 34]),
    Rgb([23, 190, 207]),
    Rgb([255, 215, 0]),
];

pub fn class_colour(id: u16) -> Rgb<u8> {
    PALETTE[usize::from(id) % PALETTE.len()]
}

/// A box in pixels, `[x0, x1) x [y0, y1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelRect {
    pub x0: u32,
    pub y0: u32,
    pub x1: u32,
    pub y1: u32,
}

impl PixelRect {
    /// The pixels a normalised box covers on a `width` x `height` image.
    pub fn of(bbox: &NormBox, width: u32, height: u32) -> Self {
        let scale = |v: f32, size: u32| ((v * size as f32).round() as u32).min(size);
        let x0 = scale(bbox.x1(), width);
        let y0 = scale(bbox.y1(), height);
        PixelRect {
            x0,
            y0,
            x1: scale(bbox.x2(), width).max(x0 + 1).min(width),
            y1: scale(bbox.y2(), height).max(y0 + 1).min(height),
        }
    }
}

/// Text height for labels: readable on a 240p frame, not crowding a 720p one.
pub fn label_size(height: u32) -> f32 {
    (height as f32 / 26.0).clamp(11.0, 22.0)
}

/// The outline of `rect`, `thickness` pixels wide, inside the rectangle.
pub fn outline(image: &mut RgbImage, rect: PixelRect, thickness: u32, colour: Rgb<u8>) {
    let (w, h) = image.dimensions();
    for y in rect.y0..rect.y1.min(h) {
        for x in rect.x0..rect.x1.min(w) {
            let edge = x < rect.x0 + thickness
                || x + thickness >= rect.x1
                || y < rect.y0 + thickness
                || y + thickness >= rect.y1;
            if edge {
                image.put_pixel(x, y, colour);
            }
        }
    }
}

/// `lines` of text on a filled tag of `colour` just above `rect` (below it when there is no room
/// above, inside its top when there is neither, so the tag hides its actor only when it must), in
/// black or white, whichever reads on the colour.
pub fn tag(image: &mut RgbImage, rect: PixelRect, lines: &[String], colour: Rgb<u8>) {
    let size = label_size(image.height());
    let pad = 2;
    let line_height = font::text_size("Ag", size).1;
    let width = lines
        .iter()
        .map(|line| font::text_size(line, size).0)
        .max()
        .unwrap_or(0)
        + 2 * pad;
    let height = line_height * lines.len() as u32 + 2 * pad;
    let (w, h) = image.dimensions();
    let top = if rect.y0 >= height {
        rect.y0 - height
    } else if rect.y1 + height <= h {
        rect.y1
    } else {
        rect.y0
    };
    for y in top..(top + height).min(h) {
        for x in rect.x0..(rect.x0 + width).min(w) {
            image.put_pixel(x, y, colour);
        }
    }
    let [r, g, b] = colour.0.map(f32::from);
    let ink = match 0.299 * r + 0.587 * g + 0.114 * b > 140.0 {
        true => Rgb([0, 0, 0]),
        false => Rgb([255, 255, 255]),
    };
    for (i, line) in lines.iter().enumerate() {
        let y = top + pad + line_height * i as u32;
        font::draw_text(image, (rect.x0 + pad) as i32, y as i32, size, ink, line);
    }
}
