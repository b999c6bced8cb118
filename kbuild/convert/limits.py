"""Limits and resolutions. The converters read them from this module at call time,
so a test (or a caller) can patch kbuild.convert.limits.NAME."""
from __future__ import annotations

# Refused before parsing: past this size a source is almost always a mistake
# (a video, a disk image, a data dump), and parsing it would stall the build.
MAX_SOURCE_BYTES: int = 100 * 1024 * 1024

# A 2000-page document already yields ~2000 page PNGs (~100-300 MB held in memory
# until the store writes them); larger ones should be split by the user.
MAX_PAGES: int = 2000

# 96 dpi: body text (10-11 pt) comes out 13-15 px tall, which a reader or a vision
# model can still read, while a Letter page stays 816x1056 px. Rendering plus PNG
# encoding grows with the pixel count, i.e. with dpi squared: 150 dpi would cost
# about 2.4x as much for every page (see benchmarks/convert.py).
PAGE_DPI: int = 96

# Figures and tables are small crops read on their own, so they get more pixels
# than whole pages; their area is small, so this costs little.
FIGURE_DPI: int = 150
