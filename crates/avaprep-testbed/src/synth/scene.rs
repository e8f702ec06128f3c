//! Rendering: a grey textured background drifting slowly, saturated striped actors on top, and
//! the frame code. Drawn straight into YUV 4:2:0 planes: the background has neutral chroma
//! (128) and every actor a strong constant chroma, so "actor pixel" is measurable on decoded
//! frames as chroma distance from grey.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::code;
use super::plan::{Actor, ActorState, Shape, VideoSpec};

/// Pixel rectangle `[x0, x1) x [y0, y1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PixelBox {
    pub x0: u32,
    pub y0: u32,
    pub x1: u32,
    pub y1: u32,
}

fn inside(shape: Shape, dx: f64, dy: f64) -> bool {
    let (ax, ay) = (dx.abs(), dy.abs());
    match shape {
        Shape::Rect => ax <= 1.0 && ay <= 1.0,
        Shape::Ellipse => dx * dx + dy * dy <= 1.0,
        Shape::Octagon => ax <= 1.0 && ay <= 1.0 && ax + ay <= 1.5,
    }
}

/// The part of the frame actors may cover: everything below the code band.
fn scene_rect(spec: &VideoSpec) -> PixelBox {
    PixelBox {
        x0: 0,
        y0: spec.band_height(),
        x1: spec.width,
        y1: spec.height,
    }
}

/// Bounding rectangle of the shape clipped to the scene, or `None` when fully outside.
fn clipped_rect(spec: &VideoSpec, s: &ActorState) -> Option<PixelBox> {
    let r = scene_rect(spec);
    let x0 = ((s.cx - s.half_w).floor().max(r.x0 as f64)) as u32;
    let y0 = ((s.cy - s.half_h).floor().max(r.y0 as f64)) as u32;
    let x1 = ((s.cx + s.half_w).ceil().min(r.x1 as f64)).max(0.0) as u32;
    let y1 = ((s.cy + s.half_h).ceil().min(r.y1 as f64)).max(0.0) as u32;
    (x0 < x1 && y0 < y1).then_some(PixelBox { x0, y0, x1, y1 })
}

fn covers(actor: &Actor, s: &ActorState, x: f64, y: f64) -> bool {
    inside(actor.shape, (x - s.cx) / s.half_w, (y - s.cy) / s.half_h)
}

/// Tight box of the actor's pixels inside the frame (the "visible part" that AVA boxes).
pub fn visible_box(spec: &VideoSpec, actor: &Actor, s: &ActorState) -> Option<PixelBox> {
    let r = clipped_rect(spec, s)?;
    let mut tight: Option<PixelBox> = None;
    for y in r.y0..r.y1 {
        for x in r.x0..r.x1 {
            if covers(actor, s, x as f64 + 0.5, y as f64 + 0.5) {
                let b = tight.get_or_insert(PixelBox {
                    x0: x,
                    y0: y,
                    x1: x + 1,
                    y1: y + 1,
                });
                b.x0 = b.x0.min(x);
                b.y0 = b.y0.min(y);
                b.x1 = b.x1.max(x + 1);
                b.y1 = b.y1.max(y + 1);
            }
        }
    }
    tight
}

/// Renders the frames of one video; holds the precomputed background texture.
pub struct Renderer<'a> {
    spec: &'a VideoSpec,
    tile: Vec<u8>,
    tile_w: usize,
    drift: f64,
}

/// Period of the background's circular drift, in seconds.
const DRIFT_PERIOD: f64 = 24.0;

impl<'a> Renderer<'a> {
    pub fn new(spec: &'a VideoSpec) -> Self {
        let drift = (spec.width as f64 / 40.0).max(4.0).round();
        let tile_w = spec.width as usize + 2 * drift as usize + 1;
        let tile_h = spec.height as usize + 2 * drift as usize + 1;
        let tile = background_tile(spec.seed, tile_w, tile_h);
        Renderer {
            spec,
            tile,
            tile_w,
            drift,
        }
    }

    /// Actors present at time `t`, in drawing (z) order.
    pub fn states(&self, t: f64) -> Vec<(&'a Actor, ActorState)> {
        let spec = self.spec;
        spec.actors
            .iter()
            .filter_map(|a| spec.actor_state(a, t).map(|s| (a, s)))
            .collect()
    }

    fn offset(&self, t: f64) -> (usize, usize) {
        // The static pre-scene keeps the phase of its start so the scene does not jump later.
        let t = t.max(self.spec.scene_start);
        let phase = std::f64::consts::TAU * t / DRIFT_PERIOD;
        let ox = self.drift * (1.0 + phase.cos());
        let oy = self.drift * (1.0 + phase.sin());
        (ox.round() as usize, oy.round() as usize)
    }

