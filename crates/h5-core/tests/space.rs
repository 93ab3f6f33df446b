//! The file-space allocator: scripted sequences with exact addresses for every rule (worked
//! out by hand from libhdf5's rules, see `space/mod.rs`), error cases, and a reference-model
//! property test over random allocate/free/extend sequences on every strategy.

use h5_core::space::{
    FreeList, FreeSection, SpaceConfig, SpaceError, SpaceKind, SpaceManager, SpaceStrategy,
};

use SpaceKind::{BTree, LocalHeap, ObjectHeader, RawData};

fn config(strategy: SpaceStrategy) -> SpaceConfig {
    SpaceConfig {
        strategy,
        ..SpaceConfig::default()
    }
}

fn manager(strategy: SpaceStrategy, eoa: u64) -> SpaceManager {
    SpaceManager::new(config(strategy), eoa).unwrap()
}

/// Free lists only: both aggregators disabled, so every miss goes to the EOA.
fn sections_only(eoa: u64) -> SpaceManager {
    let cfg = SpaceConfig {
        meta_block_size: 0,
        small_data_block_size: 0,
        ..SpaceConfig::default()
    };
    SpaceManager::new(cfg, eoa).unwrap()
}

fn sections(space: &SpaceManager) -> Vec<(FreeList, u64, u64)> {
    space
        .free_sections()
        .into_iter()
        .map(|FreeSection { list, addr, len }| (list, addr, len))
        .collect()
}

fn alloc(space: &mut SpaceManager, kind: SpaceKind, len: u64) -> u64 {
    space.allocate(kind, len).unwrap()
}

// ---- aggregators (FSM_AGGR) ----

#[test]
fn aggr_first_three_metadata_allocations_share_one_block() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    assert_eq!(alloc(&mut s, ObjectHeader, 100), 96);
    assert_eq!(alloc(&mut s, BTree, 100), 196);
    assert_eq!(alloc(&mut s, LocalHeap, 100), 296);
    assert_eq!(s.eoa(), 96 + 2048);
    let st = s.stats();
    assert_eq!(
        (st.meta_aggregator.addr, st.meta_aggregator.size),
        (396, 1748)
    );
    assert_eq!(st.allocations, 3);
}

#[test]
fn aggr_raw_data_uses_its_own_block() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    assert_eq!(alloc(&mut s, ObjectHeader, 100), 96);
    assert_eq!(alloc(&mut s, RawData, 100), 2144);
    assert_eq!(alloc(&mut s, SpaceKind::GlobalHeap, 100), 2244);
    assert_eq!(s.eoa(), 2144 + 2048);
    // Metadata still comes from its block, below the raw one.
    assert_eq!(alloc(&mut s, BTree, 100), 196);
}

#[test]
fn aggr_at_eoa_grows_by_one_block() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    for i in 0..20 {
        assert_eq!(alloc(&mut s, BTree, 100), 96 + 100 * i);
    }
    // 48 bytes left at the EOA: the aggregator grows instead of being abandoned.
    assert_eq!(alloc(&mut s, BTree, 100), 2096);
    assert_eq!(s.eoa(), 96 + 2 * 2048);
    assert_eq!(s.stats().meta_aggregator.size, 48 + 2048 - 100);
    assert!(s.free_sections().is_empty());
}

#[test]
fn aggr_large_request_takes_aggregator_place_at_eoa() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    assert_eq!(alloc(&mut s, ObjectHeader, 100), 96);
    // 5000 ≥ the block size and the aggregator ends at the EOA: the file grows by 5000, the
    // request starts where the aggregator did and the aggregator moves up past it.
    assert_eq!(alloc(&mut s, ObjectHeader, 5000), 196);
    assert_eq!(s.eoa(), 2144 + 5000);
    assert_eq!(alloc(&mut s, ObjectHeader, 100), 5196);
}

#[test]
fn aggr_large_request_goes_to_eoa_when_aggregator_is_not_there() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    alloc(&mut s, ObjectHeader, 100);
    assert_eq!(alloc(&mut s, RawData, 100), 2144);
    assert_eq!(alloc(&mut s, ObjectHeader, 3000), 4192);
    assert_eq!(s.eoa(), 7192);
    // The small-data aggregator (at 2244) was not given back: it had handed out < a block.
    assert_eq!(s.stats().small_data_aggregator.addr, 2244);
}

#[test]
fn aggr_abandoned_rest_goes_to_the_free_list_and_is_reused() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    alloc(&mut s, ObjectHeader, 100);
    alloc(&mut s, RawData, 100); // the raw block sits after the metadata block
    // 2000 does not fit the 1948 left and is under a block: new block at the EOA; the old rest
    // becomes a free section.
    assert_eq!(alloc(&mut s, ObjectHeader, 2000), 4192);
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 196, 1948)]);
    // The free list is searched before the aggregator.
    assert_eq!(alloc(&mut s, BTree, 100), 196);
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 296, 1848)]);
}

#[test]
fn aggr_idle_other_aggregator_is_given_back_before_growing() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    alloc(&mut s, RawData, 100); // small-data block 96..2144
    alloc(&mut s, RawData, 2000); // 2000 > 1948 left, at EOA: grows to 4192
    assert_eq!(s.eoa(), 4192);
    let st = s.stats();
    assert_eq!(
        (st.small_data_aggregator.addr, st.small_data_aggregator.size),
        (2196, 1996)
    );
    // It has handed out 2100 ≥ a block and sits at the EOA: a metadata block request gives it
    // back first (EOA 4192 → 2196), then takes its block there.
    assert_eq!(alloc(&mut s, ObjectHeader, 100), 2196);
    assert_eq!(s.eoa(), 2196 + 2048);
    assert_eq!(s.stats().small_data_aggregator.size, 0);
}

