"""Small, deterministic renders for the media environments (charts and clip frames).

Every function here returns PNG bytes that depend only on its arguments: the
same data gives byte-identical images run after run (matplotlib's PNG metadata
is dropped and the image is re-encoded by Pillow as a small palette PNG), which
is what lets `faultlens bench build` reproduce the bundled dataset byte for byte.
Renders are cached per process, since a seed and all its injections show the
same chart.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from faultlens.middleware.model.trace import Media

CHART_SIZE = (320, 240)
FRAME_SIZE = (96, 72)


def palette_png(image) -> bytes:
    """Re-encode a Pillow image as a small palette PNG (deterministic bytes)."""
    from PIL import Image

    small = image.convert("RGB").quantize(colors=32, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    small.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


@lru_cache(maxsize=512)
def render_chart(kind: str, title: str, labels: tuple[str, ...], series: tuple[tuple[str, tuple[int, ...]], ...],
                 ymax: int, ylabel: str) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    """A bar chart (one series) or a line chart (one or two series) as PNG bytes.

    Returns the PNG and, per x label, the pixel columns (left, right) it occupies,
    so a zoom can crop the image around one label.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from PIL import Image

    style: Any = {"font.family": "DejaVu Sans", "font.size": 7, "axes.titlesize": 8, "svg.hashsalt": "faultlens",
             "axes.spines.top": False, "axes.spines.right": False}
    with matplotlib.rc_context(style):
        fig = Figure(figsize=(CHART_SIZE[0] / 100, CHART_SIZE[1] / 100), dpi=100)
        canvas = FigureCanvasAgg(fig)
        ax = fig.add_axes((0.13, 0.16, 0.82, 0.72))
        xs = list(range(len(labels)))
        artists = []
        if kind == "bar":
            name, values = series[0]
            bars = ax.bar(xs, values, color="#4477aa", width=0.6)
            for x, v in zip(xs, values):
                ax.text(x, v + ymax * 0.01, str(v), ha="center", va="bottom", fontsize=6)
            artists = list(bars)
        else:
            colours = ["#cc6677", "#117733"]
            for (name, values), colour in zip(series, colours):
                ax.plot(xs, values, marker="o", markersize=3, color=colour, label=name, linewidth=1.2)
                for x, v in zip(xs, values):
                    ax.text(x, v + ymax * 0.02, str(v), ha="center", va="bottom", fontsize=5, color=colour)
            if len(series) > 1:
                ax.legend(loc="upper left", fontsize=6, frameon=False)
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, fontsize=6)
        ax.set_ylim(0, ymax)
        ax.set_ylabel(ylabel, fontsize=6)
        ax.set_title(title)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
        canvas.draw()
        width, height = canvas.get_width_height()
        columns = []
        for i, x in enumerate(xs):
            if artists:
                box = artists[i].get_window_extent()
                left, right = box.x0, box.x1
            else:
                px = ax.transData.transform((x, 0))[0]
                left, right = px - 6, px + 6
            columns.append((max(0, int(left) - 10), min(width, int(right) + 10)))
        rgba = bytes(canvas.buffer_rgba())
        image = Image.frombuffer("RGBA", (width, height), rgba, "raw", "RGBA", 0, 1)
        return palette_png(image), tuple(columns)


@lru_cache(maxsize=2048)
def crop_columns(png: bytes, left: int, right: int) -> bytes:
    """A vertical strip of an image (a zoom on one x label), scaled up twice."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    strip = image.crop((left, 0, right, image.height))
    strip = strip.resize((strip.width * 2, strip.height * 2), Image.Resampling.NEAREST)
    return palette_png(strip)


COLOURS = {"red": (214, 39, 40), "blue": (31, 119, 180), "green": (44, 160, 44), "yellow": (230, 200, 30),
           "purple": (148, 103, 189), "orange": (255, 127, 14)}


def draw_shapes(draw: Any, objects: Sequence[tuple[str, str, int, int]], r: int = 7) -> None:
    """Draw `(colour, shape, x, y)` objects (circle, square or triangle of radius `r`) with a Pillow `ImageDraw`."""
    for colour, shape, x, y in objects:
        fill = COLOURS[colour]
        if shape == "circle":
            draw.ellipse((x - r, y - r, x + r, y + r), fill=fill)
        elif shape == "square":
            draw.rectangle((x - r, y - r, x + r, y + r), fill=fill)
        else:
            draw.polygon([(x, y - r), (x - r, y + r), (x + r, y + r)], fill=fill)


@lru_cache(maxsize=4096)
def render_frame(objects: tuple[tuple[str, str, int, int], ...]) -> bytes:
    """One clip frame: `(colour, shape, x, y)` objects on a light background, as PNG bytes."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", FRAME_SIZE, (245, 245, 240))
    draw_shapes(ImageDraw.Draw(image), objects)
    return palette_png(image)


def png_media(png: bytes, caption: str, frame_index: int | None = None, timestamp_s: float | None = None) -> Media:
    """A `Media` holding a PNG inline (base64), so a trace carries its images with it."""
    return Media(mime_type="image/png", data=base64.b64encode(png).decode("ascii"), caption=caption,
                 frame_index=frame_index, timestamp_s=timestamp_s)


def image_part(png: bytes) -> dict:
    """An OpenAI-style image content part, for real vision models."""
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode("ascii")}}


def user_content(text: str, images: Sequence[bytes], vision: bool) -> str | list:
    """A user message body: the text alone for simulated agents, text + images for real models."""
    if not vision or not images:
        return text
    return [{"type": "text", "text": text}, *(image_part(p) for p in images)]