    /// Fills a luma plane for time `t` and burns in `index`.
    pub fn luma(&self, t: f64, index: u32, plane: &mut [u8], stride: usize) {
        let (w, h) = (self.spec.width as usize, self.spec.height as usize);
        let (ox, oy) = self.offset(t);
        for y in 0..h {
            let src = (y + oy) * self.tile_w + ox;
            plane[y * stride..y * stride + w].copy_from_slice(&self.tile[src..src + w]);
        }
        for (actor, s) in self.states(t) {
            draw_actor_luma(self.spec, actor, &s, plane, stride);
        }
        code::draw_frame_code(plane, self.spec.width, stride, index);
    }

    /// Fills one chroma plane (`v_plane` picks V over U) for time `t`.
    pub fn chroma(&self, t: f64, v_plane: bool, plane: &mut [u8], stride: usize) {
        let (cw, ch) = (
            self.spec.width.div_ceil(2) as usize,
            self.spec.height.div_ceil(2) as usize,
        );
        for y in 0..ch {
            plane[y * stride..y * stride + cw].fill(128);
        }
        for (actor, s) in self.states(t) {
            let value = if v_plane { actor.v } else { actor.u };
            draw_actor_chroma(self.spec, actor, &s, value, plane, stride);
        }
        code::clear_band_chroma(plane, self.spec.width, stride);
    }
}

fn draw_actor_luma(
    spec: &VideoSpec,
    actor: &Actor,
    s: &ActorState,
    plane: &mut [u8],
    stride: usize,
) {
    let Some(r) = clipped_rect(spec, s) else {
        return;
    };
    let period = actor.stripe * 2.0 * s.half_h;
    let (sin, cos) = s.theta.sin_cos();
    for y in r.y0..r.y1 {
        let py = y as f64 + 0.5;
        let row = &mut plane[y as usize * stride..];
        for x in r.x0..r.x1 {
            let px = x as f64 + 0.5;
            if covers(actor, s, px, py) {
                // Stripes in the actor's own frame: they move, scale and rotate with it.
                let u = ((px - s.cx) * cos + (py - s.cy) * sin) / period;
                row[x as usize] = if u.rem_euclid(1.0) < 0.5 {
                    actor.luma_hi
                } else {
                    actor.luma_lo
                };
            }
        }
    }
}

fn draw_actor_chroma(
    spec: &VideoSpec,
    actor: &Actor,
    s: &ActorState,
    value: u8,
    plane: &mut [u8],
    stride: usize,
) {
    let Some(r) = clipped_rect(spec, s) else {
        return;
    };
    // A chroma sample covers a 2x2 luma block; test the block's centre.
    for cy in r.y0 / 2..r.y1.div_ceil(2) {
        let py = 2.0 * cy as f64 + 1.0;
        if py < r.y0 as f64 || py > r.y1 as f64 {
            continue;
        }
        let row = &mut plane[cy as usize * stride..];
        for cx in r.x0 / 2..r.x1.div_ceil(2) {
            let px = 2.0 * cx as f64 + 1.0;
            if px <= r.x1 as f64 && covers(actor, s, px, py) {
                row[cx as usize] = value;
            }
        }
    }
}

/// Two octaves of value noise in a mid-grey range: texture for motion estimation to lock on,
/// without the fine grain that would make encoding slow.
fn background_tile(seed: u64, w: usize, h: usize) -> Vec<u8> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0x6261_636b);
    let coarse = NoiseGrid::new(&mut rng, w, h, 48, 60.0);
    let fine = NoiseGrid::new(&mut rng, w, h, 10, 24.0);
    let mut tile = vec![0u8; w * h];
    for y in 0..h {
        for x in 0..w {
            let v = 118.0 + coarse.at(x, y) + fine.at(x, y);
            tile[y * w + x] = v.clamp(40.0, 200.0) as u8;
        }
    }
    tile
}

struct NoiseGrid {
    cell: usize,
    cols: usize,
    values: Vec<f64>,
}

impl NoiseGrid {
    fn new(rng: &mut ChaCha20Rng, w: usize, h: usize, cell: usize, amp: f64) -> Self {
        let cols = w / cell + 2;
        let rows = h / cell + 2;
        let values = (0..cols * rows)
            .map(|_| rng.random_range(-amp..amp))
            .collect();
        NoiseGrid { cell, cols, values }
    }

    fn at(&self, x: usize, y: usize) -> f64 {
        let (gx, gy) = (x / self.cell, y / self.cell);
        let fx = (x % self.cell) as f64 / self.cell as f64;
        let fy = (y % self.cell) as f64 / self.cell as f64;
        let v = |cx: usize, cy: usize| self.values[cy * self.cols + cx];
        let top = v(gx, gy) * (1.0 - fx) + v(gx + 1, gy) * fx;
        let bottom = v(gx, gy + 1) * (1.0 - fx) + v(gx + 1, gy + 1) * fx;
        top * (1.0 - fy) + bottom * fy
    }
}
