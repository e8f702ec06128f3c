//! Scaling (swscale) and JPEG encoding (libav's mjpeg) straight from YUV: JPEG stores YCbCr,
//! so the only conversion is the size and the range (video's limited range to JPEG's full
//! range), which swscale does in the same pass.

use std::path::{Path, PathBuf};

use ff::format::Pixel;
use ff::software::scaling;

use super::rotation::Rotation;
use ff::{Rational, codec, encoder, frame};
use ffmpeg_next as ff;

use super::ExtractError;

/// Output size for a `src_w` x `src_h` source: `height` 0 means native; smaller sources keep
/// their size unless `upscale`. A scaled width keeps the aspect ratio and is rounded to an even
/// number the way ffmpeg's `scale=-2:H` does (to the nearest multiple of 2).
pub fn output_size(src_w: u32, src_h: u32, height: u32, upscale: bool) -> (u32, u32) {
    if height == 0 || src_h == 0 || (height > src_h && !upscale) || height == src_h {
        return (src_w, src_h);
    }
    let (w, h) = (u64::from(src_w), u64::from(src_h));
    let half = (u64::from(height) * w + h) / (2 * h);
    ((2 * half).max(2) as u32, height)
}

/// One encoder and scaler for a fixed source geometry; rebuilt if the source size changes.
struct Pipeline {
    source: (Pixel, u32, u32, bool),
    scaler: scaling::Context,
    encoder: encoder::Video,
    scaled: frame::Video,
    /// The scaled frame turned upright, for a rotated source.
    upright: Option<frame::Video>,
    size: (u32, u32),
}

pub struct JpegWriter {
    out_dir: PathBuf,
    video_id: String,
    height: u32,
    upscale: bool,
    quality: i32,
    rotation: Rotation,
    pipeline: Option<Pipeline>,
    packet: ff::Packet,
    /// The last JPEG and the source timestamp it shows, for targets that pick the same frame.
    last: Option<(i64, Vec<u8>)>,
    /// The encoder wants increasing timestamps; they mean nothing for single images.
    encoded: i64,
}

impl JpegWriter {
    pub fn new(
        out_dir: &Path,
        video_id: &str,
        height: u32,
        upscale: bool,
        quality: u8,
        rotation: Rotation,
    ) -> Self {
        JpegWriter {
            out_dir: out_dir.to_path_buf(),
            video_id: video_id.to_string(),
            height,
            upscale,
            quality: i32::from(quality),
            rotation,
            pipeline: None,
            packet: ff::Packet::empty(),
            last: None,
            encoded: 0,
        }
    }

    pub fn path_of(&self, k: u32) -> PathBuf {
        self.out_dir
            .join(crate::layout::frame_file_name(&self.video_id, k))
    }

    /// Encodes `source` (whose timestamp is `ts`) as frame `k`; returns (bytes, width, height).
    pub fn write(
        &mut self,
        k: u32,
        ts: i64,
        source: &frame::Video,
    ) -> Result<(u64, u32, u32), ExtractError> {
        let path = self.path_of(k);
        self.prepare(source, &path)?;
        let (w, h) = self.pipeline.as_ref().map_or((0, 0), |p| p.size);
        if self.last.as_ref().is_none_or(|(last_ts, _)| *last_ts != ts) {
            let bytes = self.encode(source, &path)?;
            self.last = Some((ts, bytes));
        }
        let bytes = self.last.as_ref().map_or(&[][..], |(_, b)| b.as_slice());
        write_file(&path, bytes)?;
        Ok((bytes.len() as u64, w, h))
    }

    fn prepare(&mut self, source: &frame::Video, path: &Path) -> Result<(), ExtractError> {
        let key = (
            source.format(),
            source.width(),
            source.height(),
            source.color_range() == ff::color::Range::JPEG,
        );
        if self.pipeline.as_ref().is_some_and(|p| p.source == key) {
            return Ok(());
        }
        self.last = None;
        // `--height` is the upright frame's: scale to the turned size, then turn.
        let turned = self.rotation.swaps_sides();
        let (upright_w, upright_h) = if turned {
            (key.2, key.1)
        } else {
            (key.1, key.2)
        };
        let size = output_size(upright_w, upright_h, self.height, self.upscale);
        let scaled_size = if turned { (size.1, size.0) } else { size };
        let encode_err = |source| ExtractError::Encode {
            path: path.to_path_buf(),
            source,
        };
        // Bicubic is what the ffmpeg CLI's scale filter uses, so sizes and sharpness compare.
        let mut scaler = scaling::Context::get(
            key.0,
            key.1,
            key.2,
            Pixel::YUVJ420P,
            scaled_size.0,
            scaled_size.1,
            scaling::Flags::BICUBIC,
        )
        .map_err(encode_err)?;
        if key.3 {
            full_range_input(&mut scaler);
        }
        let encoder = open_mjpeg(size, self.quality).map_err(encode_err)?;
        self.pipeline = Some(Pipeline {
            source: key,
            scaler,
            encoder,
            scaled: frame::Video::new(Pixel::YUVJ420P, scaled_size.0, scaled_size.1),
            upright: (self.rotation != Rotation::None)
                .then(|| frame::Video::new(Pixel::YUVJ420P, size.0, size.1)),
            size,
        });
        Ok(())
    }

