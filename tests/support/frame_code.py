"""The synthetic frames' burned-in code of their source frame (see crates/avaprep-testbed/src/synth/code.rs),
read back from decoded pixels, and the code of the extracted frame nearest an instant: what the
reference-loader checks compare. numpy and PIL only, so that a check imports no loader but its own.
"""

import numpy as np
from PIL import Image

BLOCKS, DATA_BITS = 20, 17


def frame_code(luma):
    """The synthetic frame code (see crates/avaprep-testbed/src/synth/code.rs): 20 blocks along the top edge, a white
    and a black marker, 17 bits MSB first, an even-parity bit; None if it does not read."""
    height, width = luma.shape
    bw = width // BLOCKS
    bh = max(bw // 2, 8)
    x_in, y_in = bw // 4, bh // 4
    bits = []
    for b in range(BLOCKS):
        block = luma[y_in : bh - y_in, b * bw + x_in : (b + 1) * bw - x_in]
        bits.append(block.mean() > 128)
    index = 0
    for bit in bits[2 : 2 + DATA_BITS]:
        index = (index << 1) | int(bit)
    parity = sum(bits[2 : 2 + DATA_BITS]) % 2 == 1
    if not (bits[0] and not bits[1] and bits[-1] == parity):
        return None
    return index


def luma_of(rgb):
    """rgb: H x W x 3 in 0..255."""
    return 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]


def nearest_frame(index_csv, seconds):
    """The frame whose target time is nearest `seconds`, the earlier on a tie (avaprep's rule)."""
    best = None
    for line in index_csv.read_text().splitlines()[1:]:
        fields = line.split(",")
        frame, target = int(fields[0]), float(fields[1])
        distance = abs(target - seconds)
        if best is None or distance < best[0] - 1e-9:
            best = (distance, frame)
    return best[1]


def nearest_frame_code(data, video, seconds):
    """The code of the extracted frame nearest `seconds`, read from its JPEG with PIL."""
    frame = nearest_frame(data / "frame_index" / f"{video}.csv", seconds)
    jpeg = data / "frames" / video / f"{video}_{frame:06d}.jpg"
    return frame_code(luma_of(np.asarray(Image.open(jpeg).convert("RGB"), dtype=np.float64)))