#[test]
fn aggr_freed_block_before_aggregator_joins_it() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    assert_eq!(alloc(&mut s, ObjectHeader, 100), 96);
    assert_eq!(alloc(&mut s, BTree, 100), 196);
    s.free(BTree, 196, 100).unwrap();
    assert!(s.free_sections().is_empty());
    assert_eq!(s.stats().meta_aggregator.addr, 196);
    assert_eq!(alloc(&mut s, LocalHeap, 100), 196);
    let report = s.close().unwrap();
    assert_eq!(report.eoa, 296);
    assert!(report.sections.is_empty());
}

#[test]
fn aggr_section_takes_aggregator_when_they_make_a_block_then_shrinks_eoa() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    for want in [96, 196, 296] {
        assert_eq!(alloc(&mut s, BTree, 100), want);
    }
    s.free(BTree, 296, 100).unwrap(); // joins the aggregator: 396 → 296
    assert_eq!(s.stats().meta_aggregator.addr, 296);
    s.free(BTree, 96, 100).unwrap(); // a section of its own
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 96, 100)]);
    // 196..296 merges with 96..196; 200 + 1848 ≥ 2048, so the section takes the aggregator's
    // rest, reaches the EOA and gives everything back.
    s.free(BTree, 196, 100).unwrap();
    assert_eq!(s.eoa(), 96);
    assert!(s.free_sections().is_empty());
    assert_eq!(s.stats().meta_aggregator.size, 0);
}

#[test]
fn aggr_close_gives_back_aggregators_in_file_order() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    let a = alloc(&mut s, ObjectHeader, 100);
    let b = alloc(&mut s, RawData, 100);
    s.free(RawData, b, 100).unwrap();
    s.free(ObjectHeader, a, 100).unwrap();
    let report = s.close().unwrap();
    assert_eq!(report.eoa, 96);
    assert_eq!(report.leaked_bytes, 0);
}

// ---- free-space sections ----

#[test]
fn sections_merge_with_both_neighbours() {
    let mut s = sections_only(1000);
    let blocks = [
        (1000, 100),
        (1100, 50),
        (1150, 200),
        (1350, 10),
        (1360, 100),
    ];
    for (addr, len) in blocks {
        assert_eq!(alloc(&mut s, BTree, len), addr);
    }
    s.free(BTree, 1100, 50).unwrap();
    s.free(BTree, 1350, 10).unwrap();
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 1100, 50),
            (FreeList::Metadata, 1350, 10)
        ]
    );
    s.free(BTree, 1150, 200).unwrap();
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 1100, 260)]);
}

#[test]
fn sections_best_fit_takes_smallest_fitting_then_lowest_address() {
    let mut s = sections_only(1000);
    let blocks = [
        (1000, 100),
        (1100, 8),
        (1108, 40),
        (1148, 8),
        (1156, 40),
        (1196, 8),
        (1204, 30),
        (1234, 8),
    ];
    for (addr, len) in blocks {
        assert_eq!(alloc(&mut s, BTree, len), addr);
    }
    for (addr, len) in [(1108, 40), (1156, 40), (1204, 30)] {
        s.free(BTree, addr, len).unwrap();
    }
    assert_eq!(alloc(&mut s, ObjectHeader, 30), 1204); // exact fit beats the earlier 40s
    assert_eq!(alloc(&mut s, ObjectHeader, 35), 1108); // two 40s: the lower one
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 1143, 5),
            (FreeList::Metadata, 1156, 40)
        ]
    );
    assert_eq!(alloc(&mut s, ObjectHeader, 41), 1242); // nothing fits: EOA
}

#[test]
fn sections_metadata_and_raw_lists_are_separate() {
    let mut s = sections_only(1000);
    assert_eq!(alloc(&mut s, RawData, 100), 1000);
    assert_eq!(alloc(&mut s, BTree, 100), 1100);
    s.free(RawData, 1000, 100).unwrap();
    // Metadata does not reuse raw free space (global heaps would).
    assert_eq!(alloc(&mut s, ObjectHeader, 50), 1200);
    assert_eq!(alloc(&mut s, SpaceKind::GlobalHeap, 50), 1000);
}

#[test]
fn section_touching_eoa_shrinks_it_and_unwinds_the_list() {
    let mut s = sections_only(1000);
    for (addr, len) in [(1000, 100), (1100, 100), (1200, 100), (1300, 100)] {
        assert_eq!(alloc(&mut s, BTree, len), addr);
    }
    s.free(BTree, 1100, 100).unwrap();
    s.free(BTree, 1200, 100).unwrap();
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 1100, 200)]);
    s.free(BTree, 1300, 100).unwrap(); // merges with 1100..1300 and gives all back
    assert_eq!(s.eoa(), 1100);
    assert!(s.free_sections().is_empty());
}

#[test]
fn shrinking_eoa_tries_the_last_section_after_one_disappears() {
    let mut s = sections_only(1000);
    for (addr, len) in [(1000, 100), (1100, 100), (1200, 100), (1300, 100)] {
        assert_eq!(alloc(&mut s, BTree, len), addr);
    }
    s.free(BTree, 1000, 100).unwrap();
    s.free(BTree, 1200, 100).unwrap(); // 1200..1300, not adjacent to 1000..1100
    s.free(RawData, 1300, 100).unwrap(); // another list: at the EOA, shrinks it to 1300
    assert_eq!(s.eoa(), 1300);
    // The raw list's cascade does not look at the metadata list: 1200..1300 stays until close.
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 1000, 100),
            (FreeList::Metadata, 1200, 100)
        ]
    );
    let report = s.close().unwrap();
    assert_eq!(report.eoa, 1200);
    assert_eq!(
        report.sections,
        vec![FreeSection {
            list: FreeList::Metadata,
            addr: 1000,
            len: 100
        }]
    );
}

