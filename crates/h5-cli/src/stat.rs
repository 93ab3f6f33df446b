//! `h5 stat`: object counts, metadata against raw data, the file-space strategy and persisted
//! free space, chunk statistics and the run's cache statistics.

use std::collections::HashSet;
use std::fmt::Write as _;

use h5::{File, FreeList, Group, LinkKind, ObjectKind, PersistedSpace, SpaceStrategy};

/// What `h5 stat` counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FileStats {
    /// Groups (the root included), each counted once.
    pub(crate) groups: u64,
    /// Datasets, each counted once.
    pub(crate) datasets: u64,
    /// Named (committed) datatypes.
    pub(crate) datatypes: u64,
    /// Hard links (the root's implicit link not counted).
    pub(crate) hard_links: u64,
    /// Soft links.
    pub(crate) soft_links: u64,
    /// External links.
    pub(crate) external_links: u64,
    /// User-defined links.
    pub(crate) user_links: u64,
    /// Attributes.
    pub(crate) attributes: u64,
    /// Raw data bytes stored in the file (chunks and contiguous blocks).
    pub(crate) raw_bytes: u64,
    /// Logical bytes of the chunked datasets' allocated chunks.
    pub(crate) chunk_logical_bytes: u64,
    /// Stored size of every allocated chunk.
    pub(crate) chunk_sizes: Vec<u64>,
    /// Objects that could not be read (path and reason).
    pub(crate) errors: Vec<String>,
}

fn walk(g: &Group, st: &mut FileStats, seen: &mut HashSet<u64>) {
    let links = match g.links() {
        Ok(l) => l,
        Err(e) => {
            st.errors.push(format!("{}: {e}", g.path()));
            return;
        }
    };
    for link in links {
        match link.kind {
            LinkKind::Soft(_) => st.soft_links += 1,
            LinkKind::External { .. } => st.external_links += 1,
            LinkKind::UserDefined(_) => st.user_links += 1,
            LinkKind::Hard => {
                st.hard_links += 1;
                let path = crate::dump::join(g.path(), &link.name);
                match g.kind_of(&link.name) {
                    Ok(ObjectKind::Group) => match g.group(&link.name) {
                        Ok(sub) => {
                            if seen.insert(sub.address()) {
                                st.groups += 1;
                                st.attributes += sub.attrs().map_or(0, |a| a.len() as u64);
                                walk(&sub, st, seen);
                            }
                        }
                        Err(e) => st.errors.push(format!("{path}: {e}")),
                    },
                    Ok(ObjectKind::Dataset) => match g.dataset(&link.name) {
                        Ok(d) => {
                            if seen.insert(d.address()) {
                                st.datasets += 1;
                                st.attributes += d.attrs().map_or(0, |a| a.len() as u64);
                                match d.stored_sizes() {
                                    Ok(sizes) => {
                                        let stored =
                                            sizes.iter().fold(0u64, |a, &b| a.saturating_add(b));
                                        st.raw_bytes = st.raw_bytes.saturating_add(stored);
                                        if let Some(c) = d.chunk() {
                                            let per = c
                                                .iter()
                                                .fold(1u64, |a, &x| a.saturating_mul(x as u64));
                                            st.chunk_logical_bytes =
                                                st.chunk_logical_bytes.saturating_add(
                                                    per.saturating_mul(d.element_size() as u64)
                                                        .saturating_mul(sizes.len() as u64),
                                                );
                                            st.chunk_sizes.extend(sizes);
                                        }
                                    }
                                    Err(e) => st.errors.push(format!("{path}: {e}")),
                                }
                            }
                        }
                        Err(e) => st.errors.push(format!("{path}: {e}")),
                    },
                    Ok(ObjectKind::Datatype) => st.datatypes += 1,
                    Ok(ObjectKind::Unknown) => st.errors.push(format!("{path}: unknown object")),
                    Err(e) => st.errors.push(format!("{path}: {e}")),
                }
            }
        }
    }
}

/// Walks the whole file.
pub(crate) fn collect(file: &File) -> Result<FileStats, String> {
    let root = file.root().map_err(|e| e.to_string())?;
    let mut st = FileStats {
        groups: 1,
        attributes: root.attrs().map_or(0, |a| a.len() as u64),
        ..FileStats::default()
    };
    let mut seen = HashSet::from([root.address()]);
    walk(&root, &mut st, &mut seen);
    Ok(st)
}

