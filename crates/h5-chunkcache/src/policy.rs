//! Replacement policies (SCC-014, SCC-079 .. SCC-084) and the per-dataset budget with its
//! minimums (spec §2.10).
//!
//! A policy knows nothing about chunk contents or I/O. The cache tells it about entries
//! ([`ReplacementPolicy::inserted`], [`touched`](ReplacementPolicy::touched),
//! [`updated`](ReplacementPolicy::updated), [`removed`](ReplacementPolicy::removed),
//! [`set_busy`](ReplacementPolicy::set_busy)) and asks it for the next victim with the current
//! [`Budget`]. Entries are named by [`EntryId`], the cache's slab index.
//!
//! # Mechanism
//!
//! Every policy keeps its entries in a slab indexed by [`EntryId`]. Entries are grouped (one group
//! for [`Lru`] and [`Lfu`], one group per dataset for [`DatasetLru`]); a group holds an intrusive
//! recency list of all its entries and one intrusive recency list per [`VictimClass`] (OQ-23: four
//! queues instead of separator nodes). Every insert or application access gives the entry a fresh
//! stamp from a global clock and moves it to the front of both lists, so each list is ordered by
//! stamp. A class change without a use (flush, OQ-22) keeps the stamp and puts the entry into the
//! new class list at its stamp's position, found by walking the group's recency list outwards from
//! the entry to the nearest neighbour of the new class.
//!
//! # Bounded deferral (SCC-080, OQ-23)
//!
//! The victim is the least recently used entry of the best class that has a usable entry (not
//! busy, not protected by its dataset's minimum). Entries of worse classes that are older than a
//! victim were *passed over*. A *pass* is as many victim choices as there were entries when the
//! pass began (one turnover of the whole set). An entry that has been passed over in
//! `max_deferrals` completed passes becomes eligible regardless of its class, and eligible entries
//! compete in plain LRU order. This is tracked lazily: the policy remembers the highest stamp of any
//! victim so far (the watermark) at the end of each of the last `max_deferrals` passes; an entry is
//! eligible when its stamp is below the watermark of the pass `max_deferrals` passes ago. Since a
//! use always gives a stamp above every earlier victim's, a used entry starts afresh. No per-entry
//! counter has to be updated, so a victim choice costs O(1) plus the busy or protected entries it
//! skips.
//!
//! # Budget (SCC-089, SCC-090, OQ-24, OQ-25)
//!
//! [`Budget`] tracks resident bytes per dataset and the minimums. A minimum is a floor, not a
//! reservation: only datasets with resident bytes count, and when their minimums add up to more than
//! the limit every one is scaled by `limit / sum` (rounded down), so the effective minimums never
//! add up to more than the limit. A dataset is protected while it is at or below its effective
//! minimum and some other dataset is above its own; its entries are then passed over. If every
//! unprotected entry is busy, protected entries are taken after all (the global limit is the harder
//! guarantee; a minimum is only kept "while other datasets are above their own", and busy bytes
//! cannot be reclaimed).

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::DatasetId;

/// Default per-dataset minimum: 1 MiB (OQ-24).
pub const DEFAULT_DATASET_MIN: usize = 1 << 20;

/// Default number of passes a lower-class entry can be passed over before it becomes eligible
/// (OQ-23).
pub const DEFAULT_MAX_DEFERRALS: u32 = 2;

/// Largest accepted `max_deferrals`; larger values are clamped to it.
pub const MAX_DEFERRALS_LIMIT: u32 = 64;

/// The names [`policy_by_name`] accepts.
pub const POLICY_NAMES: [&str; 3] = ["lru", "lfu", "dataset-lru"];

/// Identifies an entry; assigned by the cache (a slab index), dense and reused after removal.
///
/// A policy's slab grows to the largest id it has seen, so ids should stay dense.
/// `EntryId(u32::MAX)` is reserved and ignored by every policy.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct EntryId(pub u32);

/// What the policy needs to know about an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    /// The dataset the chunk belongs to. It never changes for an entry; a policy treats an
    /// [`updated`](ReplacementPolicy::updated) call naming another dataset as a removal followed by
    /// an insertion.
    pub dataset: DatasetId,
    /// Bytes the entry accounts for (informational; the cache keeps the [`Budget`]).
    pub bytes: usize,
    /// The chunk holds data not yet written to the file.
    pub dirty: bool,
    /// The chunk has been fully read or written (spec §2.9, full vs partial coverage).
    pub full: bool,
}

impl EntryInfo {
    /// The entry's priority class.
    pub const fn class(&self) -> VictimClass {
        VictimClass::of(self.dirty, self.full)
    }
}

/// Priority classes, best victims first (SCC-079).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum VictimClass {
    /// Clean and fully accessed: dropping it loses nothing and it is unlikely to be needed again.
    CleanFull,
    /// Clean, partially accessed.
    CleanPartial,
    /// Dirty and fully written: evicting it costs a write.
    DirtyFull,
    /// Dirty, partially written: evicting it costs a write and the rest may still come.
    DirtyPartial,
}

impl VictimClass {
    /// All classes, best victims first.
    pub const ALL: [VictimClass; 4] = [
        VictimClass::CleanFull,
        VictimClass::CleanPartial,
        VictimClass::DirtyFull,
        VictimClass::DirtyPartial,
    ];

