"""The builder's graph rewrites: the rules :mod:`plugrt.builder.fusion` applies to the built layer list."""
