//! Direct chunk read and write (spec §2.4, SCC-022 .. SCC-024, OQ-36): raw disk images, no
//! decoding or conversion.

use super::ChunkCache;

impl ChunkCache {}
