//! A video's display rotation (its display matrix), applied as the ffmpeg CLI's autorotate does:
//! frames are written upright, and `--height` is the upright frame's height.

use ffmpeg_next as ff;

/// The quarter turns the ffmpeg CLI applies (`transpose=clock`, `hflip,vflip`,
/// `transpose=cclock`); other angles are left as stored, as a player without rotation would show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rotation {
    #[default]
    None,
    Clockwise,
    HalfTurn,
    Counterclockwise,
}

impl Rotation {
    /// From the nine 16.16/2.30 fixed-point numbers of a display matrix, by the rule of the
    /// ffmpeg CLI: theta = -round(av_display_rotation_get), taken modulo 360.
    pub fn from_display_matrix(matrix: &[i32; 9]) -> Rotation {
        let value = |i: usize| f64::from(matrix[i]) / 65536.0;
        let scale_x = value(0).hypot(value(3));
        let scale_y = value(1).hypot(value(4));
        if scale_x == 0.0 || scale_y == 0.0 {
            return Rotation::None;
        }
        let counterclockwise = -(value(1) / scale_y).atan2(value(0) / scale_x).to_degrees();
        let theta = (-counterclockwise.round()).rem_euclid(360.0);
        match theta {
            t if (t - 90.0).abs() < 1.0 => Rotation::Clockwise,
            t if (t - 180.0).abs() < 1.0 => Rotation::HalfTurn,
            t if (t - 270.0).abs() < 1.0 => Rotation::Counterclockwise,
            _ => Rotation::None,
        }
    }

    /// The stream's display matrix side data, if any.
    pub fn of_stream(stream: &ff::format::stream::Stream) -> Rotation {
        stream
            .side_data()
            .find(|data| data.kind() == ff::packet::side_data::Type::DisplayMatrix)
            .and_then(|data| {
                let bytes = data.data();
                (bytes.len() >= 36).then(|| {
                    let mut matrix = [0i32; 9];
                    for (i, value) in matrix.iter_mut().enumerate() {
                        let word = bytes[i * 4..i * 4 + 4].try_into().expect("4 bytes");
                        *value = i32::from_ne_bytes(word);
                    }
                    Rotation::from_display_matrix(&matrix)
                })
            })
            .unwrap_or_default()
    }

    pub fn swaps_sides(self) -> bool {
        matches!(self, Rotation::Clockwise | Rotation::Counterclockwise)
    }

    pub fn degrees(self) -> u32 {
        match self {
            Rotation::None => 0,
            Rotation::Clockwise => 90,
            Rotation::HalfTurn => 180,
            Rotation::Counterclockwise => 270,
        }
    }

    /// Turns every plane of `from` (8-bit planar, such as YUV 4:2:0) into `to`, whose sides are
    /// `from`'s swapped for a quarter turn.
    pub fn apply(self, from: &ff::frame::Video, to: &mut ff::frame::Video) {
        for plane in 0..from.planes() {
            let (width, height) = (
                from.plane_width(plane) as usize,
                from.plane_height(plane) as usize,
            );
            let (source_stride, target_stride) = (from.stride(plane), to.stride(plane));
            let source = from.data(plane);
            let target = to.data_mut(plane);
            for y in 0..height {
                for x in 0..width {
                    let (tx, ty) = match self {
                        Rotation::None => (x, y),
                        Rotation::Clockwise => (height - 1 - y, x),
                        Rotation::HalfTurn => (width - 1 - x, height - 1 - y),
                        Rotation::Counterclockwise => (y, width - 1 - x),
                    };
                    target[ty * target_stride + tx] = source[y * source_stride + x];
                }
            }
        }
    }
}
