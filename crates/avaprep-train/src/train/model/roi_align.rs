//! RoIAlign with torchvision's semantics (`torchvision.ops.roi_align`), built from tensor ops so
//! libtorch's autograd differentiates it with respect to the feature map.
//!
//! Bilinear sampling on a regular grid is separable: every output bin is
//! `sum_y sum_x wy(bin, y) * wx(bin, x) * F[y, x]`, and torchvision's rule that drops samples
//! outside the map is a per-axis test too. So each box becomes two small weight matrices
//! (`[out_h, H]` and `[out_w, W]`) and the pooling two matrix products. This handles the adaptive
//! per-box sampling grid exactly (each box's matrices average its own number of samples) without
//! materialising one sample tensor per box and channel, which for 64 boxes on a 2304-channel map
//! would cost hundreds of megabytes.

use tch::{Device, Kind, Tensor};

/// How the RoIs are pooled; the fields mean what torchvision's arguments of the same name mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoiAlignSpec {
    /// Output bins `(height, width)`.
    pub output_size: (i64, i64),
    /// Multiplies the box coordinates into feature-map pixels.
    pub spatial_scale: f64,
    /// Samples per bin and axis; 0 means ceil(roi size / output size), chosen per box.
    pub sampling_ratio: i64,
    /// Subtract half a pixel from the scaled box (pixel centres at +0.5); without it, boxes
    /// shorter than one pixel are stretched to one.
    pub aligned: bool,
}

/// Pools `boxes` (`[K, 5]`: batch index, x1, y1, x2, y2 in input pixels) out of `input`
/// (`[N, C, H, W]`) into `[K, C, out_h, out_w]`.
///
/// Gradients flow to `input`; the boxes are treated as constants, as in torchvision. The box
/// geometry is computed where `boxes` lives: boxes on the host spare the GPU a few tiny kernels
/// and synchronisations.
///
/// # Panics
/// If the shapes are not as above or a batch index is outside `0..N`.
pub fn roi_align(input: &Tensor, boxes: &Tensor, spec: RoiAlignSpec) -> Tensor {
    let (n, c, h, w) = input.size4().expect("roi_align input must be [N, C, H, W]");
    let (k, five) = boxes.size2().expect("roi_align boxes must be [K, 5]");
    assert_eq!(five, 5, "roi_align boxes must be [K, 5]");
    let (out_h, out_w) = spec.output_size;
    if k == 0 {
        return Tensor::zeros([0, c, out_h, out_w], (input.kind(), input.device()));
    }
    // Coordinates in f32 like torchvision for f32 maps, so floor() lands on the same pixels.
    let coord_kind = if input.kind() == Kind::Double {
        Kind::Double
    } else {
        Kind::Float
    };
    let boxes = boxes.detach().to_kind(coord_kind);
    let to_input = |t: Tensor| super::upload(&t.to_kind(input.kind()), input.device());
    let weights_y = to_input(axis_weights(
        &boxes.select(1, 2),
        &boxes.select(1, 4),
        out_h,
        h,
        spec,
    ));
    let weights_x = to_input(axis_weights(
        &boxes.select(1, 1),
        &boxes.select(1, 3),
        out_w,
        w,
        spec,
    ));

    let mut pooled = Vec::new();
    let mut order = Vec::new();
    for (image, members) in boxes_by_image(&boxes, n) {
        let members = super::upload(&Tensor::from_slice(&members), input.device());
        let wy = weights_y.index_select(0, &members);
        let wx = weights_x.index_select(0, &members);
        pooled.push(pool_image(&input.get(image), &wy, &wx));
        order.push(members);
    }
    // Back to the caller's box order.
    let inverse = Tensor::cat(&order, 0).argsort(0, false);
    Tensor::cat(&pooled, 0).index_select(0, &inverse)
}

/// Applies per-box separable weights to one image: `[C, H, W]` with `wy: [k, oh, H]` and
/// `wx: [k, ow, W]` gives `[k, C, oh, ow]`. Both contractions are single GEMMs.
fn pool_image(features: &Tensor, wy: &Tensor, wx: &Tensor) -> Tensor {
    let (c, h, w) = features.size3().unwrap();
    let (k, out_h, _) = wy.size3().unwrap();
    let out_w = wx.size()[1];
    let rows = features.permute([1, 0, 2]).reshape([h, c * w]);
    let along_y = wy.reshape([k * out_h, h]).matmul(&rows);
    let along_x = along_y.reshape([k, out_h * c, w]).bmm(&wx.transpose(1, 2));
    along_x.reshape([k, out_h, c, out_w]).permute([0, 2, 1, 3])
}

/// The boxes of each image that has any, as `(image, box indices)`. The batch column is read on
/// the host because the grouping is control flow.
fn boxes_by_image(boxes: &Tensor, n: i64) -> Vec<(i64, Vec<i64>)> {
    let index = boxes
        .select(1, 0)
        .to_kind(Kind::Int64)
        .to_device(Device::Cpu);
    let index = Vec::<i64>::try_from(&index).expect("batch index column");
    if let Some(bad) = index.iter().find(|&&i| i < 0 || i >= n) {
        panic!("roi_align: batch index {bad} outside 0..{n}");
    }
    (0..n)
        .map(|image| {
            let members = (0..index.len() as i64).filter(|&b| index[b as usize] == image);
            (image, members.collect::<Vec<_>>())
        })
        .filter(|(_, members)| !members.is_empty())
        .collect()
}

