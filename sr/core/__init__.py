"""Primitives every layer may use, importing nothing else of ``sr``: image I/O (``images``), the Y
channel (``color``), the LR operator (``degrade``), PSNR and SSIM (``metrics``), sequences of
frames and their windows (``frames``), the one file lock of run folders and shard builds
(``lock``), the errors shared across layers (``errors``), the one reader of the files runs and
exports write and read back (``runfiles``) and the quiet start of the entry points (``quiet``)."""