#[test]
fn threshold_small_sections_are_lost_unless_they_merge() {
    let cfg = SpaceConfig {
        threshold: 64,
        meta_block_size: 0,
        small_data_block_size: 0,
        ..SpaceConfig::default()
    };
    let mut s = SpaceManager::new(cfg, 1000).unwrap();
    for (addr, len) in [(1000, 100), (1100, 32), (1132, 100), (1232, 100)] {
        assert_eq!(alloc(&mut s, BTree, len), addr);
    }
    s.free(BTree, 1100, 32).unwrap();
    assert_eq!(s.stats().leaked_bytes, 32);
    assert!(s.free_sections().is_empty());
    s.free(BTree, 1132, 100).unwrap();
    s.free(BTree, 1000, 100).unwrap();
    // Not merged across the lost 1100..1132.
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 1000, 100),
            (FreeList::Metadata, 1132, 100)
        ]
    );
    assert_eq!(alloc(&mut s, BTree, 16), 1000);
    // Under the threshold, but it merges with 1016..1100: kept.
    s.free(BTree, 1000, 16).unwrap();
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 1000, 100),
            (FreeList::Metadata, 1132, 100)
        ]
    );
    assert_eq!(s.stats().leaked_bytes, 32);
}

// ---- AGGR and NONE ----

#[test]
fn aggr_strategy_does_not_reuse_freed_space() {
    let mut s = manager(SpaceStrategy::Aggr, 96);
    for want in [96, 196, 296] {
        assert_eq!(alloc(&mut s, BTree, 100), want);
    }
    s.free(BTree, 196, 100).unwrap(); // neither at the EOA nor next to the aggregator
    assert_eq!(s.stats().leaked_bytes, 100);
    assert_eq!(alloc(&mut s, BTree, 100), 396);
    s.free(BTree, 396, 100).unwrap(); // next to the aggregator: joins it
    assert_eq!(alloc(&mut s, BTree, 100), 396);
    assert!(s.free_sections().is_empty());
}

#[test]
fn aggr_strategy_freed_in_reverse_order_returns_to_start() {
    let mut s = manager(SpaceStrategy::Aggr, 96);
    let blocks: Vec<(u64, u64)> = [100, 300, 3000, 50]
        .iter()
        .map(|&n| (alloc(&mut s, BTree, n), n))
        .collect();
    for &(addr, len) in blocks.iter().rev() {
        s.free(BTree, addr, len).unwrap();
    }
    assert_eq!(s.close().unwrap().eoa, 96);
}

#[test]
fn none_strategy_allocates_at_eoa_and_reclaims_only_there() {
    let mut s = manager(SpaceStrategy::None, 96);
    assert_eq!(alloc(&mut s, BTree, 100), 96);
    assert_eq!(alloc(&mut s, RawData, 100), 196);
    assert_eq!(alloc(&mut s, BTree, 100), 296);
    assert_eq!(s.eoa(), 396);
    s.free(BTree, 96, 100).unwrap();
    assert_eq!(s.stats().leaked_bytes, 100);
    s.free(BTree, 296, 100).unwrap();
    assert_eq!(s.eoa(), 296);
    s.free(RawData, 196, 100).unwrap();
    assert_eq!(s.eoa(), 196); // 96..196 is lost
    assert_eq!(alloc(&mut s, BTree, 10), 196);
}

// ---- try_extend ----

#[test]
fn extend_at_eoa() {
    let mut s = manager(SpaceStrategy::None, 96);
    assert_eq!(alloc(&mut s, BTree, 100), 96);
    assert!(s.try_extend(BTree, 96, 100, 50).unwrap());
    assert_eq!(s.eoa(), 246);
    assert_eq!(alloc(&mut s, BTree, 10), 246);
    assert!(!s.try_extend(BTree, 96, 150, 10).unwrap());
}

#[test]
fn extend_into_aggregator_at_eoa() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    assert_eq!(alloc(&mut s, BTree, 100), 96);
    // 150 ≤ 10 % of the 1948 left: taken from the aggregator.
    assert!(s.try_extend(BTree, 96, 100, 150).unwrap());
    assert_eq!(s.stats().meta_aggregator.addr, 346);
    assert_eq!(s.eoa(), 2144);
    // 500 > 10 % of 1798: the aggregator grows by a block first.
    assert!(s.try_extend(BTree, 96, 250, 500).unwrap());
    assert_eq!(s.eoa(), 2144 + 2048);
    let st = s.stats().meta_aggregator;
    assert_eq!((st.addr, st.size), (846, 1798 + 2048 - 500));
}

#[test]
fn extend_into_aggregator_not_at_eoa_needs_room() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    assert_eq!(alloc(&mut s, BTree, 100), 96);
    assert_eq!(alloc(&mut s, RawData, 100), 2144); // the metadata block is no longer at the EOA
    assert!(s.try_extend(BTree, 96, 100, 1948).unwrap());
    assert!(!s.try_extend(BTree, 96, 2048, 1).unwrap());
}

#[test]
fn extend_into_following_section() {
    let mut s = sections_only(1000);
    for (addr, len) in [(1000, 100), (1100, 100), (1200, 100)] {
        assert_eq!(alloc(&mut s, BTree, len), addr);
    }
    s.free(BTree, 1100, 100).unwrap();
    assert!(s.try_extend(BTree, 1000, 100, 60).unwrap());
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 1160, 40)]);
    assert!(!s.try_extend(BTree, 1000, 160, 41).unwrap());
    assert!(s.try_extend(BTree, 1000, 160, 40).unwrap());
    assert!(s.free_sections().is_empty());
}

// ---- paged ----

#[test]
fn page_new_file_keeps_rest_of_first_page_for_metadata() {
    let mut s = manager(SpaceStrategy::Page, 96);
    assert_eq!(s.eoa(), 4096);
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 96, 4000)]);
    assert_eq!(alloc(&mut s, ObjectHeader, 100), 96);
}

