//! Set-extent notification (spec §2.11, OQ-16, OQ-17).

use super::ChunkCache;

impl ChunkCache {}
