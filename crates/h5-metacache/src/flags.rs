//! Flag sets for cache calls. Combination rules are checked by the calls themselves.

macro_rules! flag_set {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $flag:ident = $bit:expr,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u16);

        impl $name {
            /// No flags.
            pub const NONE: Self = Self(0);
            $($(#[$fmeta])* pub const $flag: Self = Self($bit);)*
            const ALL_NAMES: &'static [(&'static str, u16)] = &[$((stringify!($flag), $bit),)*];

            /// Whether every flag in `other` is set.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }
            /// Whether any flag in `other` is set.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }
            /// Whether no flag is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
            /// The raw bits.
            pub const fn bits(self) -> u16 {
                self.0
            }
        }

        impl std::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self {
                Self(self.0 | rhs.0)
            }
        }

        impl std::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: Self) {
                self.0 |= rhs.0;
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let names: Vec<&str> = Self::ALL_NAMES
                    .iter()
                    .filter(|(_, bit)| self.0 & bit != 0)
                    .map(|(n, _)| *n)
                    .collect();
                if names.is_empty() {
                    write!(f, "{}(NONE)", stringify!($name))
                } else {
                    write!(f, "{}({})", stringify!($name), names.join(" | "))
                }
            }
        }
    };
}

flag_set! {
    /// Flags accepted by [`insert`](crate::MetadataCache::insert) (MDC-027).
    InsertFlags {
        /// Pin the entry on insertion.
        PIN = 0x1,
        /// Set the flush marker (for marked-only flushes).
        SET_FLUSH_MARKER = 0x2,
        /// Write the entry after every other dirty entry (the superblock).
        FLUSH_LAST = 0x4,
        /// Parallel only: write collectively. Accepted and recorded, but ignored, in serial use.
        FLUSH_COLLECTIVELY = 0x8,
    }
}

flag_set! {
    /// Flags accepted by [`protect`](crate::MetadataCache::protect) (MDC-032, MDC-034).
    ProtectFlags {
        /// Shared read-only protection.
        READ_ONLY = 0x1,
        /// Set flush-last if this protect loads the entry.
        FLUSH_LAST = 0x2,
        /// Set flush-collectively if this protect loads the entry.
        FLUSH_COLLECTIVELY = 0x4,
    }
}

flag_set! {
    /// Flags accepted by [`unprotect`](crate::MetadataCache::unprotect) (MDC-047 .. MDC-055).
    UnprotectFlags {
        /// The client modified the entry.
        DIRTIED = 0x1,
        /// Remove the entry from the cache without writing it.
        DELETED = 0x2,
        /// Pin the entry.
        PIN = 0x4,
        /// Unpin the entry.
        UNPIN = 0x8,
        /// Set the flush marker.
        SET_FLUSH_MARKER = 0x10,
        /// With `DELETED`: give the entry's file space back.
        FREE_FILE_SPACE = 0x20,
        /// With `DELETED`: hand the in-core object back to the caller instead of freeing it.
        TAKE_OWNERSHIP = 0x40,
    }
}

flag_set! {
    /// Flags for a single-entry flush ([`flush_entry`](crate::MetadataCache::flush_entry)), MDC-067 table 1.
    EntryFlushFlags {
        /// Mark clean (or discard) without writing.
        CLEAR_ONLY = 0x1,
        /// Evict after writing (or clearing).
        INVALIDATE = 0x2,
        /// Give the file space back (only with `CLEAR_ONLY | INVALIDATE`).
        FREE_FILE_SPACE = 0x4,
        /// Hand the in-core object to the caller (only with `INVALIDATE`).
        TAKE_OWNERSHIP = 0x8,
    }
}

flag_set! {
    /// Flags for [`flush`](crate::MetadataCache::flush) of the whole cache.
    FlushFlags {
        /// Write only entries whose flush marker is set (MDC-079).
        MARKED_ENTRIES = 0x1,
        /// Write everything, then evict everything (file close, MDC-080).
        INVALIDATE = 0x2,
    }
}

flag_set! {
    /// Flags for [`expunge`](crate::MetadataCache::expunge).
    ExpungeFlags {
        /// Give the entry's file space back.
        FREE_FILE_SPACE = 0x1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_and_query() {
        let f = UnprotectFlags::DELETED | UnprotectFlags::FREE_FILE_SPACE;
        assert!(f.contains(UnprotectFlags::DELETED));
        assert!(!f.contains(UnprotectFlags::DELETED | UnprotectFlags::PIN));
        assert!(f.intersects(UnprotectFlags::PIN | UnprotectFlags::DELETED));
        assert_eq!(
            format!("{f:?}"),
            "UnprotectFlags(DELETED | FREE_FILE_SPACE)"
        );
        assert_eq!(format!("{:?}", InsertFlags::NONE), "InsertFlags(NONE)");
    }
}