#[test]
fn page_small_raw_data_gets_its_own_page() {
    let mut s = manager(SpaceStrategy::Page, 96);
    assert_eq!(alloc(&mut s, RawData, 100), 4096);
    assert_eq!(s.eoa(), 8192);
    assert_eq!(alloc(&mut s, SpaceKind::GlobalHeap, 100), 4196);
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 96, 4000),
            (FreeList::RawData, 4296, 3896)
        ]
    );
}

#[test]
fn page_small_never_crosses_boundary() {
    let mut s = manager(SpaceStrategy::Page, 96);
    assert_eq!(alloc(&mut s, BTree, 1500), 96);
    assert_eq!(alloc(&mut s, BTree, 1500), 1596);
    // 1000 left in page 0: the next 1500 opens page 1 rather than crossing into it.
    assert_eq!(alloc(&mut s, BTree, 1500), 4096);
    assert_eq!(alloc(&mut s, BTree, 1500), 5596);
    assert_eq!(alloc(&mut s, BTree, 1000), 3096); // exact fit back in page 0
    assert_eq!(alloc(&mut s, BTree, 1100), 8192); // 1096 left in page 1
    assert_eq!(s.eoa(), 12288);
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 7096, 1096),
            (FreeList::Metadata, 9292, 2996)
        ]
    );
}

#[test]
fn page_small_blocks_are_carved_from_the_front_of_one_section() {
    let mut s = manager(SpaceStrategy::Page, 4096);
    // A fresh raw page: the first block takes its front, the rest is one small raw section
    // that each later block shrinks from the front, until the last takes it whole.
    assert_eq!(alloc(&mut s, RawData, 256), 4096);
    for k in 1..15u64 {
        assert_eq!(alloc(&mut s, RawData, 256), 4096 + 256 * k);
        let next = 4096 + 256 * (k + 1);
        assert_eq!(sections(&s), vec![(FreeList::RawData, next, 8192 - next)]);
    }
    assert_eq!(alloc(&mut s, RawData, 256), 4096 + 256 * 15);
    assert_eq!(sections(&s), vec![]);
    assert_eq!(alloc(&mut s, RawData, 256), 8192);
    assert_eq!(s.eoa(), 12288);
}

#[test]
fn page_small_sections_do_not_merge_across_pages() {
    let mut s = manager(SpaceStrategy::Page, 4096);
    assert_eq!(alloc(&mut s, BTree, 4000), 4096); // 96 left at the end of page 1
    assert_eq!(alloc(&mut s, BTree, 100), 8192);
    assert_eq!(alloc(&mut s, BTree, 100), 8292);
    s.free(BTree, 8192, 100).unwrap(); // adjoins 8096..8192, but in the next page
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 8096, 96),
            (FreeList::Metadata, 8192, 100),
            (FreeList::Metadata, 8392, 3896)
        ]
    );
    // A 150-byte request does not straddle them either.
    assert_eq!(alloc(&mut s, BTree, 150), 8392);
}

#[test]
fn page_small_extension_stops_at_page_boundary() {
    let mut s = manager(SpaceStrategy::Page, 96);
    assert_eq!(alloc(&mut s, BTree, 100), 96);
    assert!(!s.try_extend(BTree, 96, 100, 3901).unwrap());
    assert!(s.try_extend(BTree, 96, 100, 3900).unwrap());
    assert!(s.free_sections().is_empty());
}

#[test]
fn page_large_starts_on_boundary_and_tail_is_large_free_space() {
    let mut s = manager(SpaceStrategy::Page, 96);
    assert_eq!(alloc(&mut s, RawData, 5000), 4096);
    assert_eq!(s.eoa(), 12288);
    assert_eq!(
        sections(&s),
        vec![
            (FreeList::Metadata, 96, 4000),
            (FreeList::Large, 9096, 3192)
        ]
    );
    // A small request does not use the tail (it is not a whole aligned page).
    assert_eq!(alloc(&mut s, RawData, 100), 12288);
    // The block can grow into its tail.
    assert!(s.try_extend(RawData, 4096, 5000, 3192).unwrap());
    // Freed with its growth, it is whole pages and not at the EOA.
    s.free(RawData, 4096, 8192).unwrap();
    assert_eq!(sections(&s)[1], (FreeList::Large, 4096, 8192));
}

#[test]
fn page_large_freed_merges_with_tail_and_shrinks_eoa() {
    let mut s = manager(SpaceStrategy::Page, 96);
    assert_eq!(alloc(&mut s, RawData, 5000), 4096);
    s.free(RawData, 4096, 5000).unwrap();
    assert_eq!(s.eoa(), 4096);
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 96, 4000)]);
}

#[test]
fn page_fully_freed_small_page_becomes_a_free_page() {
    let mut s = manager(SpaceStrategy::Page, 96);
    assert_eq!(alloc(&mut s, RawData, 100), 4096);
    assert_eq!(alloc(&mut s, RawData, 200), 4196);
    s.free(RawData, 4096, 100).unwrap();
    // Page 1 at the EOA: once whole it is a large section, which gives the page back.
    s.free(RawData, 4196, 200).unwrap();
    assert_eq!(s.eoa(), 4096);
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 96, 4000)]);
}

#[test]
fn page_free_page_is_reused_by_the_other_kind() {
    let mut s = manager(SpaceStrategy::Page, 4096);
    assert_eq!(alloc(&mut s, RawData, 100), 4096);
    assert_eq!(alloc(&mut s, ObjectHeader, 4096), 8192);
    s.free(RawData, 4096, 100).unwrap();
    assert_eq!(sections(&s), vec![(FreeList::Large, 4096, 4096)]);
    assert_eq!(alloc(&mut s, ObjectHeader, 200), 4096);
    assert_eq!(sections(&s), vec![(FreeList::Metadata, 4296, 3896)]);
    assert_eq!(s.eoa(), 12288);
}

