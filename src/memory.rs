//! Gives the allocator's free pages back to the system after a burst of parsing.
//!
//! glibc keeps what a program freed in its arenas and returns only the top of the main heap on
//! `free` (even with the Deployment's `trim_threshold`), so a process that parsed a large catalog
//! stays resident at the parse's peak. `malloc_trim(0)` returns every whole free page of every
//! arena; catalogd calls it once a catalog is stored, since it then serves from files.

/// Returns the allocator's whole free pages to the system; true when it gave any back. Cheap
/// (it walks the arenas' free lists), but it locks each arena in turn: call it after a burst,
/// not in a loop. Elsewhere than glibc it does nothing: musl and the others return memory
/// themselves, or have no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_freed_pages() -> bool {
    // SAFETY: `malloc_trim` takes no pointer and has no precondition; glibc serialises it with
    // every other allocator call (it is MT-Safe).
    unsafe { libc::malloc_trim(0) == 1 }
}

/// See the glibc version: nothing to do here.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed_pages() -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// This process's resident heap (`RssAnon` of /proc/self/status), in KiB.
    fn rss_anon_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn freed_small_allocations_between_live_ones_go_back_to_the_system() {
        const MIB: usize = 1 << 20;
        // 64 MiB in small pieces (as a parse leaves them), one in 64 kept: the freed pages lie
        // between live allocations, where glibc's trimming of the heap's top on free never
        // reaches them, wherever this thread's arena had its top.
        let mut pieces: Vec<Option<Box<[u8; 256]>>> = (0..64 * MIB / 256)
            .map(|i| Some(Box::new([i as u8; 256])))
            .collect();
        // Measured before the frees: another test of this process may trim at any moment (the
        // catalog store does), and then the drop shows between here and the end all the same.
        let before = rss_anon_kib();
        for (i, piece) in pieces.iter_mut().enumerate() {
            if i % 64 != 0 {
                *piece = None;
            }
        }
        release_freed_pages();
        let after = rss_anon_kib();
        assert!(
            before.saturating_sub(after) >= 32 * 1024,
            "the heap went from {before} KiB to {after} KiB: less than 32 MiB of the 63 freed went back"
        );
        let kept = pieces.iter().flatten().count();
        assert_eq!(kept, 64 * MIB / 256 / 64, "the live pieces are intact");
    }
}