/// Interpolation weights of one axis for every box: `[K, bins, size]`, already divided by the
/// number of samples per bin on that axis (the product of both axes' counts is torchvision's
/// per-bin sample count).
fn axis_weights(lo: &Tensor, hi: &Tensor, bins: i64, size: i64, spec: RoiAlignSpec) -> Tensor {
    let opts = (lo.kind(), lo.device());
    let offset = if spec.aligned { 0.5 } else { 0.0 };
    let start = lo * spec.spatial_scale - offset;
    let end = hi * spec.spatial_scale - offset;
    let mut length = end - &start;
    if !spec.aligned {
        length = length.clamp_min(1.0);
    }
    let bin = &length / bins as f64;
    let grid = if spec.sampling_ratio > 0 {
        length.full_like(spec.sampling_ratio as f64)
    } else {
        (&length / bins as f64).ceil()
    };
    let max_grid = grid.max().double_value(&[]).max(0.0) as i64;
    if max_grid == 0 {
        return Tensor::zeros([lo.size()[0], bins, size], opts);
    }

    // Sample positions [K, bins, max_grid], in torchvision's order of operations.
    let (start, bin, grid) = (
        start.view([-1, 1, 1]),
        bin.view([-1, 1, 1]),
        grid.view([-1, 1, 1]),
    );
    let bin_index = Tensor::arange(bins, opts).view([1, -1, 1]);
    let sample_index = Tensor::arange(max_grid, opts).view([1, 1, -1]);
    let safe_grid = grid.clamp_min(1.0);
    let pos = &start + &bin_index * &bin + (&sample_index + 0.5) * &bin / &safe_grid;

    // Boxes with fewer samples than max_grid mask the surplus; torchvision drops samples beyond
    // one pixel outside the map.
    let used = sample_index.lt_tensor(&grid);
    let inside = pos.ge(-1.0).logical_and(&pos.le(size as f64));
    let scale = used.logical_and(&inside).to_kind(lo.kind()) / &safe_grid;

    let pos = pos.clamp_min(0.0);
    let low = pos.floor();
    let at_edge = low.ge(size as f64 - 1.0);
    let last = size as f64 - 1.0;
    let low = low.where_scalarother(&at_edge.logical_not(), last);
    let high = (&low + 1.0).clamp_max(last);
    let pos = pos.where_self(&at_edge.logical_not(), &low);
    let frac = &pos - &low;

    let pixels = Tensor::arange(size, opts).view([1, 1, 1, -1]);
    let low_weight = frac.neg() + 1.0;
    let low_weight = low_weight * &scale;
    let high_weight = frac * &scale;
    let onehot = |index: &Tensor| index.unsqueeze(-1).eq_tensor(&pixels).to_kind(lo.kind());
    (onehot(&low) * low_weight.unsqueeze(-1) + onehot(&high) * high_weight.unsqueeze(-1))
        .sum_dim_intlist(2, false, lo.kind())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(aligned: bool, sampling_ratio: i64) -> RoiAlignSpec {
        RoiAlignSpec {
            output_size: (2, 2),
            spatial_scale: 1.0,
            sampling_ratio,
            aligned,
        }
    }

    #[test]
    fn constant_map_pools_to_the_constant_inside_and_zero_far_outside() {
        let input = Tensor::full([1, 3, 8, 8], 2.5, (Kind::Float, Device::Cpu));
        let boxes =
            Tensor::from_slice2(&[[0.0f32, 1.0, 1.0, 5.0, 6.0], [0.0, 20.0, 20.0, 30.0, 30.0]]);
        let out = roi_align(&input, &boxes, spec(true, 0));
        assert_eq!(out.size(), [2, 3, 2, 2]);
        let inside = out.get(0);
        assert!((inside - 2.5).abs().max().double_value(&[]) < 1e-6);
        assert_eq!(out.get(1).abs().max().double_value(&[]), 0.0);
    }

    #[test]
    fn boxes_come_back_in_input_order_across_images() {
        let input = Tensor::arange(2 * 16, (Kind::Float, Device::Cpu)).view([2, 1, 4, 4]);
        let a = [1.0f32, 0.0, 0.0, 2.0, 2.0];
        let b = [0.0f32, 0.0, 0.0, 2.0, 2.0];
        let both = roi_align(&input, &Tensor::from_slice2(&[a, b]), spec(false, 2));
        let only_a = roi_align(&input, &Tensor::from_slice2(&[a]), spec(false, 2));
        let only_b = roi_align(&input, &Tensor::from_slice2(&[b]), spec(false, 2));
        assert!(both.get(0).equal(&only_a.get(0)));
        assert!(both.get(1).equal(&only_b.get(0)));
        // Image 1 holds larger values than image 0.
        assert!(both.get(0).mean(Kind::Float).double_value(&[]) > 10.0);
    }

    #[test]
    fn no_boxes_gives_an_empty_batch() {
        let input = Tensor::ones([1, 4, 5, 5], (Kind::Float, Device::Cpu));
        let boxes = Tensor::zeros([0, 5], (Kind::Float, Device::Cpu));
        assert_eq!(
            roi_align(&input, &boxes, spec(true, 0)).size(),
            [0, 4, 2, 2]
        );
    }
}
