//! Large destination buffers allocated the way numpy allocates arrays: zeroed by the allocator
//! (fresh pages from the kernel, not written by us) and, from 4 MiB on, with transparent huge
//! pages requested for them before their first touch.
//!
//! Why: a read into a fresh buffer of 1 GiB faults its pages in one by one; with 4 KiB pages
//! that is 262,144 page faults, each zeroing a page, and most of the time of a read from the
//! page cache (measured in `h5-bench`, docs/benchmarks.md: "Huge pages for fresh arrays").
//! numpy asks the kernel for huge pages on arrays of 4 MiB or more (`madvise(MADV_HUGEPAGE)`
//! in its default allocator on Linux), so h5py's arrays fault 2 MiB at a time; so do ours.

// The one `unsafe` call of this crate: `madvise` on a buffer's own pages. A benchmark proves
// the need (W1 read, docs/benchmarks.md); no safe binding of `madvise` exists for memory the
// global allocator owns.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};

/// Buffers of at least this many bytes get huge pages requested (numpy's threshold).
pub const HUGE_PAGE_MIN: usize = 4 << 20;

/// Whether [`request_huge_pages`] asks the kernel at all (process-wide, as numpy's switch).
static HUGE_PAGES: AtomicBool = AtomicBool::new(true);

/// Turns the huge-page requests for large buffers on or off for the whole process and returns
/// the previous setting (numpy's `np.core.multiarray._set_madvise_hugepage`). On by default.
///
/// Off can be faster where a huge-page fault is dear: in a virtual machine whose balloon
/// reports free memory to the host, the kernel's free 2 MiB blocks are often not backed by the
/// host any more, and zeroing one pays the host's faults too (docs/benchmarks.md, "Huge pages
/// in this virtual machine"); with THP defrag `madvise`, a fault may also wait in direct
/// compaction when free memory is fragmented.
pub fn set_huge_pages(enabled: bool) -> bool {
    HUGE_PAGES.swap(enabled, Ordering::Relaxed)
}

/// Whether large buffers get huge pages requested ([`set_huge_pages`]).
pub fn huge_pages() -> bool {
    HUGE_PAGES.load(Ordering::Relaxed)
}

/// A vector of `n` zeroed elements for a large read: allocated zeroed (`calloc`, so the pages
/// are the kernel's fresh zero pages, not written here) and, when it is at least
/// [`HUGE_PAGE_MIN`] bytes, with transparent huge pages requested for it
/// ([`request_huge_pages`]) before anything touches it.
pub fn zeroed_vec<T: bytemuck::Zeroable>(n: usize) -> Vec<T> {
    let v = bytemuck::zeroed_vec::<T>(n);
    request_huge_pages(&v);
    v
}

/// [`zeroed_vec`], or `None` when the allocation fails (sizes that come from a file must not
/// abort the process).
pub fn try_zeroed_vec<T: bytemuck::Zeroable>(n: usize) -> Option<Vec<T>> {
    let v = bytemuck::allocation::try_zeroed_vec::<T>(n).ok()?;
    request_huge_pages(&v);
    Some(v)
}

/// Asks the kernel to back the whole pages of `buf` with transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`) when `buf` spans at least [`HUGE_PAGE_MIN`] bytes and the requests
/// are on ([`set_huge_pages`]). Only pages not yet touched benefit. A hint: contents are
/// unchanged, and a kernel without transparent huge pages (or another system than Linux)
/// ignores it.
pub fn request_huge_pages<T>(buf: &[T]) {
    let bytes = std::mem::size_of_val(buf);
    if bytes < HUGE_PAGE_MIN || !huge_pages() {
        return;
    }
    advise(buf.as_ptr() as usize, bytes);
}

#[cfg(target_os = "linux")]
fn advise(addr: usize, bytes: usize) {
    const PAGE: usize = 4096;
    let start = addr.next_multiple_of(PAGE);
    let end = (addr + bytes) / PAGE * PAGE;
    if end > start {
        // SAFETY: [start, end) lies inside the buffer, which this process owns and which stays
        // allocated during the call; MADV_HUGEPAGE only sets a flag on the mapping (no page's
        // contents change), and its result is ignored because it is a hint.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_: usize, _: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_vec_is_zero_and_of_the_length_asked() {
        for n in [0, 1, 1000, HUGE_PAGE_MIN / 4 + 3] {
            let v = zeroed_vec::<f32>(n);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&x| x == 0.0));
        }
    }

    #[test]
    fn huge_page_request_keeps_contents() {
        let mut v = vec![7u8; HUGE_PAGE_MIN + 12345];
        v[HUGE_PAGE_MIN] = 9;
        request_huge_pages(&v);
        assert_eq!(v[0], 7);
        assert_eq!(v[HUGE_PAGE_MIN], 9);
        assert_eq!(v[v.len() - 1], 7);
        request_huge_pages(&v[1..10]);
        request_huge_pages::<u64>(&[]);
    }

    /// The `VmFlags` of the mapping holding `addr`, from `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut in_range = false;
        let mut flags = None;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                in_range = lo <= addr && addr < hi;
            } else if in_range && let Some(f) = line.strip_prefix("VmFlags:") {
                flags = Some(f.to_owned());
                break;
            }
        }
        flags.expect("the buffer's mapping is listed")
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn large_buffers_are_marked_for_huge_pages_unless_switched_off() {
        // The kernel lists the flag `hg` (VM_HUGEPAGE) for a mapping that was advised. One test
        // for both settings: the switch is process-wide.
        let advised = |v: &[u8]| {
            let flags = vm_flags(v.as_ptr() as usize + (32 << 20));
            flags.split_whitespace().any(|f| f == "hg")
        };
        let v = zeroed_vec::<u8>(64 << 20);
        assert!(
            advised(&v),
            "{}",
            vm_flags(v.as_ptr() as usize + (32 << 20))
        );
        assert!(set_huge_pages(false), "on by default");
        let off = zeroed_vec::<u8>(64 << 20);
        assert!(!huge_pages());
        assert!(
            !advised(&off),
            "{}",
            vm_flags(off.as_ptr() as usize + (32 << 20))
        );
        assert!(!set_huge_pages(true));
        drop((v, off));
    }
}
