"""Core types: data types, formats, dims, logging and errors."""