/// The "file space" section: the file-space strategy and the free space persisted in the file.
fn file_space(w: &mut String, space: &h5::Result<Option<PersistedSpace>>) {
    let _ = writeln!(w, "file space");
    let p = match space {
        Ok(Some(p)) => p,
        Ok(None) => {
            let _ = writeln!(
                w,
                "  strategy          FSM_AGGR (libhdf5's default; the file records no settings)"
            );
            let _ = writeln!(w, "  persist           no");
            return;
        }
        Err(e) => {
            let _ = writeln!(w, "  (not read: {e})");
            return;
        }
    };
    let name = match p.strategy {
        SpaceStrategy::FsmAggr => "FSM_AGGR",
        SpaceStrategy::Page => "PAGE",
        SpaceStrategy::Aggr => "AGGR",
        SpaceStrategy::None => "NONE",
    };
    if p.strategy == SpaceStrategy::Page {
        let _ = writeln!(
            w,
            "  strategy          {name}, page size {} bytes",
            p.page_size
        );
    } else {
        let _ = writeln!(w, "  strategy          {name}");
    }
    let _ = writeln!(
        w,
        "  persist           {}",
        if p.persist { "yes" } else { "no" }
    );
    let _ = writeln!(w, "  threshold         {} bytes", p.threshold);
    if p.persist {
        let sections = p.sections();
        let _ = writeln!(
            w,
            "  free space        {} bytes in {} sections",
            p.free_bytes(),
            sections.len()
        );
        for (list, label) in [
            (FreeList::Metadata, "metadata"),
            (FreeList::RawData, "raw data"),
            (FreeList::Large, "large"),
        ] {
            let (n, bytes) = sections
                .iter()
                .filter(|s| s.list == list)
                .fold((0u64, 0u64), |(n, b), s| (n + 1, b.saturating_add(s.len)));
            if n > 0 {
                let _ = writeln!(w, "    {label:<15} {bytes} bytes in {n} sections");
            }
        }
    }
}

/// The report of `h5 stat`.
pub(crate) fn stat(file: &File, file_size: u64) -> Result<String, String> {
    let st = collect(file)?;
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "objects");
    let _ = writeln!(w, "  groups            {}", st.groups);
    let _ = writeln!(w, "  datasets          {}", st.datasets);
    let _ = writeln!(w, "  named datatypes   {}", st.datatypes);
    let _ = writeln!(w, "  attributes        {}", st.attributes);
    let _ = writeln!(
        w,
        "  links             {} hard, {} soft, {} external, {} user-defined",
        st.hard_links, st.soft_links, st.external_links, st.user_links
    );
    let _ = writeln!(w, "storage");
    let _ = writeln!(w, "  file size         {file_size} bytes");
    let _ = writeln!(
        w,
        "  raw data          {} bytes (chunks and contiguous blocks)",
        st.raw_bytes
    );
    let space = file.persisted_free_space();
    let free = match &space {
        Ok(Some(p)) => p.free_bytes(),
        _ => 0,
    };
    let _ = writeln!(
        w,
        "  metadata          {} bytes (file size - raw data - persisted free space; free space not persisted counts as metadata)",
        file_size.saturating_sub(st.raw_bytes).saturating_sub(free)
    );
    file_space(w, &space);
    let _ = writeln!(w, "chunks");
    let n = st.chunk_sizes.len() as u64;
    let _ = writeln!(w, "  allocated         {n}");
    if n > 0 {
        let total = st
            .chunk_sizes
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b));
        let min = st.chunk_sizes.iter().min().copied().unwrap_or(0);
        let max = st.chunk_sizes.iter().max().copied().unwrap_or(0);
        let _ = writeln!(
            w,
            "  stored size       min {min}, mean {:.1}, max {max} bytes",
            total as f64 / n as f64
        );
        let ratio = if total > 0 {
            st.chunk_logical_bytes as f64 / total as f64
        } else {
            0.0
        };
        let _ = writeln!(
            w,
            "  compression       {} logical / {total} stored bytes = {ratio:.2}x",
            st.chunk_logical_bytes
        );
    }
    let _ = writeln!(w, "caches (this run)");
    match file.metadata_cache_stats() {
        Ok(m) => {
            let hits: u64 = m.per_class.iter().map(|c| c.hits).sum();
            let misses: u64 = m.per_class.iter().map(|c| c.misses).sum();
            let accesses = hits + misses;
            let rate = if accesses > 0 {
                hits as f64 / accesses as f64
            } else {
                0.0
            };
            let _ = writeln!(
                w,
                "  metadata cache    {} hits, {} misses, hit rate {rate:.4}",
                hits, misses
            );
        }
        Err(e) => {
            let _ = writeln!(w, "  metadata cache    (no statistics: {e})");
        }
    }
    match file.chunk_cache_stats() {
        Ok(c) => {
            let _ = writeln!(
                w,
                "  chunk cache       {} hits, {} misses",
                c.hits, c.misses
            );
        }
        Err(e) => {
            let _ = writeln!(w, "  chunk cache       (no statistics: {e})");
        }
    }
    if !st.errors.is_empty() {
        let _ = writeln!(w, "not read");
        for e in &st.errors {
            let _ = writeln!(w, "  {e}");
        }
    }
    Ok(out)
}
