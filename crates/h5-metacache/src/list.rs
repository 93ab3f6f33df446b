//! Intrusive doubly linked lists over the slab (spec §3.2).
//!
//! Every slot has three pairs of links: `main` (LRU, protected list or pinned list: exactly one while
//! the slot holds an entry), `aux` (clean or dirty LRU projection, only while on the LRU) and `hash`
//! (the index bucket chain). Lists store slot numbers, never pointers, so a removal can never leave a
//! dangling reference, and stale handles are caught by generation counters (MDC-012, MDC-024).

/// "No slot".
pub(crate) const NIL: u32 = u32::MAX;

/// One pair of links.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Links {
    pub(crate) prev: u32,
    pub(crate) next: u32,
}

impl Default for Links {
    fn default() -> Self {
        Self {
            prev: NIL,
            next: NIL,
        }
    }
}

/// Which pair of links a list uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Chain {
    Main,
    Aux,
}

/// A list head with its length and byte total. Epoch markers are linked but not counted (MDC-013).
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub(crate) head: u32,
    pub(crate) tail: u32,
    pub(crate) len: usize,
    pub(crate) size: usize,
}

impl Default for List {
    fn default() -> Self {
        Self {
            head: NIL,
            tail: NIL,
            len: 0,
            size: 0,
        }
    }
}

/// Access to the link pairs of slots, implemented by the slab.
pub(crate) trait LinkStore {
    fn links(&self, slot: u32, chain: Chain) -> Links;
    fn links_mut(&mut self, slot: u32, chain: Chain) -> &mut Links;
}

impl List {
    /// Link `slot` at the head. `counted` is false for epoch markers.
    pub(crate) fn push_head<S: LinkStore>(
        &mut self,
        store: &mut S,
        slot: u32,
        chain: Chain,
        size: usize,
        counted: bool,
    ) {
        let old_head = self.head;
        *store.links_mut(slot, chain) = Links {
            prev: NIL,
            next: old_head,
        };
        if old_head == NIL {
            self.tail = slot;
        } else {
            store.links_mut(old_head, chain).prev = slot;
        }
        self.head = slot;
        if counted {
            self.len += 1;
            self.size += size;
        }
    }

    /// Unlink `slot`, which must be on this list.
    pub(crate) fn remove<S: LinkStore>(
        &mut self,
        store: &mut S,
        slot: u32,
        chain: Chain,
        size: usize,
        counted: bool,
    ) {
        let Links { prev, next } = store.links(slot, chain);
        if prev == NIL {
            self.head = next;
        } else {
            store.links_mut(prev, chain).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            store.links_mut(next, chain).prev = prev;
        }
        *store.links_mut(slot, chain) = Links::default();
        if counted {
            self.len -= 1;
            self.size -= size;
        }
    }

    /// Iterate slots from head to tail (used by checks and snapshots; not while mutating).
    pub(crate) fn iter<'a, S: LinkStore>(
        &self,
        store: &'a S,
        chain: Chain,
    ) -> impl Iterator<Item = u32> + 'a {
        let mut cur = self.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                None
            } else {
                let here = cur;
                cur = store.links(here, chain).next;
                Some(here)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Store(Vec<Links>);
    impl LinkStore for Store {
        fn links(&self, slot: u32, _c: Chain) -> Links {
            self.0[slot as usize]
        }
        fn links_mut(&mut self, slot: u32, _c: Chain) -> &mut Links {
            &mut self.0[slot as usize]
        }
    }

    #[test]
    fn push_remove_keep_order_and_totals() {
        let mut s = Store(vec![Links::default(); 4]);
        let mut l = List::default();
        for i in 0..4 {
            l.push_head(&mut s, i, Chain::Main, 10, i != 3);
        }
        assert_eq!(
            l.iter(&s, Chain::Main).collect::<Vec<_>>(),
            vec![3, 2, 1, 0]
        );
        assert_eq!((l.len, l.size), (3, 30));
        l.remove(&mut s, 1, Chain::Main, 10, true);
        l.remove(&mut s, 3, Chain::Main, 10, false);
        assert_eq!(l.iter(&s, Chain::Main).collect::<Vec<_>>(), vec![2, 0]);
        assert_eq!((l.len, l.size, l.head, l.tail), (2, 20, 2, 0));
        l.remove(&mut s, 0, Chain::Main, 10, true);
        l.remove(&mut s, 2, Chain::Main, 10, true);
        assert_eq!((l.len, l.size, l.head, l.tail), (0, 0, NIL, NIL));
    }
}
