"""The exact extractor a user would write in Python: PyAV decodes every frame, the frame nearest
each instant k / FPS (ties to the later) is scaled and saved by Pillow at quality 90 (4:2:0).

    pyav_extract.py VIDEO OUT_DIR FPS HEIGHT
"""

import os
import sys

import av


def main():
    video, out, fps, height = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    with av.open(video) as container:
        stream = container.streams.video[0]
        start = stream.start_time * stream.time_base if stream.start_time is not None else 0
        if height >= stream.height:
            size = (stream.width, stream.height)
        else:
            size = (2 * round(stream.width * height / stream.height / 2), height)
        k, previous = 0, None
        for frame in container.decode(stream):
            t = float(frame.pts * stream.time_base - start)
            while t >= k / fps:
                pick = previous if previous is not None and k / fps - previous[0] < t - k / fps else (t, frame)
                image = pick[1].reformat(width=size[0], height=size[1], interpolation="BICUBIC").to_image()
                k += 1
                image.save(os.path.join(out, f"{k:06d}.jpg"), quality=90)
            previous = (t, frame)


if __name__ == "__main__":
    main()