#[test]
fn page_large_reuse_starts_on_a_boundary() {
    let mut s = manager(SpaceStrategy::Page, 4096);
    assert_eq!(alloc(&mut s, RawData, 5000), 4096); // tail 9096..12288
    assert_eq!(alloc(&mut s, RawData, 4096), 12288);
    s.free(RawData, 4096, 5000).unwrap();
    assert_eq!(sections(&s), vec![(FreeList::Large, 4096, 8192)]);
    assert_eq!(alloc(&mut s, BTree, 4500), 4096);
    assert_eq!(sections(&s), vec![(FreeList::Large, 8596, 3692)]);
    // A page for small metadata must be whole and aligned: 8596..12288 holds none.
    assert_eq!(alloc(&mut s, BTree, 100), 16384);
    assert_eq!(s.eoa(), 20480);
    // A large request needs an aligned start with room after it: not there either.
    assert_eq!(alloc(&mut s, RawData, 4096), 20480);
}

#[test]
fn page_large_extension_at_eoa_keeps_eoa_on_a_boundary() {
    let mut s = manager(SpaceStrategy::Page, 4096);
    assert_eq!(alloc(&mut s, RawData, 8192), 4096);
    assert_eq!(s.eoa(), 12288);
    assert!(s.try_extend(RawData, 4096, 8192, 100).unwrap());
    assert_eq!(s.eoa(), 16384);
    assert_eq!(sections(&s), vec![(FreeList::Large, 12388, 3996)]);
}

#[test]
fn page_close_returns_to_first_page() {
    let mut s = manager(SpaceStrategy::Page, 96);
    let a = alloc(&mut s, RawData, 100);
    let b = alloc(&mut s, BTree, 10_000);
    let c = alloc(&mut s, BTree, 50);
    s.free(BTree, b, 10_000).unwrap();
    s.free(RawData, a, 100).unwrap();
    s.free(BTree, c, 50).unwrap();
    let report = s.close().unwrap();
    assert_eq!(report.eoa, 4096);
    assert_eq!(
        report.sections,
        vec![FreeSection {
            list: FreeList::Metadata,
            addr: 96,
            len: 4000
        }]
    );
}

// ---- persistence ----

#[test]
fn persistent_space_round_trips_and_is_reused() {
    let mut s = sections_only(1000);
    for (addr, len) in [(1000, 100), (1100, 100), (1200, 100), (1300, 100)] {
        assert_eq!(alloc(&mut s, BTree, len), addr);
    }
    s.free(BTree, 1100, 100).unwrap();
    s.free(RawData, 1300, 100).unwrap(); // at the EOA: gone
    let kept = alloc(&mut s, RawData, 50);
    s.free(RawData, kept, 50).unwrap();
    s.close().unwrap();
    let persisted = s.to_persistent();
    assert_eq!(persisted.eoa, 1300);
    assert_eq!(
        persisted.sections,
        vec![FreeSection {
            list: FreeList::Metadata,
            addr: 1100,
            len: 100
        }]
    );
    let cfg = SpaceConfig {
        meta_block_size: 0,
        small_data_block_size: 0,
        ..SpaceConfig::default()
    };
    let mut reopened = SpaceManager::from_persistent(cfg, &persisted).unwrap();
    assert_eq!(reopened.to_persistent(), persisted);
    assert_eq!(alloc(&mut reopened, ObjectHeader, 60), 1100);
    assert_eq!(alloc(&mut reopened, RawData, 60), 1300);
}

#[test]
fn persistent_paged_space_round_trips() {
    let mut s = manager(SpaceStrategy::Page, 96);
    let a = alloc(&mut s, RawData, 5000);
    alloc(&mut s, RawData, 100);
    alloc(&mut s, BTree, 8192);
    s.free(RawData, a, 5000).unwrap();
    let persisted = s.to_persistent();
    let again = SpaceManager::from_persistent(config(SpaceStrategy::Page), &persisted).unwrap();
    assert_eq!(again.free_sections(), s.free_sections());
    assert_eq!(again.eoa(), s.eoa());
}

#[test]
fn persistent_space_corruption_is_refused() {
    use h5_core::space::PersistentSpace;
    let section = |list, addr, len| FreeSection { list, addr, len };
    let cases = [
        (
            SpaceStrategy::FsmAggr,
            2000,
            vec![section(FreeList::Metadata, 1000, 0)],
        ),
        (
            SpaceStrategy::FsmAggr,
            2000,
            vec![section(FreeList::Metadata, 1900, 200)],
        ),
        (
            SpaceStrategy::FsmAggr,
            2000,
            vec![
                section(FreeList::Metadata, 1000, 200),
                section(FreeList::RawData, 1100, 10),
            ],
        ),
        (
            SpaceStrategy::FsmAggr,
            2000,
            vec![section(FreeList::Large, 1000, 200)],
        ),
        (
            SpaceStrategy::Aggr,
            2000,
            vec![section(FreeList::Metadata, 1000, 200)],
        ),
        (
            SpaceStrategy::Page,
            8192,
            vec![section(FreeList::RawData, 4000, 200)],
        ),
        (
            SpaceStrategy::FsmAggr,
            2000,
            vec![section(FreeList::Metadata, u64::MAX - 1, 2)],
        ),
    ];
    for (strategy, eoa, sections) in cases {
        let persisted = PersistentSpace { eoa, sections };
        let got = SpaceManager::from_persistent(config(strategy), &persisted);
        assert!(
            matches!(got, Err(SpaceError::InvalidSection { .. })),
            "{persisted:?}: {got:?}"
        );
    }
    let off_page = PersistentSpace {
        eoa: 5000,
        sections: vec![],
    };
    assert!(matches!(
        SpaceManager::from_persistent(config(SpaceStrategy::Page), &off_page),
        Err(SpaceError::InvalidConfig(_))
    ));
}