    fn encode(&mut self, source: &frame::Video, path: &Path) -> Result<Vec<u8>, ExtractError> {
        let encode_err = |source| ExtractError::Encode {
            path: path.to_path_buf(),
            source,
        };
        let quality = self.quality;
        let Some(p) = self.pipeline.as_mut() else {
            return Err(encode_err(ff::Error::Bug));
        };
        p.scaler.run(source, &mut p.scaled).map_err(encode_err)?;
        let image = match p.upright.as_mut() {
            Some(upright) => {
                self.rotation.apply(&p.scaled, upright);
                upright
            }
            None => &mut p.scaled,
        };
        // With QSCALE the encoder takes its quantiser from each frame's quality field.
        unsafe {
            (*image.as_mut_ptr()).quality = quality * ff::ffi::FF_QP2LAMBDA;
        }
        self.encoded += 1;
        image.set_pts(Some(self.encoded));
        p.encoder.send_frame(image).map_err(encode_err)?;
        p.encoder
            .receive_packet(&mut self.packet)
            .map_err(encode_err)?;
        Ok(self.packet.data().unwrap_or_default().to_vec())
    }
}

/// Tells swscale that a plain (non-"J") YUV input is already full range.
fn full_range_input(scaler: &mut scaling::Context) {
    use std::os::raw::c_int;
    unsafe {
        let ctx = scaler.as_mut_ptr();
        let (mut inv, mut table) = (std::ptr::null_mut(), std::ptr::null_mut());
        let (mut src_range, mut dst_range): (c_int, c_int) = (0, 0);
        let (mut brightness, mut contrast, mut saturation): (c_int, c_int, c_int) = (0, 0, 0);
        if ff::ffi::sws_getColorspaceDetails(
            ctx,
            &mut inv,
            &mut src_range,
            &mut table,
            &mut dst_range,
            &mut brightness,
            &mut contrast,
            &mut saturation,
        ) >= 0
        {
            ff::ffi::sws_setColorspaceDetails(
                ctx, inv, 1, table, dst_range, brightness, contrast, saturation,
            );
        }
    }
}

/// An mjpeg encoder whose `quality` means what `ffmpeg -q:v` means, without the CLI's silent
/// clamp: qmin/qmax pin the quantiser so q 2 is q 2 (libav's default qmin is 2, max 31).
fn open_mjpeg(size: (u32, u32), quality: i32) -> Result<encoder::Video, ff::Error> {
    let codec = encoder::find(codec::Id::MJPEG).ok_or(ff::Error::EncoderNotFound)?;
    let mut enc = codec::context::Context::new_with_codec(codec)
        .encoder()
        .video()?;
    enc.set_width(size.0);
    enc.set_height(size.1);
    enc.set_format(Pixel::YUVJ420P);
    enc.set_time_base(Rational(1, 25));
    enc.set_flags(codec::Flags::QSCALE);
    enc.set_qmin(quality);
    enc.set_qmax(quality);
    enc.set_global_quality(quality * ff::ffi::FF_QP2LAMBDA);
    enc.open_as(codec)
}

/// Writes under a temporary name, then renames: a kill never leaves a truncated JPEG under a
/// final name. No fsync per file: the caller syncs once before renaming the whole folder.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ExtractError> {
    let io_err = |source| ExtractError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(io_err)?;
    std::fs::rename(&tmp, path).map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::output_size;

    #[test]
    fn sizes() {
        assert_eq!(output_size(640, 360, 480, false), (640, 360));
        assert_eq!(output_size(640, 360, 480, true), (854, 480));
        assert_eq!(output_size(1280, 720, 480, false), (854, 480));
        assert_eq!(output_size(1920, 1080, 360, false), (640, 360));
        assert_eq!(output_size(500, 282, 240, false), (426, 240));
        assert_eq!(output_size(500, 282, 0, false), (500, 282));
        assert_eq!(output_size(854, 480, 480, false), (854, 480));
        // ffmpeg: scale=-2:480 of 1440x1080 gives 640x480.
        assert_eq!(output_size(1440, 1080, 480, false), (640, 480));
    }
}
