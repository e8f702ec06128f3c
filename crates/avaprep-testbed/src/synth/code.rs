//! The burned-in frame code: a row of black/white blocks along the top edge.
//!
//! Layout (20 blocks of `width / 20` pixels, at least 8x8 so they survive compression):
//! a white and a black marker, 17 bits of the source frame index (MSB first; 131072 frames
//! cover 1802 s at 30 fps), and one even-parity bit. Only block centres are read, so blurred
//! edges do not matter.

const BLOCKS: u32 = 20;
const DATA_BITS: u32 = 17;
const WHITE: u8 = 235;
const BLACK: u8 = 16;
const GREY: u8 = 128;

/// Width of one code block for a frame of this width.
fn block_width(width: u32) -> u32 {
    width / BLOCKS
}

/// Rows at the top of the frame occupied by the code.
pub fn band_height(width: u32) -> u32 {
    (block_width(width) / 2).max(8)
}

/// Largest index the code can carry.
pub const MAX_CODE: u32 = (1 << DATA_BITS) - 1;

fn bits_of(index: u32) -> [bool; BLOCKS as usize] {
    let mut bits = [false; BLOCKS as usize];
    bits[0] = true;
    bits[1] = false;
    let mut parity = false;
    for b in 0..DATA_BITS {
        let bit = (index >> (DATA_BITS - 1 - b)) & 1 == 1;
        bits[2 + b as usize] = bit;
        parity ^= bit;
    }
    bits[BLOCKS as usize - 1] = parity;
    bits
}

/// Paints the code of `index` into the top rows of a luma plane.
pub fn draw_frame_code(luma: &mut [u8], width: u32, stride: usize, index: u32) {
    assert!(
        index <= MAX_CODE,
        "frame index {index} exceeds the frame code"
    );
    let bw = block_width(width) as usize;
    let bits = bits_of(index);
    for y in 0..band_height(width) as usize {
        let row = &mut luma[y * stride..y * stride + width as usize];
        row.fill(GREY);
        for (b, &bit) in bits.iter().enumerate() {
            row[b * bw..(b + 1) * bw].fill(if bit { WHITE } else { BLACK });
        }
    }
}

/// Paints the neutral chroma under the code band, so the band never looks like an actor.
pub fn clear_band_chroma(chroma: &mut [u8], width: u32, stride: usize) {
    let rows = band_height(width).div_ceil(2) as usize;
    let cols = width.div_ceil(2) as usize;
    for y in 0..rows {
        chroma[y * stride..y * stride + cols].fill(GREY);
    }
}

/// Reads the frame code from a decoded luma plane; `None` when markers or parity do not match
/// (not a synthetic frame, or the code was destroyed).
pub fn read_frame_code(luma: &[u8], width: u32, height: u32, stride: usize) -> Option<u32> {
    let bw = block_width(width) as usize;
    let bh = band_height(width) as usize;
    if bw < 8 || (height as usize) < bh || luma.len() < (bh - 1) * stride + width as usize {
        return None;
    }
    // Inner half of each block in both directions.
    let (x_in, y_in) = (bw / 4, bh / 4);
    let mut bits = [false; BLOCKS as usize];
    for (b, bit) in bits.iter_mut().enumerate() {
        let mut sum = 0u32;
        let mut n = 0u32;
        for y in y_in..bh - y_in {
            for x in b * bw + x_in..(b + 1) * bw - x_in {
                sum += luma[y * stride + x] as u32;
                n += 1;
            }
        }
        *bit = sum / n > GREY as u32;
    }
    let mut index = 0u32;
    for b in 0..DATA_BITS as usize {
        index = (index << 1) | bits[2 + b] as u32;
    }
    (bits_of(index) == bits).then_some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_round_trips_at_every_supported_width() {
        for &(w, h) in &[(160u32, 90u32), (176, 98), (500, 282), (1280, 720)] {
            let stride = w as usize + 32;
            let mut luma = vec![77u8; stride * h as usize];
            for index in [0, 1, 2, 1000, 54_059, MAX_CODE] {
                draw_frame_code(&mut luma, w, stride, index);
                assert_eq!(read_frame_code(&luma, w, h, stride), Some(index), "{w}x{h}");
            }
        }
    }

    #[test]
    fn garbage_is_rejected() {
        let luma = vec![128u8; 640 * 360];
        assert_eq!(read_frame_code(&luma, 640, 360, 640), None);
    }
}