// ---- errors ----

#[test]
fn zero_length_requests_are_refused() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    assert_eq!(s.allocate(BTree, 0), Err(SpaceError::ZeroLength));
    let a = alloc(&mut s, BTree, 10);
    assert_eq!(s.free(BTree, a, 0), Err(SpaceError::ZeroLength));
    assert_eq!(s.try_extend(BTree, a, 10, 0), Err(SpaceError::ZeroLength));
    assert_eq!(s.try_extend(BTree, a, 0, 10), Err(SpaceError::ZeroLength));
}

#[test]
fn double_free_is_refused() {
    let mut s = sections_only(1000);
    let a = alloc(&mut s, BTree, 100);
    alloc(&mut s, BTree, 100);
    s.free(BTree, a, 100).unwrap();
    assert!(matches!(
        s.free(BTree, a, 100),
        Err(SpaceError::DoubleFree {
            addr: 1000,
            len: 100,
            free_addr: 1000,
            free_len: 100
        })
    ));
    assert!(matches!(
        s.free(BTree, a + 50, 100),
        Err(SpaceError::DoubleFree { .. })
    ));
}

#[test]
fn free_of_aggregator_space_is_refused() {
    let mut s = manager(SpaceStrategy::FsmAggr, 96);
    alloc(&mut s, BTree, 100);
    assert!(matches!(
        s.free(BTree, 500, 10),
        Err(SpaceError::DoubleFree {
            free_addr: 196,
            free_len: 1948,
            ..
        })
    ));
}

#[test]
fn free_past_eoa_is_refused() {
    let mut s = manager(SpaceStrategy::None, 96);
    let a = alloc(&mut s, BTree, 100);
    s.free(BTree, a, 100).unwrap(); // at the EOA: gone
    assert_eq!(
        s.free(BTree, a, 100),
        Err(SpaceError::PastEoa {
            addr: 96,
            len: 100,
            eoa: 96
        })
    );
    assert!(matches!(
        s.free(BTree, u64::MAX, 2),
        Err(SpaceError::PastEoa { .. })
    ));
}

#[test]
fn page_misaligned_or_crossing_free_is_refused() {
    let mut s = manager(SpaceStrategy::Page, 4096);
    alloc(&mut s, RawData, 3 * 4096);
    assert!(matches!(
        s.free(RawData, 4100, 4096),
        Err(SpaceError::MisalignedLarge { .. })
    ));
    assert!(matches!(
        s.free(RawData, 8000, 200),
        Err(SpaceError::CrossesPage { .. })
    ));
    assert_eq!(s.stats().frees, 0);
}

#[test]
fn overflow_past_address_size_is_refused() {
    let cfg = SpaceConfig {
        strategy: SpaceStrategy::None,
        sizeof_addr: 2,
        ..SpaceConfig::default()
    };
    let mut s = SpaceManager::new(cfg, 65_000).unwrap();
    assert_eq!(s.max_eoa(), 65_534);
    assert_eq!(alloc(&mut s, BTree, 534), 65_000);
    assert!(matches!(
        s.allocate(BTree, 1),
        Err(SpaceError::AddressOverflow {
            eoa: 65_534,
            len: 1,
            ..
        })
    ));
    assert!(matches!(
        s.try_extend(BTree, 65_000, 534, 1),
        Err(SpaceError::AddressOverflow { .. })
    ));
    assert_eq!(s.eoa(), 65_534);
    let big = SpaceManager::new(config(SpaceStrategy::FsmAggr), u64::MAX - 100);
    assert!(matches!(
        big.map(|mut s| s.allocate(RawData, 200)),
        Ok(Err(SpaceError::AddressOverflow { .. }))
    ));
}

#[test]
fn bad_configurations_are_refused() {
    let bad_page = SpaceConfig {
        page_size: 100,
        ..config(SpaceStrategy::Page)
    };
    assert!(matches!(
        SpaceManager::new(bad_page, 0),
        Err(SpaceError::InvalidConfig(_))
    ));
    let bad_addr = SpaceConfig {
        sizeof_addr: 3,
        ..SpaceConfig::default()
    };
    assert!(matches!(
        SpaceManager::new(bad_addr, 0),
        Err(SpaceError::InvalidConfig(_))
    ));
    let small = SpaceConfig {
        sizeof_addr: 4,
        ..SpaceConfig::default()
    };
    assert!(matches!(
        SpaceManager::new(small, 1 << 32),
        Err(SpaceError::EoaTooLarge { .. })
    ));
}

// ---- reference model ----

mod model {
    use std::collections::BTreeMap;

    use h5_core::space::{
        FreeList, SpaceConfig, SpaceError, SpaceKind, SpaceManager, SpaceStrategy,
    };
    use proptest::prelude::*;

    /// One step of a random script. Indices pick a live block modulo their number.
    #[derive(Clone, Debug)]
    pub(super) enum Op {
        Alloc(usize, u64),
        Free(usize),
        /// Free a block, then free it again: must be refused where freed space is tracked.
        DoubleFree(usize),
        Extend(usize, u64),
    }

    fn len() -> impl Strategy<Value = u64> {
        prop_oneof![4 => 1..200u64, 3 => 200..1500u64, 2 => 1500..5000u64, 1 => 5000..20_000u64]
    }