    /// The class of a chunk with the given state.
    pub const fn of(dirty: bool, full: bool) -> Self {
        match (dirty, full) {
            (false, true) => VictimClass::CleanFull,
            (false, false) => VictimClass::CleanPartial,
            (true, true) => VictimClass::DirtyFull,
            (true, false) => VictimClass::DirtyPartial,
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Chooses eviction victims. The cache reports every entry's life cycle and asks for victims.
///
/// Calls naming an id the policy does not hold (never inserted, or already removed) are ignored;
/// no sequence of calls panics. Inserting an id that is already held replaces the old entry.
pub trait ReplacementPolicy: Send + Sync + std::fmt::Debug {
    /// The policy's configuration name (see [`policy_by_name`]).
    fn name(&self) -> &'static str;

    /// A new entry, most recently used, not busy.
    fn inserted(&mut self, id: EntryId, info: EntryInfo);

    /// An application read or write of the entry: recency and frequency update.
    fn touched(&mut self, id: EntryId);

    /// The entry's size, dirty or full state changed. This is *not* a use: a flush marking the
    /// entry clean changes neither its recency nor its access count (OQ-22).
    fn updated(&mut self, id: EntryId, info: EntryInfo);

    /// The entry left the cache.
    fn removed(&mut self, id: EntryId);

    /// Marks the entry busy (in the middle of I/O or a callback) or not. Busy entries are never
    /// victims (SCC-084).
    fn set_busy(&mut self, id: EntryId, busy: bool);

    /// The next victim, or `None` if every entry is busy (or there are none).
    ///
    /// Entries of datasets that [`Budget::protected_by_min`] protects are chosen only when every
    /// other entry is busy. The policy does not remove the victim; the cache reports the eviction
    /// with [`removed`](ReplacementPolicy::removed). Asking again without removing it may return
    /// the same entry.
    fn victim(&mut self, budget: &Budget) -> Option<EntryId>;
}

/// The policy configured under `name` ("lru", "lfu" or "dataset-lru", see [`POLICY_NAMES`]) with
/// default settings; `None` for any other name (the cache will report that as a configuration
/// error).
pub fn policy_by_name(name: &str) -> Option<Box<dyn ReplacementPolicy>> {
    match name {
        "lru" => Some(Box::new(Lru::new())),
        "lfu" => Some(Box::new(Lfu::new())),
        "dataset-lru" => Some(Box::new(DatasetLru::new())),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Budget
// ---------------------------------------------------------------------------------------------

/// Per-dataset resident bytes, minimums and the global limit (spec §2.10).
///
/// The cache keeps it up to date with [`add`](Budget::add) and [`sub`](Budget::sub) from the same
/// sizes it uses for its footprint, so the per-dataset totals add up to [`total`](Budget::total).
/// Updates cost O(log d) for d resident datasets; [`quiescent`](Budget::quiescent) and
/// [`active`](Budget::active) are O(d) statistics.
#[derive(Clone, Debug)]
pub struct Budget {
    limit: usize,
    default_min: usize,
    total: usize,
    datasets: HashMap<DatasetId, DatasetBudget>,
    /// Sum of the configured minimums of datasets with resident bytes.
    resident_min_sum: u128,
    /// Datasets with resident bytes, ordered by bytes / minimum (a dataset is above its
    /// effective minimum exactly when this ratio exceeds min(1, limit / resident_min_sum)).
    by_fill: BTreeSet<Fill>,
}

#[derive(Clone, Copy, Debug, Default)]
struct DatasetBudget {
    bytes: usize,
    /// Explicit minimum; `None` means the default.
    min: Option<usize>,
}

#[derive(Clone, Copy, Debug)]
struct Fill {
    bytes: usize,
    min: usize,
    dataset: DatasetId,
}

impl Ord for Fill {
    fn cmp(&self, other: &Self) -> Ordering {
        // bytes / min, with x / 0 above every finite ratio.
        let ratio = match (self.min, other.min) {
            (0, 0) => Ordering::Equal,
            (0, _) => Ordering::Greater,
            (_, 0) => Ordering::Less,
            (a, b) => (self.bytes as u128 * b as u128).cmp(&(other.bytes as u128 * a as u128)),
        };
        ratio.then(self.dataset.cmp(&other.dataset))
    }
}

impl PartialOrd for Fill {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Fill {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Fill {}

impl Budget {
    /// An empty budget with a global `limit` and a `default_min` for every dataset without its
    /// own minimum (usually [`DEFAULT_DATASET_MIN`]), all in bytes.
    pub fn new(limit: usize, default_min: usize) -> Self {
        Self {
            limit,
            default_min,
            total: 0,
            datasets: HashMap::new(),
            resident_min_sum: 0,
            by_fill: BTreeSet::new(),
        }
    }

    /// The global limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Changes the global limit (runtime resizing, spec §2.10); effective minimums follow.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// The minimum of datasets without their own.
    pub fn default_min(&self) -> usize {
        self.default_min
    }

    /// Sets `ds`'s configured minimum. It may exceed the limit: [`effective_min`] scales it.
    ///
    /// [`effective_min`]: Budget::effective_min
    pub fn set_min(&mut self, ds: DatasetId, min: usize) {
        self.modify(ds, |d| d.min = Some(min));
    }

    /// Returns `ds` to the default minimum (for example when the dataset is closed).
    pub fn clear_min(&mut self, ds: DatasetId) {
        self.modify(ds, |d| d.min = None);
    }

    /// `ds`'s configured minimum (its own or the default), before scaling.
    pub fn min(&self, ds: DatasetId) -> usize {
        self.datasets
            .get(&ds)
            .and_then(|d| d.min)
            .unwrap_or(self.default_min)
    }

    /// Records `bytes` more resident bytes for `ds`.
    pub fn add(&mut self, ds: DatasetId, bytes: usize) {
        self.modify(ds, |d| d.bytes = d.bytes.saturating_add(bytes));
    }

    /// Records `bytes` fewer resident bytes for `ds` (never below zero).
    pub fn sub(&mut self, ds: DatasetId, bytes: usize) {
        self.modify(ds, |d| d.bytes = d.bytes.saturating_sub(bytes));
    }

    /// `ds`'s resident bytes.
    pub fn bytes(&self, ds: DatasetId) -> usize {
        self.datasets.get(&ds).map_or(0, |d| d.bytes)
    }

    /// Resident bytes of all datasets.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Number of datasets with resident bytes.
    pub fn resident_datasets(&self) -> usize {
        self.by_fill.len()
    }

    /// `ds`'s effective minimum (OQ-24): 0 if it has no resident bytes; else its configured
    /// minimum, scaled down by `limit / sum` (rounded down) when the configured minimums of all
    /// datasets with resident bytes add up to more than the limit.
    pub fn effective_min(&self, ds: DatasetId) -> usize {
        match self.datasets.get(&ds) {
            Some(d) if d.bytes > 0 => self.scaled(d.min.unwrap_or(self.default_min)),
            _ => 0,
        }
    }

    /// Quiescent memory (OQ-25): the sum of the effective minimums of datasets with resident
    /// bytes. Never more than the limit.
    pub fn quiescent(&self) -> usize {
        let sum: u128 = self
            .by_fill
            .iter()
            .map(|f| self.scaled(f.min) as u128)
            .sum();
        sum.min(self.limit as u128) as usize
    }

    /// Active memory (OQ-25): the rest of the limit, `limit - quiescent`.
    pub fn active(&self) -> usize {
        self.limit - self.quiescent()
    }

    /// True when `ds` has a nonzero effective minimum, is at or below it, and some other dataset
    /// is above its own (SCC-089): `ds`'s entries are then not victims.
    pub fn protected_by_min(&self, ds: DatasetId) -> bool {
        let Some(d) = self.datasets.get(&ds) else {
            return false;
        };
        let floor = self.effective_min(ds);
        if floor == 0 || d.bytes > floor {
            return false;
        }
        // The dataset with the highest fill ratio other than `ds` decides.
        self.by_fill
            .iter()
            .rev()
            .find(|f| f.dataset != ds)
            .is_some_and(|f| f.bytes > self.scaled(f.min))
    }

    /// A resident dataset's configured minimum after scaling.
    fn scaled(&self, min: usize) -> usize {
        let limit = self.limit as u128;
        if self.resident_min_sum <= limit {
            min
        } else {
            // min <= resident_min_sum, so the result is <= limit and fits.
            (min as u128 * limit / self.resident_min_sum) as usize
        }
    }

    fn modify(&mut self, ds: DatasetId, change: impl FnOnce(&mut DatasetBudget)) {
        let old = self.datasets.get(&ds).copied().unwrap_or_default();
        let mut new = old;
        change(&mut new);
        let default_min = self.default_min;
        if old.bytes > 0 {
            let min = old.min.unwrap_or(default_min);
            self.by_fill.remove(&Fill {
                bytes: old.bytes,
                min,
                dataset: ds,
            });
            self.resident_min_sum = self.resident_min_sum.saturating_sub(min as u128);
        }
        if new.bytes > 0 {
            let min = new.min.unwrap_or(default_min);
            self.by_fill.insert(Fill {
                bytes: new.bytes,
                min,
                dataset: ds,
            });
            self.resident_min_sum += min as u128;
        }
        self.total = self
            .total
            .saturating_sub(old.bytes)
            .saturating_add(new.bytes);
        if new.bytes == 0 && new.min.is_none() {
            self.datasets.remove(&ds);
        } else {
            self.datasets.insert(ds, new);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Intrusive lists over slabs
// ---------------------------------------------------------------------------------------------

const NIL: u32 = u32::MAX;

/// Neighbours in one list: `newer` towards the front (most recent), `older` towards the back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Links {
    newer: u32,
    older: u32,
}

impl Links {
    const NONE: Links = Links {
        newer: NIL,
        older: NIL,
    };
}

/// The ends and length of one list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ends {
    newest: u32,
    oldest: u32,
    len: usize,
}

impl Ends {
    const EMPTY: Ends = Ends {
        newest: NIL,
        oldest: NIL,
        len: 0,
    };
}

/// Which of a node's link pairs a list uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chain {
    /// A group's recency list of all its entries (also the dataset list of [`DatasetLru`]).
    Recency,
    /// A group's recency list of one class.
    Class,
}

trait Linked {
    fn links(&self, chain: Chain) -> Links;
    fn links_mut(&mut self, chain: Chain) -> &mut Links;
}

fn push_newest<T: Linked>(items: &mut [T], ends: &mut Ends, i: u32, chain: Chain) {
    let old = ends.newest;
    *items[i as usize].links_mut(chain) = Links {
        newer: NIL,
        older: old,
    };
    if old == NIL {
        ends.oldest = i;
    } else {
        items[old as usize].links_mut(chain).newer = i;
    }
    ends.newest = i;
    ends.len += 1;
}

fn push_oldest<T: Linked>(items: &mut [T], ends: &mut Ends, i: u32, chain: Chain) {
    let old = ends.oldest;
    *items[i as usize].links_mut(chain) = Links {
        newer: old,
        older: NIL,
    };
    if old == NIL {
        ends.newest = i;
    } else {
        items[old as usize].links_mut(chain).older = i;
    }
    ends.oldest = i;
    ends.len += 1;
}

/// Inserts `i` directly behind (older than) `anchor`.
fn insert_older_than<T: Linked>(
    items: &mut [T],
    ends: &mut Ends,
    anchor: u32,
    i: u32,
    chain: Chain,
) {
    let below = items[anchor as usize].links(chain).older;
    *items[i as usize].links_mut(chain) = Links {
        newer: anchor,
        older: below,
    };
    items[anchor as usize].links_mut(chain).older = i;
    if below == NIL {
        ends.oldest = i;
    } else {
        items[below as usize].links_mut(chain).newer = i;
    }
    ends.len += 1;
}

/// Inserts `i` directly in front of (newer than) `anchor`.
fn insert_newer_than<T: Linked>(
    items: &mut [T],
    ends: &mut Ends,
    anchor: u32,
    i: u32,
    chain: Chain,
) {
    let above = items[anchor as usize].links(chain).newer;
    *items[i as usize].links_mut(chain) = Links {
        newer: above,
        older: anchor,
    };
    items[anchor as usize].links_mut(chain).newer = i;
    if above == NIL {
        ends.newest = i;
    } else {
        items[above as usize].links_mut(chain).older = i;
    }
    ends.len += 1;
}

fn unlink<T: Linked>(items: &mut [T], ends: &mut Ends, i: u32, chain: Chain) {
    let l = items[i as usize].links(chain);
    if l.newer == NIL {
        ends.newest = l.older;
    } else {
        items[l.newer as usize].links_mut(chain).older = l.older;
    }
    if l.older == NIL {
        ends.oldest = l.newer;
    } else {
        items[l.older as usize].links_mut(chain).newer = l.newer;
    }
    *items[i as usize].links_mut(chain) = Links::NONE;
    ends.len = ends.len.saturating_sub(1);
}

/// The list's members, newest first.
fn newest_first<'a, T: Linked>(
    items: &'a [T],
    ends: &Ends,
    chain: Chain,
) -> impl Iterator<Item = u32> + 'a {
    let first = (ends.newest != NIL).then_some(ends.newest);
    std::iter::successors(first, move |&i| {
        let next = items[i as usize].links(chain).older;
        (next != NIL).then_some(next)
    })
    .take(ends.len)
}

// ---------------------------------------------------------------------------------------------
// Entries, groups, deferral
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Node {
    live: bool,
    busy: bool,
    class: VictimClass,
    dataset: DatasetId,
    /// Clock value of the last insert or application access.
    stamp: u64,
    /// Application accesses since insertion ([`Lfu`]).
    count: u64,
    /// The group ([`DatasetLru`]: dataset slot; otherwise 0).
    group: u32,
    recency: Links,
    by_class: Links,
}

impl Node {
    const VACANT: Node = Node {
        live: false,
        busy: false,
        class: VictimClass::CleanFull,
        dataset: DatasetId(0),
        stamp: 0,
        count: 0,
        group: NIL,
        recency: Links::NONE,
        by_class: Links::NONE,
    };
}

impl Linked for Node {
    fn links(&self, chain: Chain) -> Links {
        match chain {
            Chain::Recency => self.recency,
            Chain::Class => self.by_class,
        }
    }

    fn links_mut(&mut self, chain: Chain) -> &mut Links {
        match chain {
            Chain::Recency => &mut self.recency,
            Chain::Class => &mut self.by_class,
        }
    }
}

/// A set of entries with one recency list over all and one per class, each ordered by stamp.
#[derive(Clone, Debug)]
struct Group {
    recency: Ends,
    classes: [Ends; 4],
}

impl Group {
    const EMPTY: Group = Group {
        recency: Ends::EMPTY,
        classes: [Ends::EMPTY; 4],
    };

    fn len(&self) -> usize {
        self.recency.len
    }

    /// Adds node `i` (stamp newer than every member) at the front.
    fn attach(&mut self, nodes: &mut [Node], i: u32) {
        let class = nodes[i as usize].class.index();
        push_newest(nodes, &mut self.recency, i, Chain::Recency);
        push_newest(nodes, &mut self.classes[class], i, Chain::Class);
    }

    fn detach(&mut self, nodes: &mut [Node], i: u32) {
        let class = nodes[i as usize].class.index();
        unlink(nodes, &mut self.recency, i, Chain::Recency);
        unlink(nodes, &mut self.classes[class], i, Chain::Class);
    }

    /// Moves node `i`, just given the newest stamp, to the front.
    fn touch(&mut self, nodes: &mut [Node], i: u32) {
        self.detach(nodes, i);
        self.attach(nodes, i);
    }

    /// Moves node `i` to the list of class `new`, at its stamp's position.
    fn reclass(&mut self, nodes: &mut [Node], i: u32, new: VictimClass) {
        let old = nodes[i as usize].class;
        if old == new {
            return;
        }
        unlink(nodes, &mut self.classes[old.index()], i, Chain::Class);
        nodes[i as usize].class = new;
        let stamp = nodes[i as usize].stamp;
        let list = &mut self.classes[new.index()];
        if list.len == 0 || stamp > nodes[list.newest as usize].stamp {
            push_newest(nodes, list, i, Chain::Class);
            return;
        }
        if stamp < nodes[list.oldest as usize].stamp {
            push_oldest(nodes, list, i, Chain::Class);
            return;
        }
        // Strictly inside: walk the recency list both ways to the nearest member of `new`.
        let mut up = nodes[i as usize].recency.newer;
        let mut down = nodes[i as usize].recency.older;
        while up != NIL || down != NIL {
            if down != NIL {
                if nodes[down as usize].class == new {
                    insert_newer_than(nodes, list, down, i, Chain::Class);
                    return;
                }
                down = nodes[down as usize].recency.older;
            }
            if up != NIL {
                if nodes[up as usize].class == new {
                    insert_older_than(nodes, list, up, i, Chain::Class);
                    return;
                }
                up = nodes[up as usize].recency.newer;
            }
        }
        // Unreachable while the lists are consistent; keep the entry reachable regardless.
        push_newest(nodes, list, i, Chain::Class);
    }

    /// The oldest usable member of `class` with a stamp below `below`.
    fn oldest_usable(
        &self,
        nodes: &[Node],
        class: usize,
        below: u64,
        usable: &impl Fn(&Node) -> bool,
    ) -> Option<u32> {
        let list = &self.classes[class];
        let mut i = list.oldest;
        let mut steps = 0;
        while i != NIL && steps < list.len {
            let n = &nodes[i as usize];
            if n.stamp >= below {
                return None;
            }
            if usable(n) {
                return Some(i);
            }
            i = n.by_class.newer;
            steps += 1;
        }
        None
    }

    /// The LRU choice with classes and deferral: the oldest usable entry of the best class that
    /// has one, unless an older usable entry of a worse class has a stamp below `eligible_below`.
    fn pick(
        &self,
        nodes: &[Node],
        eligible_below: u64,
        usable: &impl Fn(&Node) -> bool,
    ) -> Option<u32> {
        let mut best: Option<(u64, u32)> = None;
        for class in 0..4 {
            let below = best.map_or(u64::MAX, |(stamp, _)| stamp.min(eligible_below));
            if below == 0 {
                break;
            }
            if let Some(i) = self.oldest_usable(nodes, class, below, usable) {
                best = Some((nodes[i as usize].stamp, i));
            }
        }
        best.map(|(_, i)| i)
    }
}

/// Bounded deferral bookkeeping (see the module documentation).
#[derive(Clone, Debug)]
struct Deferral {
    max: u32,
    /// Highest stamp of any victim chosen so far (0: none; stamps start at 1).
    watermark: u64,
    /// The watermark at the end of each of the last `max` completed passes, newest last.
    pass_ends: VecDeque<u64>,
    /// Victims chosen in the current pass.
    in_pass: usize,
    /// Length of the current pass: the population when it began.
    pass_len: usize,
}

impl Deferral {
    fn new(max: u32) -> Self {
        Self {
            max: max.min(MAX_DEFERRALS_LIMIT),
            watermark: 0,
            pass_ends: VecDeque::new(),
            in_pass: 0,
            pass_len: 0,
        }
    }

    /// Entries with a stamp below this are eligible whatever their class.
    fn eligible_below(&self) -> u64 {
        if self.max == 0 {
            u64::MAX
        } else if self.pass_ends.len() < self.max as usize {
            0
        } else {
            self.pass_ends.front().copied().unwrap_or(0)
        }
    }

    /// Records a victim choice.
    fn chosen(&mut self, stamp: u64, population: usize) {
        if self.max == 0 {
            return;
        }
        if self.in_pass == 0 {
            self.pass_len = population.max(1);
        }
        self.watermark = self.watermark.max(stamp);
        self.in_pass += 1;
        if self.in_pass >= self.pass_len {
            self.pass_ends.push_back(self.watermark);
            while self.pass_ends.len() > self.max as usize {
                self.pass_ends.pop_front();
            }
            self.in_pass = 0;
        }
    }
}

/// The slab, clock and deferral state every policy shares.
#[derive(Clone, Debug)]
struct Core {
    nodes: Vec<Node>,
    live: usize,
    clock: u64,
    deferral: Deferral,
}

impl Core {
    fn new(max_deferrals: u32) -> Self {
        Self {
            nodes: Vec::new(),
            live: 0,
            clock: 0,
            deferral: Deferral::new(max_deferrals),
        }
    }

    /// The slot of a live entry.
    fn slot(&self, id: EntryId) -> Option<u32> {
        self.nodes
            .get(id.0 as usize)
            .filter(|n| n.live)
            .map(|_| id.0)
    }

    fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    fn node_mut(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Fills the (vacant) slot of `id` with a fresh entry; `None` for the reserved id or a live
    /// slot.
    fn occupy(&mut self, id: EntryId, info: EntryInfo, group: u32) -> Option<u32> {
        if id.0 == NIL {
            return None;
        }
        let i = id.0 as usize;
        if i >= self.nodes.len() {
            self.nodes.resize(i + 1, Node::VACANT);
        }
        if self.nodes[i].live {
            return None;
        }
        let stamp = self.tick();
        self.nodes[i] = Node {
            live: true,
            busy: false,
            class: info.class(),
            dataset: info.dataset,
            stamp,
            count: 0,
            group,
            recency: Links::NONE,
            by_class: Links::NONE,
        };
        self.live += 1;
        Some(id.0)
    }

    fn vacate(&mut self, i: u32) {
        self.nodes[i as usize] = Node::VACANT;
        self.live = self.live.saturating_sub(1);
    }

    fn set_busy(&mut self, id: EntryId, busy: bool) {
        if let Some(i) = self.slot(id) {
            self.node_mut(i).busy = busy;
        }
    }

    /// Records the victim choice `i` and returns its id.
    fn chosen(&mut self, i: u32) -> EntryId {
        let stamp = self.node(i).stamp;
        self.deferral.chosen(stamp, self.live);
        EntryId(i)
    }
}

/// Re-registers an entry whose dataset changed: removed, then inserted, keeping its busy state.
fn rehome(policy: &mut impl ReplacementPolicy, id: EntryId, info: EntryInfo, busy: bool) {
    policy.removed(id);
    policy.inserted(id, info);
    policy.set_busy(id, busy);
}

// ---------------------------------------------------------------------------------------------
// Lru
// ---------------------------------------------------------------------------------------------

/// The default policy (OQ-1): one recency order over the chunks of all datasets, with the SCC-079
/// priority classes and bounded deferral (SCC-080, OQ-23).
///
/// Insert, touch and remove are O(1); a class change without a use is O(distance to the nearest
/// entry of the new class in recency order); a victim choice is O(1) plus the busy and protected
/// entries it skips.
#[derive(Clone, Debug)]
pub struct Lru {
    core: Core,
    group: Group,
}

impl Default for Lru {
    fn default() -> Self {
        Self::new()
    }
}

impl Lru {
    /// An empty policy with [`DEFAULT_MAX_DEFERRALS`].
    pub fn new() -> Self {
        Self::with_max_deferrals(DEFAULT_MAX_DEFERRALS)
    }

    /// An empty policy where a worse-class entry becomes eligible after being passed over in
    /// `max_deferrals` passes (0: plain LRU, classes ignored); clamped to [`MAX_DEFERRALS_LIMIT`].
    pub fn with_max_deferrals(max_deferrals: u32) -> Self {
        Self {
            core: Core::new(max_deferrals),
            group: Group::EMPTY,
        }
    }

    /// The deferral bound in passes.
    pub fn max_deferrals(&self) -> u32 {
        self.core.deferral.max
    }

    /// Number of entries held.
    pub fn len(&self) -> usize {
        self.core.live
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.core.live == 0
    }

    /// All entries, most recently used first.
    pub fn recency_order(&self) -> Vec<EntryId> {
        newest_first(&self.core.nodes, &self.group.recency, Chain::Recency)
            .map(EntryId)
            .collect()
    }
}

impl ReplacementPolicy for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }

    fn inserted(&mut self, id: EntryId, info: EntryInfo) {
        self.removed(id);
        if let Some(i) = self.core.occupy(id, info, 0) {
            self.group.attach(&mut self.core.nodes, i);
        }
    }

    fn touched(&mut self, id: EntryId) {
        let Some(i) = self.core.slot(id) else { return };
        let stamp = self.core.tick();
        self.core.node_mut(i).stamp = stamp;
        self.group.touch(&mut self.core.nodes, i);
    }

    fn updated(&mut self, id: EntryId, info: EntryInfo) {
        let Some(i) = self.core.slot(id) else { return };
        let node = self.core.node(i);
        if node.dataset != info.dataset {
            let busy = node.busy;
            rehome(self, id, info, busy);
        } else {
            self.group.reclass(&mut self.core.nodes, i, info.class());
        }
    }

    fn removed(&mut self, id: EntryId) {
        let Some(i) = self.core.slot(id) else { return };
        self.group.detach(&mut self.core.nodes, i);
        self.core.vacate(i);
    }

    fn set_busy(&mut self, id: EntryId, busy: bool) {
        self.core.set_busy(id, busy);
    }

    fn victim(&mut self, budget: &Budget) -> Option<EntryId> {
        let below = self.core.deferral.eligible_below();
        let nodes = &self.core.nodes;
        let unprotected = |n: &Node| !n.busy && !budget.protected_by_min(n.dataset);
        let i = self
            .group
            .pick(nodes, below, &unprotected)
            .or_else(|| self.group.pick(nodes, below, &|n: &Node| !n.busy))?;
        Some(self.core.chosen(i))
    }
}

// ---------------------------------------------------------------------------------------------
// Lfu
// ---------------------------------------------------------------------------------------------

/// Least frequently used (SCC-082): the victim is the usable entry with the lowest access count
/// (ties: least recently used) in the best SCC-079 class that has one.
///
/// Counts start at 0 on insertion and grow by one per [`touched`](ReplacementPolicy::touched);
/// [`updated`](ReplacementPolicy::updated) (a flush) does not count. Deferral works as for
/// [`Lru`], but an entry of a worse class that has become eligible is taken *before* the best
/// class's least frequently used entry (oldest eligible first): it has stayed unused through
/// `max_deferrals` passes, so its count is stale, and taking it first is what bounds its deferral.
/// Insert, touch, class change and remove are O(log n).
#[derive(Clone, Debug)]
pub struct Lfu {
    core: Core,
    group: Group,
    /// Per class: (count, stamp, slot) of every member.
    by_count: [BTreeSet<(u64, u64, u32)>; 4],
}

impl Default for Lfu {
    fn default() -> Self {
        Self::new()
    }
}

impl Lfu {
    /// An empty policy with [`DEFAULT_MAX_DEFERRALS`].
    pub fn new() -> Self {
        Self::with_max_deferrals(DEFAULT_MAX_DEFERRALS)
    }

    /// An empty policy with the given deferral bound (see [`Lru::with_max_deferrals`]).
    pub fn with_max_deferrals(max_deferrals: u32) -> Self {
        Self {
            core: Core::new(max_deferrals),
            group: Group::EMPTY,
            by_count: Default::default(),
        }
    }

    /// The deferral bound in passes.
    pub fn max_deferrals(&self) -> u32 {
        self.core.deferral.max
    }

    /// Number of entries held.
    pub fn len(&self) -> usize {
        self.core.live
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.core.live == 0
    }

    /// The entry's access count, `None` if it is not held.
    pub fn count(&self, id: EntryId) -> Option<u64> {
        self.core.slot(id).map(|i| self.core.node(i).count)
    }

    fn key(&self, i: u32) -> (usize, (u64, u64, u32)) {
        let n = self.core.node(i);
        (n.class.index(), (n.count, n.stamp, i))
    }

    fn find(&self, budget: &Budget, below: u64, respect_min: bool) -> Option<u32> {
        let nodes = &self.core.nodes;
        let usable = |n: &Node| !(n.busy || (respect_min && budget.protected_by_min(n.dataset)));
        let (class, least) = (0..4).find_map(|class| {
            self.by_count[class]
                .iter()
                .find(|&&(_, _, i)| usable(&nodes[i as usize]))
                .map(|&(_, _, i)| (class, i))
        })?;
        let mut deferred: Option<(u64, u32)> = None;
        for worse in class + 1..4 {
            let bound = deferred.map_or(below, |(stamp, _)| stamp);
            if let Some(i) = self.group.oldest_usable(nodes, worse, bound, &usable) {
                deferred = Some((nodes[i as usize].stamp, i));
            }
        }
        Some(deferred.map_or(least, |(_, i)| i))
    }
}

impl ReplacementPolicy for Lfu {
    fn name(&self) -> &'static str {
        "lfu"
    }

    fn inserted(&mut self, id: EntryId, info: EntryInfo) {
        self.removed(id);
        if let Some(i) = self.core.occupy(id, info, 0) {
            self.group.attach(&mut self.core.nodes, i);
            let (class, key) = self.key(i);
            self.by_count[class].insert(key);
        }
    }

    fn touched(&mut self, id: EntryId) {
        let Some(i) = self.core.slot(id) else { return };
        let (class, key) = self.key(i);
        self.by_count[class].remove(&key);
        let stamp = self.core.tick();
        let node = self.core.node_mut(i);
        node.stamp = stamp;
        node.count = node.count.saturating_add(1);
        self.group.touch(&mut self.core.nodes, i);
        let (class, key) = self.key(i);
        self.by_count[class].insert(key);
    }

    fn updated(&mut self, id: EntryId, info: EntryInfo) {
        let Some(i) = self.core.slot(id) else { return };
        let node = self.core.node(i);
        if node.dataset != info.dataset {
            let busy = node.busy;
            rehome(self, id, info, busy);
            return;
        }
        if node.class == info.class() {
            return;
        }
        let (class, key) = self.key(i);
        self.by_count[class].remove(&key);
        self.group.reclass(&mut self.core.nodes, i, info.class());
        let (class, key) = self.key(i);
        self.by_count[class].insert(key);
    }

    fn removed(&mut self, id: EntryId) {
        let Some(i) = self.core.slot(id) else { return };
        let (class, key) = self.key(i);
        self.by_count[class].remove(&key);
        self.group.detach(&mut self.core.nodes, i);
        self.core.vacate(i);
    }

    fn set_busy(&mut self, id: EntryId, busy: bool) {
        self.core.set_busy(id, busy);
    }

    fn victim(&mut self, budget: &Budget) -> Option<EntryId> {
        let below = self.core.deferral.eligible_below();
        let i = self
            .find(budget, below, true)
            .or_else(|| self.find(budget, below, false))?;
        Some(self.core.chosen(i))
    }
}

// ---------------------------------------------------------------------------------------------
// DatasetLru
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct DatasetSlot {
    dataset: DatasetId,
    group: Group,
    links: Links,
}

impl DatasetSlot {
    const VACANT: DatasetSlot = DatasetSlot {
        dataset: DatasetId(0),
        group: Group::EMPTY,
        links: Links::NONE,
    };
}

impl Linked for DatasetSlot {
    fn links(&self, _: Chain) -> Links {
        self.links
    }

    fn links_mut(&mut self, _: Chain) -> &mut Links {
        &mut self.links
    }
}

/// Seed 004's two-level scheme (SCC-014): a recency list of datasets, each with a recency list of
/// its chunks. Inserting or touching a chunk moves it to the front of its dataset's list and the
/// dataset to the front of the dataset list; the victim comes from the least recently used
/// dataset that has a usable entry, chosen within it as [`Lru`] does (classes and deferral).
///
/// Offered so it can be benchmarked against [`Lru`]; it can evict a hot chunk of one dataset in
/// favour of cold chunks of a dataset touched just now (OQ-1, SCC-083). A dataset leaves the list
/// with its last entry. O(1) per insert, touch and remove.
#[derive(Clone, Debug)]
pub struct DatasetLru {
    core: Core,
    slots: Vec<DatasetSlot>,
    free_slots: Vec<u32>,
    by_dataset: HashMap<DatasetId, u32>,
    order: Ends,
}

impl Default for DatasetLru {
    fn default() -> Self {
        Self::new()
    }
}

impl DatasetLru {
    /// An empty policy with [`DEFAULT_MAX_DEFERRALS`].
    pub fn new() -> Self {
        Self::with_max_deferrals(DEFAULT_MAX_DEFERRALS)
    }

    /// An empty policy with the given deferral bound (see [`Lru::with_max_deferrals`]).
    pub fn with_max_deferrals(max_deferrals: u32) -> Self {
        Self {
            core: Core::new(max_deferrals),
            slots: Vec::new(),
            free_slots: Vec::new(),
            by_dataset: HashMap::new(),
            order: Ends::EMPTY,
        }
    }

    /// The deferral bound in passes.
    pub fn max_deferrals(&self) -> u32 {
        self.core.deferral.max
    }

    /// Number of entries held.
    pub fn len(&self) -> usize {
        self.core.live
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.core.live == 0
    }

    /// Datasets with entries, most recently used first.
    pub fn dataset_order(&self) -> Vec<DatasetId> {
        newest_first(&self.slots, &self.order, Chain::Recency)
            .map(|g| self.slots[g as usize].dataset)
            .collect()
    }

    /// `ds`'s entries, most recently used first (empty if it has none).
    pub fn chunk_order(&self, ds: DatasetId) -> Vec<EntryId> {
        match self.by_dataset.get(&ds) {
            Some(&g) => newest_first(
                &self.core.nodes,
                &self.slots[g as usize].group.recency,
                Chain::Recency,
            )
            .map(EntryId)
            .collect(),
            None => Vec::new(),
        }
    }

    /// The slot of `ds`, created (at the front of the dataset list) if needed.
    fn slot_for(&mut self, ds: DatasetId) -> u32 {
        if let Some(&g) = self.by_dataset.get(&ds) {
            return g;
        }
        let g = match self.free_slots.pop() {
            Some(g) => g,
            None => {
                self.slots.push(DatasetSlot::VACANT);
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[g as usize] = DatasetSlot {
            dataset: ds,
            group: Group::EMPTY,
            links: Links::NONE,
        };
        self.by_dataset.insert(ds, g);
        push_newest(&mut self.slots, &mut self.order, g, Chain::Recency);
        g
    }

    /// Moves dataset slot `g` to the front of the dataset list.
    fn bump(&mut self, g: u32) {
        if self.order.newest != g {
            unlink(&mut self.slots, &mut self.order, g, Chain::Recency);
            push_newest(&mut self.slots, &mut self.order, g, Chain::Recency);
        }
    }

    fn find(&self, budget: &Budget, below: u64, respect_min: bool) -> Option<u32> {
        let nodes = &self.core.nodes;
        let mut g = self.order.oldest;
        let mut steps = 0;
        while g != NIL && steps < self.order.len {
            let slot = &self.slots[g as usize];
            if !(respect_min && budget.protected_by_min(slot.dataset))
                && let Some(i) = slot.group.pick(nodes, below, &|n: &Node| !n.busy)
            {
                return Some(i);
            }
            g = slot.links.newer;
            steps += 1;
        }
        None
    }
}

impl ReplacementPolicy for DatasetLru {
    fn name(&self) -> &'static str {
        "dataset-lru"
    }

    fn inserted(&mut self, id: EntryId, info: EntryInfo) {
        self.removed(id);
        let Some(i) = self.core.occupy(id, info, NIL) else {
            return;
        };
        let g = self.slot_for(info.dataset);
        self.core.node_mut(i).group = g;
        self.slots[g as usize].group.attach(&mut self.core.nodes, i);
        self.bump(g);
    }

    fn touched(&mut self, id: EntryId) {
        let Some(i) = self.core.slot(id) else { return };
        let stamp = self.core.tick();
        let node = self.core.node_mut(i);
        node.stamp = stamp;
        let g = node.group;
        self.slots[g as usize].group.touch(&mut self.core.nodes, i);
        self.bump(g);
    }

    fn updated(&mut self, id: EntryId, info: EntryInfo) {
        let Some(i) = self.core.slot(id) else { return };
        let node = self.core.node(i);
        if node.dataset != info.dataset {
            let busy = node.busy;
            rehome(self, id, info, busy);
        } else {
            let g = node.group;
            self.slots[g as usize]
                .group
                .reclass(&mut self.core.nodes, i, info.class());
        }
    }

    fn removed(&mut self, id: EntryId) {
        let Some(i) = self.core.slot(id) else { return };
        let g = self.core.node(i).group;
        let slot = &mut self.slots[g as usize];
        slot.group.detach(&mut self.core.nodes, i);
        self.core.vacate(i);
        if slot.group.len() == 0 {
            let ds = slot.dataset;
            unlink(&mut self.slots, &mut self.order, g, Chain::Recency);
            self.slots[g as usize] = DatasetSlot::VACANT;
            self.by_dataset.remove(&ds);
            self.free_slots.push(g);
        }
    }

    fn set_busy(&mut self, id: EntryId, busy: bool) {
        self.core.set_busy(id, busy);
    }

    fn victim(&mut self, budget: &Budget) -> Option<EntryId> {
        let below = self.core.deferral.eligible_below();
        let i = self
            .find(budget, below, true)
            .or_else(|| self.find(budget, below, false))?;
        Some(self.core.chosen(i))
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;

    fn info(ds: u64, dirty: bool, full: bool) -> EntryInfo {
        EntryInfo {
            dataset: DatasetId(ds),
            bytes: 1,
            dirty,
            full,
        }
    }

    fn all_policies() -> Vec<Box<dyn ReplacementPolicy>> {
        POLICY_NAMES
            .iter()
            .map(|n| policy_by_name(n).unwrap())
            .collect()
    }

    // --- structural invariants -----------------------------------------------------------

    trait Check {
        fn check(&self);
    }

    fn check_group(nodes: &[Node], group: &Group, g: u32) {
        let members: Vec<u32> = newest_first(nodes, &group.recency, Chain::Recency).collect();
        assert_eq!(members.len(), group.recency.len);
        for w in members.windows(2) {
            assert!(nodes[w[0] as usize].stamp > nodes[w[1] as usize].stamp);
        }
        for &i in &members {
            assert!(nodes[i as usize].live);
            assert_eq!(nodes[i as usize].group, g);
        }
        let mut in_classes = 0;
        for (c, ends) in group.classes.iter().enumerate() {
            let list: Vec<u32> = newest_first(nodes, ends, Chain::Class).collect();
            assert_eq!(list.len(), ends.len);
            in_classes += list.len();
            for w in list.windows(2) {
                assert!(nodes[w[0] as usize].stamp > nodes[w[1] as usize].stamp);
            }
            for &i in &list {
                assert_eq!(nodes[i as usize].class.index(), c);
                assert!(members.contains(&i));
            }
            if let (Some(&first), Some(&last)) = (list.first(), list.last()) {
                assert_eq!(nodes[first as usize].by_class.newer, NIL);
                assert_eq!(nodes[last as usize].by_class.older, NIL);
            }
        }
        assert_eq!(in_classes, members.len());
    }

    impl Check for Lru {
        fn check(&self) {
            let live = self.core.nodes.iter().filter(|n| n.live).count();
            assert_eq!(live, self.core.live);
            assert_eq!(self.group.len(), live);
            check_group(&self.core.nodes, &self.group, 0);
        }
    }

    impl Check for Lfu {
        fn check(&self) {
            let live = self.core.nodes.iter().filter(|n| n.live).count();
            assert_eq!(live, self.core.live);
            assert_eq!(self.group.len(), live);
            check_group(&self.core.nodes, &self.group, 0);
            let keyed: usize = self.by_count.iter().map(BTreeSet::len).sum();
            assert_eq!(keyed, live);
            for (i, n) in self.core.nodes.iter().enumerate() {
                if n.live {
                    assert!(self.by_count[n.class.index()].contains(&(n.count, n.stamp, i as u32)));
                }
            }
        }
    }

    impl Check for DatasetLru {
        fn check(&self) {
            let live = self.core.nodes.iter().filter(|n| n.live).count();
            assert_eq!(live, self.core.live);
            let order: Vec<u32> = newest_first(&self.slots, &self.order, Chain::Recency).collect();
            assert_eq!(order.len(), self.order.len);
            assert_eq!(order.len(), self.by_dataset.len());
            let mut total = 0;
            for &g in &order {
                let slot = &self.slots[g as usize];
                assert_eq!(self.by_dataset.get(&slot.dataset), Some(&g));
                assert!(slot.group.len() > 0);
                check_group(&self.core.nodes, &slot.group, g);
                for i in newest_first(&self.core.nodes, &slot.group.recency, Chain::Recency) {
                    assert_eq!(self.core.nodes[i as usize].dataset, slot.dataset);
                }
                total += slot.group.len();
            }
            assert_eq!(total, live);
        }
    }

    // --- requirement tests -----------------------------------------------------------------

    /// SCC-014: after accessing A1, B1, A2 the dataset order is [A, B] and A's chunk order is
    /// [A2, A1]; touching B1 then brings B back to the front.
    #[test]
    fn scc_014_two_level_recency() {
        let (a, b) = (DatasetId(1), DatasetId(2));
        let (a1, b1, a2) = (EntryId(0), EntryId(1), EntryId(2));
        let mut p = DatasetLru::new();
        p.inserted(a1, info(1, false, true));
        p.inserted(b1, info(2, false, true));
        p.inserted(a2, info(1, false, true));
        assert_eq!(p.dataset_order(), vec![a, b]);
        assert_eq!(p.chunk_order(a), vec![a2, a1]);
        assert_eq!(p.chunk_order(b), vec![b1]);
        p.touched(a1);
        assert_eq!(p.chunk_order(a), vec![a1, a2]);
        p.touched(b1);
        assert_eq!(p.dataset_order(), vec![b, a]);
        p.removed(b1);
        assert_eq!(p.dataset_order(), vec![a]);
        assert!(p.chunk_order(b).is_empty());
        p.check();
    }

    /// SCC-079: one chunk of each kind, inserted worst first (so plain LRU would reverse the
    /// order), is evicted clean-full, clean-partial, dirty-full, dirty-partial by every policy.
    #[test]
    fn scc_079_priority_between_kinds() {
        let budget = Budget::new(usize::MAX, 0);
        for mut p in all_policies() {
            let kinds = [(true, false), (true, true), (false, false), (false, true)];
            for (i, (dirty, full)) in kinds.into_iter().enumerate() {
                p.inserted(EntryId(i as u32), info(7, dirty, full));
            }
            let mut order = Vec::new();
            while let Some(v) = p.victim(&budget) {
                order.push(v);
                p.removed(v);
            }
            assert_eq!(
                order,
                vec![EntryId(3), EntryId(2), EntryId(1), EntryId(0)],
                "{}",
                p.name()
            );
        }
    }

    /// SCC-080: a set holding only dirty, partially written chunks still yields a victim on
    /// every call (in LRU order) until it is empty.
    #[test]
    fn scc_080_only_dirty_partial_still_evicts() {
        let budget = Budget::new(0, 0);
        for mut p in all_policies() {
            for i in 0..50 {
                p.inserted(EntryId(i), info(u64::from(i % 3), true, false));
            }
            let mut order = Vec::new();
            for _ in 0..50 {
                let v = p.victim(&budget).expect("a victim");
                p.removed(v);
                order.push(v.0);
            }
            assert!(p.victim(&budget).is_none());
            if p.name() == "lru" {
                assert_eq!(order, (0..50).collect::<Vec<_>>());
            }
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..50).collect::<Vec<_>>(), "{}", p.name());
        }
    }

    /// SCC-080: with classes mixed, an old dirty-partial entry is passed over while clean
    /// entries stream through, and becomes eligible (and, being oldest, the victim) once it has
    /// been passed over in `max_deferrals` complete passes of 5 victims each.
    #[test]
    fn scc_080_deferred_entry_becomes_eligible() {
        let budget = Budget::new(0, 0);
        for max in [0u32, 1, 2, 3] {
            let policies: Vec<Box<dyn ReplacementPolicy>> = vec![
                Box::new(Lru::with_max_deferrals(max)),
                Box::new(Lfu::with_max_deferrals(max)),
                Box::new(DatasetLru::with_max_deferrals(max)),
            ];
            for mut p in policies {
                let dirty = EntryId(0);
                p.inserted(dirty, info(1, true, false));
                for i in 1..5 {
                    p.inserted(EntryId(i), info(1, false, true));
                }
                let mut next = 5;
                let mut step = 0;
                loop {
                    step += 1;
                    assert!(step <= 100, "{} never evicted the deferred entry", p.name());
                    let v = p.victim(&budget).expect("a victim");
                    if v == dirty {
                        break;
                    }
                    p.removed(v);
                    p.inserted(EntryId(next), info(1, false, true));
                    next += 1;
                }
                assert_eq!(step, 5 * max + 1, "{} with max_deferrals {max}", p.name());
            }
        }
    }

    /// SCC-082: under LFU a chunk accessed 10 times survives over one accessed once but more
    /// recently; under LRU the reverse happens.
    #[test]
    fn scc_082_lfu_versus_lru() {
        let budget = Budget::new(0, 0);
        let (often, once) = (EntryId(0), EntryId(1));
        let run = |p: &mut dyn ReplacementPolicy| {
            p.inserted(often, info(1, false, true));
            for _ in 0..10 {
                p.touched(often);
            }
            p.inserted(once, info(1, false, true));
            p.touched(once);
            p.victim(&budget)
        };
        let mut lfu = Lfu::new();
        assert_eq!(run(&mut lfu), Some(once));
        assert_eq!(lfu.count(often), Some(10));
        assert_eq!(lfu.count(once), Some(1));
        assert_eq!(run(&mut Lru::new()), Some(often));
        lfu.check();
    }

    /// OQ-22: a flush (dirty → clean through `updated`) is not a use: it changes neither the
    /// recency order, nor the dataset order, nor an LFU count.
    #[test]
    fn oq_22_flush_is_not_a_use() {
        let budget = Budget::new(0, 0);
        for mut p in all_policies() {
            for i in 0..3 {
                p.inserted(EntryId(i), info(u64::from(i), true, true));
            }
            for i in [1, 0, 2] {
                p.updated(EntryId(i), info(u64::from(i), false, true));
            }
            let mut order = Vec::new();
            while let Some(v) = p.victim(&budget) {
                order.push(v);
                p.removed(v);
            }
            assert_eq!(
                order,
                vec![EntryId(0), EntryId(1), EntryId(2)],
                "{}",
                p.name()
            );
        }
        let mut lfu = Lfu::new();
        lfu.inserted(EntryId(0), info(1, true, true));
        lfu.touched(EntryId(0));
        lfu.updated(EntryId(0), info(1, false, true));
        assert_eq!(lfu.count(EntryId(0)), Some(1));
        let mut dl = DatasetLru::new();
        dl.inserted(EntryId(0), info(1, true, true));
        dl.inserted(EntryId(1), info(2, false, true));
        dl.updated(EntryId(0), info(1, false, true));
        assert_eq!(dl.dataset_order(), vec![DatasetId(2), DatasetId(1)]);
    }

    /// SCC-084: busy entries are never victims; when everything is busy there is no victim.
    #[test]
    fn scc_084_busy_entries_are_pinned() {
        let budget = Budget::new(0, 0);
        for mut p in all_policies() {
            for i in 0..3 {
                p.inserted(EntryId(i), info(1, false, true));
            }
            p.set_busy(EntryId(0), true);
            assert_eq!(p.victim(&budget), Some(EntryId(1)), "{}", p.name());
            p.set_busy(EntryId(1), true);
            p.set_busy(EntryId(2), true);
            assert_eq!(p.victim(&budget), None, "{}", p.name());
            p.set_busy(EntryId(0), false);
            assert_eq!(p.victim(&budget), Some(EntryId(0)), "{}", p.name());
        }
    }

    #[test]
    fn unknown_ids_are_ignored() {
        let budget = Budget::new(0, 0);
        for mut p in all_policies() {
            p.touched(EntryId(5));
            p.updated(EntryId(5), info(1, true, true));
            p.removed(EntryId(5));
            p.set_busy(EntryId(5), true);
            p.inserted(EntryId(u32::MAX), info(1, false, true));
            assert_eq!(p.victim(&budget), None);
            p.inserted(EntryId(3), info(1, false, true));
            p.removed(EntryId(3));
            p.removed(EntryId(3));
            p.touched(EntryId(3));
            assert_eq!(p.victim(&budget), None);
        }
    }

    #[test]
    fn policy_names() {
        for name in POLICY_NAMES {
            assert_eq!(policy_by_name(name).map(|p| p.name()), Some(name));
        }
        assert!(policy_by_name("mru").is_none());
        assert!(policy_by_name("LRU").is_none());
        assert!(policy_by_name("").is_none());
    }

    // --- simulated cache -------------------------------------------------------------------

    /// A tiny cache over a policy: loads on miss, evicts until the budget holds again. The
    /// entry being loaded is busy while the cache makes room for it, as in the real cache.
    struct Sim {
        policy: Box<dyn ReplacementPolicy>,
        budget: Budget,
        ids: HashMap<(u64, u64), EntryId>,
        slots: Vec<Option<((u64, u64), EntryInfo)>>,
        free: Vec<u32>,
        misses: HashMap<u64, usize>,
        evicted: Vec<(u64, u64)>,
        max_total: usize,
    }

    impl Sim {
        fn new(policy: Box<dyn ReplacementPolicy>, budget: Budget) -> Self {
            Self {
                policy,
                budget,
                ids: HashMap::new(),
                slots: Vec::new(),
                free: Vec::new(),
                misses: HashMap::new(),
                evicted: Vec::new(),
                max_total: 0,
            }
        }

        fn access(&mut self, ds: u64, chunk: u64, bytes: usize) {
            if let Some(&id) = self.ids.get(&(ds, chunk)) {
                self.policy.touched(id);
                return;
            }
            *self.misses.entry(ds).or_default() += 1;
            let id = match self.free.pop() {
                Some(i) => EntryId(i),
                None => {
                    self.slots.push(None);
                    EntryId(self.slots.len() as u32 - 1)
                }
            };
            let info = EntryInfo {
                dataset: DatasetId(ds),
                bytes,
                dirty: false,
                full: true,
            };
            self.slots[id.0 as usize] = Some(((ds, chunk), info));
            self.ids.insert((ds, chunk), id);
            self.policy.inserted(id, info);
            self.policy.set_busy(id, true);
            self.budget.add(info.dataset, bytes);
            while self.budget.total() > self.budget.limit() {
                let v = self
                    .policy
                    .victim(&self.budget)
                    .expect("eviction makes progress");
                assert_ne!(v, id, "the busy entry being loaded was chosen");
                let (key, vinfo) = self.slots[v.0 as usize].take().expect("victim is resident");
                self.ids.remove(&key);
                self.budget.sub(vinfo.dataset, vinfo.bytes);
                self.policy.removed(v);
                self.free.push(v.0);
                self.evicted.push(key);
            }
            self.policy.set_busy(id, false);
            self.max_total = self.max_total.max(self.budget.total());
        }

        fn misses(&self, ds: u64) -> usize {
            self.misses.get(&ds).copied().unwrap_or(0)
        }
    }

    /// SCC-083: dataset A re-reads one hot chunk every other operation while dataset B streams
    /// 10× the cache size through it. With the default Lru and the default minimums, A's hot
    /// chunk is never a victim and never misses after its first load. (Contrast: the
    /// dataset-first scheme without minimums evicts it over and over, OQ-1.)
    #[test]
    fn scc_083_default_policy_is_fair_across_datasets() {
        let chunk = 64 * KIB;
        let limit = MIB; // 16 chunks
        let run = |policy: Box<dyn ReplacementPolicy>, default_min: usize| {
            let mut sim = Sim::new(policy, Budget::new(limit, default_min));
            for n in 0..(10 * limit / chunk) as u64 {
                sim.access(1, 0, chunk);
                sim.access(2, n, chunk);
            }
            assert!(sim.max_total <= limit);
            sim
        };
        let sim = run(Box::<Lru>::default(), DEFAULT_DATASET_MIN);
        assert_eq!(sim.misses(1), 1);
        assert!(!sim.evicted.contains(&(1, 0)));
        assert_eq!(sim.misses(2), 160);
        let sim = run(Box::<Lru>::default(), 0);
        assert_eq!(sim.misses(1), 1, "plain recency alone keeps the hot chunk");
        let sim = run(Box::<DatasetLru>::default(), 0);
        assert!(sim.misses(1) > 100, "dataset-first evicts the hot chunk");
    }

    /// SCC-089: dataset A (1 MiB minimum, 1 MiB hot set, touched only now and then) and dataset
    /// B streaming 10 MiB through a 2 MiB cache: A's entries are never victims and A has no miss
    /// after warm-up. With A's minimum at 0, plain recency would evict its hot set.
    #[test]
    fn scc_089_per_dataset_minimum() {
        let chunk = 64 * KIB;
        let hot = (MIB / chunk) as u64; // 16 chunks
        let run = |a_min: usize| {
            let mut budget = Budget::new(2 * MIB, DEFAULT_DATASET_MIN);
            budget.set_min(DatasetId(1), a_min);
            let mut sim = Sim::new(Box::new(Lru::new()), budget);
            for c in 0..hot {
                sim.access(1, c, chunk);
            }
            for n in 0..(10 * MIB / chunk) as u64 {
                sim.access(2, n, chunk);
                if n % 8 == 7 {
                    sim.access(1, (n / 8) % hot, chunk);
                }
            }
            assert!(sim.max_total <= 2 * MIB);
            sim
        };
        let sim = run(MIB);
        assert_eq!(sim.misses(1) as u64, hot, "only the warm-up loads");
        assert!(sim.evicted.iter().all(|&(ds, _)| ds == 2));
        let sim = run(0);
        assert!(
            sim.misses(1) as u64 > hot,
            "without the minimum A's hot set is evicted"
        );
    }

    /// SCC-090: 100 datasets with 1 MiB minimums and an 8 MiB limit: the effective minimums add
    /// up to at most the limit, quiescent + active == limit, and a simulated cache never goes
    /// above the limit.
    #[test]
    fn scc_090_quiescent_and_active_memory() {
        let limit = 8 * MIB;
        let mut budget = Budget::new(limit, DEFAULT_DATASET_MIN);
        for d in 0..100 {
            budget.add(DatasetId(d), 10 * KIB);
        }
        let sum: usize = (0..100).map(|d| budget.effective_min(DatasetId(d))).sum();
        assert!(sum <= limit);
        assert_eq!(budget.effective_min(DatasetId(0)), limit / 100);
        assert_eq!(budget.quiescent(), sum);
        assert_eq!(budget.quiescent() + budget.active(), limit);

        let chunk = 64 * KIB;
        let mut sim = Sim::new(
            Box::new(Lru::new()),
            Budget::new(limit, DEFAULT_DATASET_MIN),
        );
        let mut x: u64 = 12345;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let ds = (x >> 33) % 100;
            let c = (x >> 20) % 8;
            sim.access(ds, c, chunk);
            let b = &sim.budget;
            assert!(b.total() <= limit);
            assert_eq!(b.quiescent() + b.active(), limit);
            let s: usize = (0..100).map(|d| b.effective_min(DatasetId(d))).sum();
            assert!(s <= limit);
        }
        assert!(sim.max_total <= limit);
    }

    /// OQ-24: a minimum is a floor, not a reservation: datasets without resident bytes have no
    /// effective minimum and count nothing towards quiescent memory.
    #[test]
    fn oq_24_minimum_is_a_floor() {
        let mut b = Budget::new(8 * MIB, DEFAULT_DATASET_MIN);
        for d in 0..1000 {
            b.set_min(DatasetId(d), 4 * MIB);
        }
        assert_eq!(b.quiescent(), 0);
        assert_eq!(b.active(), 8 * MIB);
        assert_eq!(b.effective_min(DatasetId(3)), 0);
        b.add(DatasetId(3), KIB);
        assert_eq!(b.effective_min(DatasetId(3)), 4 * MIB);
        b.add(DatasetId(4), KIB);
        b.add(DatasetId(5), KIB);
        // 12 MiB of minimums over an 8 MiB limit: scaled by 2/3.
        assert_eq!(b.effective_min(DatasetId(3)), 8 * MIB / 3);
        b.set_limit(16 * MIB);
        assert_eq!(b.effective_min(DatasetId(3)), 4 * MIB);
        b.sub(DatasetId(3), KIB);
        assert_eq!(b.effective_min(DatasetId(3)), 0);
        assert_eq!(b.total(), 2 * KIB);
        assert_eq!(b.resident_datasets(), 2);
        // Protection needs another dataset above its own minimum.
        assert!(!b.protected_by_min(DatasetId(4)));
        b.set_min(DatasetId(5), 0);
        assert!(b.protected_by_min(DatasetId(4)));
        assert!(!b.protected_by_min(DatasetId(5)));
    }

    // --- reference model -------------------------------------------------------------------

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Kind {
        Lru,
        Lfu,
        DatasetLru,
    }

    #[derive(Clone, Debug)]
    struct MEntry {
        ds: DatasetId,
        class: VictimClass,
        busy: bool,
        stamp: u64,
        count: u64,
        /// The pass in which a more recently used entry was first chosen as victim.
        first_passed: Option<u64>,
    }

    /// Straightforward O(n) restatement of the policies, with eager deferral counting.
    #[derive(Debug)]
    struct Model {
        kind: Kind,
        max: u64,
        entries: BTreeMap<u32, MEntry>,
        clock: u64,
        ds_stamp: HashMap<DatasetId, u64>,
        pass: u64,
        in_pass: usize,
        pass_len: usize,
    }

    impl Model {
        fn new(kind: Kind, max: u32) -> Self {
            Self {
                kind,
                max: u64::from(max),
                entries: BTreeMap::new(),
                clock: 0,
                ds_stamp: HashMap::new(),
                pass: 0,
                in_pass: 0,
                pass_len: 0,
            }
        }

        fn inserted(&mut self, id: u32, info: EntryInfo) {
            self.clock += 1;
            self.entries.insert(
                id,
                MEntry {
                    ds: info.dataset,
                    class: info.class(),
                    busy: false,
                    stamp: self.clock,
                    count: 0,
                    first_passed: None,
                },
            );
            self.ds_stamp.insert(info.dataset, self.clock);
        }

        fn touched(&mut self, id: u32) {
            if let Some(e) = self.entries.get_mut(&id) {
                self.clock += 1;
                e.stamp = self.clock;
                e.count += 1;
                e.first_passed = None;
                self.ds_stamp.insert(e.ds, self.clock);
            }
        }

        fn updated(&mut self, id: u32, info: EntryInfo) {
            let Some(e) = self.entries.get_mut(&id) else {
                return;
            };
            if e.ds == info.dataset {
                e.class = info.class();
            } else {
                let busy = e.busy;
                self.inserted(id, info);
                self.entries.get_mut(&id).unwrap().busy = busy;
            }
        }

        fn removed(&mut self, id: u32) {
            self.entries.remove(&id);
        }

        fn set_busy(&mut self, id: u32, busy: bool) {
            if let Some(e) = self.entries.get_mut(&id) {
                e.busy = busy;
            }
        }

        fn eligible(&self, e: &MEntry) -> bool {
            self.max == 0 || e.first_passed.is_some_and(|p| p + self.max <= self.pass)
        }

        fn lru_rule(&self, cands: &[(u32, &MEntry)]) -> Option<u32> {
            let best = cands.iter().map(|(_, e)| e.class).min()?;
            cands
                .iter()
                .filter(|(_, e)| e.class == best || self.eligible(e))
                .min_by_key(|(_, e)| e.stamp)
                .map(|&(i, _)| i)
        }

        fn lfu_rule(&self, cands: &[(u32, &MEntry)]) -> Option<u32> {
            let best = cands.iter().map(|(_, e)| e.class).min()?;
            let least = cands
                .iter()
                .filter(|(_, e)| e.class == best)
                .min_by_key(|(_, e)| (e.count, e.stamp))
                .map(|&(i, _)| i);
            let deferred = cands
                .iter()
                .filter(|(_, e)| e.class > best && self.eligible(e))
                .min_by_key(|(_, e)| e.stamp)
                .map(|&(i, _)| i);
            deferred.or(least)
        }

        fn choose(&self, budget: &Budget, respect: bool) -> Option<u32> {
            let usable = |e: &MEntry| !(e.busy || (respect && budget.protected_by_min(e.ds)));
            let cands: Vec<(u32, &MEntry)> = self
                .entries
                .iter()
                .filter(|(_, e)| usable(e))
                .map(|(&i, e)| (i, e))
                .collect();
            match self.kind {
                Kind::Lru => self.lru_rule(&cands),
                Kind::Lfu => self.lfu_rule(&cands),
                Kind::DatasetLru => {
                    let mut datasets: Vec<(u64, DatasetId)> = self
                        .ds_stamp
                        .iter()
                        .filter(|(ds, _)| self.entries.values().any(|e| e.ds == **ds))
                        .map(|(&ds, &s)| (s, ds))
                        .collect();
                    datasets.sort_unstable();
                    datasets.into_iter().find_map(|(_, ds)| {
                        if respect && budget.protected_by_min(ds) {
                            return None;
                        }
                        let mine: Vec<(u32, &MEntry)> = self
                            .entries
                            .iter()
                            .filter(|(_, e)| e.ds == ds && !e.busy)
                            .map(|(&i, e)| (i, e))
                            .collect();
                        self.lru_rule(&mine)
                    })
                }
            }
        }

        fn victim(&mut self, budget: &Budget) -> Option<u32> {
            let v = self
                .choose(budget, true)
                .or_else(|| self.choose(budget, false))?;
            let sv = self.entries[&v].stamp;
            for e in self.entries.values_mut() {
                if e.stamp < sv && e.first_passed.is_none() {
                    e.first_passed = Some(self.pass);
                }
            }
            if self.max > 0 {
                if self.in_pass == 0 {
                    self.pass_len = self.entries.len().max(1);
                }
                self.in_pass += 1;
                if self.in_pass >= self.pass_len {
                    self.pass += 1;
                    self.in_pass = 0;
                }
            }
            Some(v)
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32, EntryInfo),
        Touch(u32),
        /// The bool: keep the entry's current dataset (a plain state change).
        Update(u32, EntryInfo, bool),
        Remove(u32),
        Busy(u32, bool),
        SetMin(u64, usize),
        SetLimit(usize),
        Victim,
        Evict,
    }

    fn op() -> impl Strategy<Value = Op> {
        let id = 0u32..12;
        let info = (0u64..3, 0usize..200, any::<bool>(), any::<bool>()).prop_map(
            |(d, bytes, dirty, full)| EntryInfo {
                dataset: DatasetId(d),
                bytes,
                dirty,
                full,
            },
        );
        prop_oneof![
            4 => (id.clone(), info.clone()).prop_map(|(i, f)| Op::Insert(i, f)),
            4 => id.clone().prop_map(Op::Touch),
            3 => (id.clone(), info, proptest::bool::weighted(0.85))
                .prop_map(|(i, f, keep)| Op::Update(i, f, keep)),
            1 => id.clone().prop_map(Op::Remove),
            2 => (id, any::<bool>()).prop_map(|(i, b)| Op::Busy(i, b)),
            1 => (0u64..3, 0usize..400).prop_map(|(d, m)| Op::SetMin(d, m)),
            1 => (0usize..1000).prop_map(Op::SetLimit),
            2 => Just(Op::Victim),
            3 => Just(Op::Evict),
        ]
    }

    /// Drives a policy, its model and a budget kept as the cache would keep it.
    struct Harness<P> {
        policy: P,
        model: Model,
        budget: Budget,
        infos: HashMap<u32, EntryInfo>,
    }

    impl<P: ReplacementPolicy + Check> Harness<P> {
        fn new(policy: P, model: Model, default_min: usize) -> Self {
            Self {
                policy,
                model,
                budget: Budget::new(500, default_min),
                infos: HashMap::new(),
            }
        }

        fn forget(&mut self, i: u32) {
            if let Some(old) = self.infos.remove(&i) {
                self.budget.sub(old.dataset, old.bytes);
            }
        }

        fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
            match *op {
                Op::Insert(i, info) => {
                    self.forget(i);
                    self.infos.insert(i, info);
                    self.budget.add(info.dataset, info.bytes);
                    self.policy.inserted(EntryId(i), info);
                    self.model.removed(i);
                    self.model.inserted(i, info);
                }
                Op::Touch(i) => {
                    self.policy.touched(EntryId(i));
                    self.model.touched(i);
                }
                Op::Update(i, mut info, keep) => {
                    if let Some(old) = self.infos.get(&i).copied() {
                        if keep {
                            info.dataset = old.dataset;
                        }
                        self.forget(i);
                        self.infos.insert(i, info);
                        self.budget.add(info.dataset, info.bytes);
                    }
                    self.policy.updated(EntryId(i), info);
                    self.model.updated(i, info);
                }
                Op::Remove(i) => {
                    self.forget(i);
                    self.policy.removed(EntryId(i));
                    self.model.removed(i);
                }
                Op::Busy(i, b) => {
                    self.policy.set_busy(EntryId(i), b);
                    self.model.set_busy(i, b);
                }
                Op::SetMin(d, m) => self.budget.set_min(DatasetId(d), m),
                Op::SetLimit(l) => self.budget.set_limit(l),
                Op::Victim | Op::Evict => {
                    let got = self.policy.victim(&self.budget).map(|v| v.0);
                    let want = self.model.victim(&self.budget);
                    prop_assert_eq!(got, want, "policy {}", self.policy.name());
                    if let Some(v) = got {
                        let e = &self.model.entries[&v];
                        prop_assert!(!e.busy);
                        if matches!(op, Op::Evict) {
                            self.forget(v);
                            self.policy.removed(EntryId(v));
                            self.model.removed(v);
                        }
                    } else {
                        prop_assert!(self.model.entries.values().all(|e| e.busy));
                    }
                }
            }
            self.policy.check();
            Ok(())
        }

        /// SCC-074: evict until no victim is left: every victim is live and not busy, the loop
        /// ends within the number of entries, and what is left is busy.
        fn drain(&mut self) -> Result<(), TestCaseError> {
            let live = self.model.entries.len();
            let mut removed = Vec::new();
            for _ in 0..=live {
                let Some(v) = self.policy.victim(&self.budget) else {
                    prop_assert!(self.model.entries.values().all(|e| e.busy));
                    return Ok(());
                };
                prop_assert!(!removed.contains(&v.0), "removed id returned");
                let e = self.model.entries.get(&v.0);
                prop_assert!(e.is_some_and(|e| !e.busy), "victim not live or busy");
                self.forget(v.0);
                self.policy.removed(v);
                self.model.removed(v.0);
                removed.push(v.0);
                self.policy.check();
            }
            prop_assert!(false, "eviction did not terminate");
            Ok(())
        }
    }

    fn run<P: ReplacementPolicy + Check>(
        policy: P,
        kind: Kind,
        max: u32,
        default_min: usize,
        ops: &[Op],
    ) -> Result<(), TestCaseError> {
        let mut h = Harness::new(policy, Model::new(kind, max), default_min);
        for op in ops {
            h.apply(op)?;
        }
        let per_ds: usize = (0..3).map(|d| h.budget.bytes(DatasetId(d))).sum();
        prop_assert_eq!(per_ds, h.budget.total());
        h.drain()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Lru against the reference model: every victim is the live, non-busy entry the
        /// classes, deferral, minimums and recency call for (then SCC-074 progress).
        #[test]
        fn lru_matches_model(
            max in 0u32..4,
            default_min in 0usize..300,
            ops in proptest::collection::vec(op(), 0..120),
        ) {
            run(Lru::with_max_deferrals(max), Kind::Lru, max, default_min, &ops)?;
        }

        /// Lfu against the reference model (then SCC-074 progress).
        #[test]
        fn lfu_matches_model(
            max in 0u32..4,
            default_min in 0usize..300,
            ops in proptest::collection::vec(op(), 0..120),
        ) {
            run(Lfu::with_max_deferrals(max), Kind::Lfu, max, default_min, &ops)?;
        }

        /// DatasetLru against the reference model (then SCC-074 progress).
        #[test]
        fn dataset_lru_matches_model(
            max in 0u32..4,
            default_min in 0usize..300,
            ops in proptest::collection::vec(op(), 0..120),
        ) {
            run(DatasetLru::with_max_deferrals(max), Kind::DatasetLru, max, default_min, &ops)?;
        }

        /// SCC-074: for every policy, after any sequence of calls, evicting the returned victim
        /// and asking again terminates, never returns a removed or busy id, and stops only when
        /// everything left is busy.
        #[test]
        fn scc_074_victim_selection_makes_progress(
            ops in proptest::collection::vec(op(), 0..200),
            default_min in 0usize..300,
        ) {
            run(Lru::new(), Kind::Lru, DEFAULT_MAX_DEFERRALS, default_min, &ops)?;
            run(Lfu::new(), Kind::Lfu, DEFAULT_MAX_DEFERRALS, default_min, &ops)?;
            run(DatasetLru::new(), Kind::DatasetLru, DEFAULT_MAX_DEFERRALS, default_min, &ops)?;
        }

        /// Budget against a naive recomputation: totals, effective minimums (scaled, OQ-24),
        /// quiescent + active == limit (OQ-25) and protection (SCC-089).
        #[test]
        fn budget_matches_naive(
            ops in proptest::collection::vec(
                (0u8..5, 0u64..5, 0usize..3000), 0..150),
            default_min in 0usize..1000,
        ) {
            let mut b = Budget::new(2000, default_min);
            let mut bytes: HashMap<u64, usize> = HashMap::new();
            let mut mins: HashMap<u64, usize> = HashMap::new();
            let mut limit = 2000usize;
            for (kind, d, n) in ops {
                let ds = DatasetId(d);
                match kind {
                    0 => { b.add(ds, n); *bytes.entry(d).or_default() += n; }
                    1 => {
                        b.sub(ds, n);
                        let e = bytes.entry(d).or_default();
                        *e = e.saturating_sub(n);
                    }
                    2 => { b.set_min(ds, n); mins.insert(d, n); }
                    3 => { b.clear_min(ds); mins.remove(&d); }
                    _ => { b.set_limit(n); limit = n; }
                }
                let min_of = |d: u64| mins.get(&d).copied().unwrap_or(default_min);
                let resident: Vec<u64> =
                    (0..5).filter(|d| bytes.get(d).copied().unwrap_or(0) > 0).collect();
                let sum: u128 = resident.iter().map(|&d| min_of(d) as u128).sum();
                let eff = |d: u64| -> usize {
                    if !resident.contains(&d) {
                        0
                    } else if sum <= limit as u128 {
                        min_of(d)
                    } else {
                        (min_of(d) as u128 * limit as u128 / sum) as usize
                    }
                };
                let total: usize = bytes.values().sum();
                prop_assert_eq!(b.total(), total);
                prop_assert_eq!(b.limit(), limit);
                let q: usize = resident.iter().map(|&d| eff(d)).sum();
                prop_assert!(q <= limit);
                prop_assert_eq!(b.quiescent(), q);
                prop_assert_eq!(b.quiescent() + b.active(), limit);
                prop_assert_eq!(b.resident_datasets(), resident.len());
                for d in 0..5 {
                    let have = bytes.get(&d).copied().unwrap_or(0);
                    prop_assert_eq!(b.bytes(DatasetId(d)), have);
                    prop_assert_eq!(b.min(DatasetId(d)), min_of(d));
                    prop_assert_eq!(b.effective_min(DatasetId(d)), eff(d));
                    let other_above = resident
                        .iter()
                        .any(|&o| o != d && bytes[&o] > eff(o));
                    let protected = eff(d) > 0 && have <= eff(d) && other_above;
                    prop_assert_eq!(b.protected_by_min(DatasetId(d)), protected);
                }
            }
        }
    }
}
