//! Defined elements and erase (spec §2.12, OQ-13 .. OQ-15, OQ-37).

use super::ChunkCache;

impl ChunkCache {}