    pub(super) fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            5 => (0..SpaceKind::ALL.len(), len()).prop_map(|(k, n)| Op::Alloc(k, n)),
            3 => any::<usize>().prop_map(Op::Free),
            1 => any::<usize>().prop_map(Op::DoubleFree),
            2 => (any::<usize>(), prop_oneof![1..100u64, 100..3000u64, 3000..9000u64])
                .prop_map(|(i, n)| Op::Extend(i, n)),
        ];
        proptest::collection::vec(op, 1..80)
    }

    pub(super) fn configs(strategy: SpaceStrategy) -> impl Strategy<Value = (SpaceConfig, u64)> {
        (
            prop_oneof![3 => Just(1u64), 1 => Just(64u64)],
            prop_oneof![Just(512u64), Just(4096u64)],
            prop_oneof![Just(0u64), Just(256u64), Just(2048u64)],
            prop_oneof![Just(0u64), Just(256u64), Just(2048u64)],
            prop_oneof![Just(0u64), Just(96u64), Just(800u64), Just(4096u64)],
        )
            .prop_map(move |(threshold, page_size, meta, small, eoa)| {
                let cfg = SpaceConfig {
                    strategy,
                    threshold,
                    page_size,
                    meta_block_size: meta,
                    small_data_block_size: small,
                    ..SpaceConfig::default()
                };
                (cfg, eoa)
            })
    }

    struct Live {
        len: u64,
        kind: SpaceKind,
    }

    pub(super) struct Model {
        space: SpaceManager,
        cfg: SpaceConfig,
        start: u64,
        /// Live blocks by address.
        live: BTreeMap<u64, Live>,
        /// Allocation order, for last-in first-out frees.
        order: Vec<u64>,
        /// Whether frees take the most recent block (so the NONE strategy loses nothing).
        lifo: bool,
    }

    impl Model {
        pub(super) fn new(cfg: SpaceConfig, start: u64, lifo: bool) -> Self {
            let space = SpaceManager::new(cfg, start).unwrap();
            let model = Self {
                space,
                cfg,
                start,
                live: BTreeMap::new(),
                order: Vec::new(),
                lifo,
            };
            model.check();
            model
        }

        /// Whether every freed byte stays accounted for as free space (so a second free is
        /// always detectable).
        fn tracks_everything(&self) -> bool {
            self.cfg.strategy.tracks_free_space() && self.cfg.threshold <= 1
        }

        fn pick(&self, i: usize) -> Option<u64> {
            match self.lifo {
                true => self.order.last().copied(),
                false => (!self.order.is_empty()).then(|| self.order[i % self.order.len()]),
            }
        }

        fn free_block(&mut self, addr: u64) {
            let Live { len, kind } = self.live.remove(&addr).unwrap();
            self.order.retain(|&a| a != addr);
            self.space.free(kind, addr, len).unwrap();
        }

        pub(super) fn apply(&mut self, op: &Op) {
            match *op {
                Op::Alloc(k, len) => {
                    let kind = SpaceKind::ALL[k];
                    let addr = self.space.allocate(kind, len).unwrap();
                    assert!(
                        addr >= self.start,
                        "{addr:#x} below the start {:#x}",
                        self.start
                    );
                    assert!(self.live.insert(addr, Live { len, kind }).is_none());
                    self.order.push(addr);
                }
                Op::Free(i) => {
                    if let Some(addr) = self.pick(i) {
                        self.free_block(addr);
                    }
                }
                Op::DoubleFree(i) => {
                    if let Some(addr) = self.pick(i) {
                        let (len, kind) = (self.live[&addr].len, self.live[&addr].kind);
                        self.free_block(addr);
                        if self.tracks_everything() {
                            let again = self.space.free(kind, addr, len);
                            assert!(
                                matches!(
                                    again,
                                    Err(SpaceError::DoubleFree { .. } | SpaceError::PastEoa { .. })
                                ),
                                "second free of {addr:#x}+{len} gave {again:?}"
                            );
                        }
                    }
                }
                Op::Extend(i, extra) => {
                    if let Some(addr) = self.pick(i) {
                        let live = &self.live[&addr];
                        let (len, kind) = (live.len, live.kind);
                        let before = (
                            self.space.eoa(),
                            self.space.free_sections(),
                            self.space.stats(),
                        );
                        if self.space.try_extend(kind, addr, len, extra).unwrap() {
                            self.live.get_mut(&addr).unwrap().len += extra;
                        } else {
                            let after = (
                                self.space.eoa(),
                                self.space.free_sections(),
                                self.space.stats(),
                            );
                            assert_eq!(before, after, "a refused extension changed the state");
                        }
                    }
                }
            }
            self.check();
        }

        /// Frees everything (last-in first-out or in address order), closes, and checks where
        /// the EOA ends up.
        pub(super) fn finish(mut self) {
            let lifo = self.lifo;
            let order: Vec<u64> = if lifo {
                self.order.iter().rev().copied().collect()
            } else {
                self.live.keys().copied().collect()
            };
            for addr in order {
                self.free_block(addr);
                self.check();
            }
            let report = self.space.close().unwrap();
            self.check();
            let page = self.cfg.page_size;
            let first_page_rest = match self.cfg.strategy {
                SpaceStrategy::Page => self.start.next_multiple_of(page) - self.start,
                _ => 0,
            };
            match self.cfg.strategy {
                SpaceStrategy::FsmAggr | SpaceStrategy::Page if self.cfg.threshold <= 1 => {
                    assert_eq!(report.eoa, self.start + first_page_rest);
                    assert_eq!(report.leaked_bytes, 0);
                    let rest: u64 = report.sections.iter().map(|s| s.len).sum();
                    assert_eq!(rest, first_page_rest);
                }
                SpaceStrategy::None if lifo => assert_eq!(report.eoa, self.start),
                // Otherwise everything left between the start and the EOA is lost space.
                _ => {
                    let rest: u64 = report.sections.iter().map(|s| s.len).sum();
                    assert_eq!(report.eoa - self.start, report.leaked_bytes + rest);
                }
            }
        }

        /// The invariants, after every step.
        fn check(&self) {
            let s = &self.space;
            let eoa = s.eoa();
            let stats = s.stats();
            // Everything between the start and the EOA is live, free, or counted as lost.
            let live_bytes: u64 = self.live.values().map(|l| l.len).sum();
            let free_bytes: u64 = stats.free_bytes.iter().sum();
            let aggr = stats.meta_aggregator.size + stats.small_data_aggregator.size;
            assert_eq!(
                live_bytes + free_bytes + aggr + stats.leaked_bytes,
                eoa - self.start,
                "space not accounted for"
            );
            // Live blocks, sections and aggregator rests are disjoint and below the EOA.
            let mut ranges: Vec<(u64, u64, &str)> =
                self.live.iter().map(|(&a, l)| (a, l.len, "live")).collect();
            ranges.extend(s.free_sections().iter().map(|f| (f.addr, f.len, "section")));
            for ag in [stats.meta_aggregator, stats.small_data_aggregator] {
                if ag.size > 0 {
                    ranges.push((ag.addr, ag.size, "aggregator"));
                }
            }
            ranges.sort_unstable();
            for w in ranges.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "{:?} overlaps {:?}", w[0], w[1]);
            }
            if let Some(last) = ranges.last() {
                assert!(last.0 + last.1 <= eoa, "{last:?} passes the EOA {eoa:#x}");
            }
            // Sections that could merge are merged.
            let paged = self.cfg.strategy == SpaceStrategy::Page;
            let page = self.cfg.page_size;
            let sections = s.free_sections();
            for list in FreeList::ALL {
                let mine: Vec<_> = sections.iter().filter(|f| f.list == list).collect();
                if !self.cfg.strategy.tracks_free_space() {
                    assert!(mine.is_empty(), "sections under {:?}", self.cfg.strategy);
                }
                for w in mine.windows(2) {
                    let (a, b) = (w[0], w[1]);
                    let same_page = a.addr / page == (b.addr + b.len - 1) / page;
                    let small = paged && list != FreeList::Large;
                    assert!(
                        a.addr + a.len != b.addr || (small && !same_page),
                        "unmerged {a:?} {b:?}"
                    );
                }
            }
            if paged {
                self.check_pages(&sections);
            }
        }

        /// The paged invariants the page buffer and VFD SWMR rely on.
        fn check_pages(&self, sections: &[h5_core::space::FreeSection]) {
            let page = self.cfg.page_size;
            let eoa = self.space.eoa();
            assert_eq!(eoa % page, 0, "EOA {eoa:#x} off a page boundary");
            // What each page holds: Some(is_raw) for small blocks/sections of one list, or
            // "large" for pages touched by a large block or large section.
            #[derive(Clone, Copy, PartialEq, Debug)]
            enum Use {
                Small(bool),
                Large,
            }
            let mut pages: BTreeMap<u64, Use> = BTreeMap::new();
            let mut mark = |first: u64, last: u64, u: Use, what: String| {
                for p in first..=last {
                    if let Some(prev) = pages.insert(p, u) {
                        assert!(
                            prev == u && u != Use::Large || prev == Use::Large && u == Use::Large,
                            "page {p} holds {prev:?} and {u:?} ({what})"
                        );
                    }
                }
            };
            for (&addr, l) in &self.live {
                let (first, last) = (addr / page, (addr + l.len - 1) / page);
                if l.len < page {
                    assert_eq!(
                        first, last,
                        "small block {addr:#x}+{} crosses a page",
                        l.len
                    );
                    mark(
                        first,
                        last,
                        Use::Small(l.kind.is_raw()),
                        format!("live {addr:#x}"),
                    );
                } else if addr % page == 0 && l.len == page {
                    // A whole page: a large block, or a small block grown to its page.
                    mark(first, last, Use::Large, format!("live {addr:#x}"));
                } else {
                    assert_eq!(addr % page, 0, "large block {addr:#x} off a page boundary");
                    // The large block's pages host nothing else live (a section may share them).
                    for (&other, ol) in self.live.range(..addr + l.len) {
                        if other != addr && (other + ol.len - 1) / page >= first {
                            assert!(
                                other / page > last,
                                "{other:#x} shares a page with large {addr:#x}"
                            );
                        }
                    }
                    mark(first, last, Use::Large, format!("live {addr:#x}"));
                }
            }
            for f in sections {
                let (first, last) = (f.addr / page, (f.addr + f.len - 1) / page);
                match f.list {
                    FreeList::Large => mark(first, last, Use::Large, format!("section {f:?}")),
                    list => {
                        assert_eq!(first, last, "small section {f:?} crosses a page");
                        mark(
                            first,
                            last,
                            Use::Small(list == FreeList::RawData),
                            format!("section {f:?}"),
                        );
                    }
                }
            }
        }
    }
}

mod properties {
    use super::model::{Model, configs, ops};
    use h5_core::space::SpaceStrategy;
    use proptest::prelude::*;

    fn run(lifo: bool) -> impl Fn(((h5_core::space::SpaceConfig, u64), Vec<super::model::Op>)) {
        move |((cfg, start), script)| {
            let mut model = Model::new(cfg, start, lifo);
            for op in &script {
                model.apply(op);
            }
            model.finish();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn model_fsm_aggr(input in (configs(SpaceStrategy::FsmAggr), ops())) {
            run(false)(input);
        }

        #[test]
        fn model_page(input in (configs(SpaceStrategy::Page), ops())) {
            run(false)(input);
        }

        #[test]
        fn model_aggr(input in (configs(SpaceStrategy::Aggr), ops())) {
            run(true)(input);
        }

        #[test]
        fn model_none_lifo(input in (configs(SpaceStrategy::None), ops())) {
            run(true)(input);
        }

        #[test]
        fn model_none_any_order(input in (configs(SpaceStrategy::None), ops())) {
            run(false)(input);
        }
    }
}
