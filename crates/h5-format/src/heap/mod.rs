//! Heaps: local, global and fractal.

pub mod fractal;
pub mod global;
pub mod local;
