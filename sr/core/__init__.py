"""Primitives every layer may use, importing nothing else of ``sr``: image I/O (``images``), the Y
channel (``color``), the LR operator (``degrade``), PSNR and SSIM (``metrics``), sequences of
frames and their windows (``frames``), and the errors shared across layers (``errors``)."""
