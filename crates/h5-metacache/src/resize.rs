//! Adaptive resizing (spec §3.14), configuration get/set (§3.15) and the monitoring API (§3.16).

use std::collections::VecDeque;

use crate::cache::{MetadataCache, Place, Slab};
use crate::class::CacheTypes;
use crate::config::{
    CACHE_CONFIG_VERSION, CacheConfig, ConfigError, DecrMode, DerivedFlags, IncrMode,
    MAX_EPOCH_MARKERS,
};
use crate::error::{CacheError, Result};
use crate::flags::EntryFlushFlags;
use crate::list::{Chain, NIL};
use crate::trace::{Outcome, TraceOp, Tracer};

/// Largest number of undelivered resize reports kept when no hook is set.
const MAX_QUEUED_REPORTS: usize = 4096;

/// What an epoch end (or flash increase) decided (MDC-125).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ResizeOutcome {
    /// Hit rate within the thresholds: no change.
    InSpec,
    /// Threshold increase.
    Increase,
    /// Flash increase for a large entry.
    FlashIncrease,
    /// Decrease (threshold or age-out).
    Decrease,
    /// Would increase, but already at `max_size`.
    AtMaxSize,
    /// Would decrease, but already at `min_size`.
    AtMinSize,
    /// Hit rate low, but the cache is not full: no increase.
    NotFull,
    /// Increases are impossible with this configuration.
    IncreaseDisabled,
    /// Decreases are impossible with this configuration.
    DecreaseDisabled,
}

/// One resize report (MDC-125).
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct ResizeReport {
    /// Epoch number (1-based; a flash increase reports the epoch in progress).
    pub epoch: u64,
    /// The decision.
    pub outcome: ResizeOutcome,
    /// Hit rate of the epoch (or so far, for a flash increase).
    pub hit_rate: f64,
    /// Maximum size before.
    pub old_max_size: usize,
    /// Maximum size after.
    pub new_max_size: usize,
    /// Min clean size before.
    pub old_min_clean_size: usize,
    /// Min clean size after.
    pub new_min_clean_size: usize,
    /// Bytes held at the time of the report.
    pub cur_size: usize,
}

impl std::fmt::Display for ResizeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "epoch {}: {:?}, hit rate {:.4}, max size {} -> {}, min clean {} -> {}, size {}",
            self.epoch,
            self.outcome,
            self.hit_rate,
            self.old_max_size,
            self.new_max_size,
            self.old_min_clean_size,
            self.new_min_clean_size,
            self.cur_size
        )
    }
}

/// Epoch marker bookkeeping (MDC-105): a fixed pool of markers (slab slots `0..10`), an active flag
/// each, and a ring recording their LRU order, oldest first.
#[derive(Debug, Default)]
pub(crate) struct EpochMarkers {
    active: [bool; MAX_EPOCH_MARKERS],
    ring: VecDeque<u32>,
}

impl EpochMarkers {
    pub(crate) fn active_count(&self) -> usize {
        self.ring.len()
    }
    pub(crate) fn is_active(&self, slot: u32) -> bool {
        self.active.get(slot as usize).copied().unwrap_or(false)
    }
    pub(crate) fn oldest(&self) -> Option<u32> {
        self.ring.front().copied()
    }
}

impl<T: CacheTypes> MetadataCache<T> {
    // ----- markers -----

    fn insert_marker(&mut self) {
        let Some(free) = (0..MAX_EPOCH_MARKERS as u32).find(|&s| !self.markers.is_active(s)) else {
            return;
        };
        self.markers.active[free as usize] = true;
        self.markers.ring.push_back(free);
        self.lru
            .push_head(&mut self.slab, free, Chain::Main, 0, false);
    }

    fn remove_oldest_marker(&mut self) {
        if let Some(slot) = self.markers.ring.pop_front() {
            self.markers.active[slot as usize] = false;
            self.lru.remove(&mut self.slab, slot, Chain::Main, 0, false);
        }
    }

    fn trim_markers(&mut self, keep: usize) {
        while self.markers.active_count() > keep {
            self.remove_oldest_marker();
        }
    }

    // ----- flash increase (MDC-101) -----

    /// Flash-increase check for an insert, load or growth of `x` bytes.
    pub(crate) fn flash_check(&mut self, x: usize) {
        if !self.derived.flash_size_increase_possible || x <= self.flash_threshold_bytes {
            return;
        }
        let free = self.max_cache_size.saturating_sub(self.index_size);
        let space_needed = x.saturating_sub(free);
        if space_needed == 0 {
            return;
        }
        let increment = (space_needed as f64 * self.config.flash_multiple) as usize;
        let new_max = (self.max_cache_size + increment).min(self.config.max_size);
        if new_max <= self.max_cache_size {
            return;
        }
        let hit_rate = self.hit_rate();
        let (old_max, old_min_clean) = (self.max_cache_size, self.min_clean_size);
        self.set_max_size(new_max);
        self.report(
            ResizeOutcome::FlashIncrease,
            hit_rate,
            old_max,
            old_min_clean,
        );
        // The flash increase restarts the epoch (but leaves the markers alone).
        self.cache_hits = 0;
        self.cache_accesses = 0;
        self.stats.flash_increases += 1;
    }

    fn set_max_size(&mut self, new_max: usize) {
        self.max_cache_size = new_max;
        self.min_clean_size = (new_max as f64 * self.config.min_clean_fraction) as usize;
        self.flash_threshold_bytes = (new_max as f64 * self.config.flash_threshold) as usize;
    }

    fn report(&mut self, outcome: ResizeOutcome, hit_rate: f64, old_max: usize, old_mc: usize) {
        if !self.config.rpt_fcn_enabled {
            return;
        }
        let r = ResizeReport {
            epoch: self.epochs + 1,
            outcome,
            hit_rate,
            old_max_size: old_max,
            new_max_size: self.max_cache_size,
            old_min_clean_size: old_mc,
            new_min_clean_size: self.min_clean_size,
            cur_size: self.index_size,
        };
        if let Some(hook) = self.report_hook.as_mut() {
            hook(&r);
        } else if self.reports.len() < MAX_QUEUED_REPORTS {
            self.reports.push(r);
        }
    }

    // ----- epoch end (MDC-097 .. MDC-106) -----

    /// End-of-epoch processing: increase, else decrease, report, reset counters, cycle markers.
    pub(crate) fn end_of_epoch(&mut self, write_ok: bool) -> Result<()> {
        let hit_rate = self.hit_rate();
        let (old_max, old_mc) = (self.max_cache_size, self.min_clean_size);
        let c = self.config.clone();
        let mut outcome = ResizeOutcome::InSpec;
        let mut increased = false;
        if c.incr_mode == IncrMode::Threshold && hit_rate < c.lower_hr_threshold {
            outcome = if !self.derived.size_increase_possible {
                ResizeOutcome::IncreaseDisabled
            } else if self.max_cache_size >= c.max_size {
                ResizeOutcome::AtMaxSize
            } else if !self.cache_full {
                ResizeOutcome::NotFull
            } else {
                let mut new_max = (self.max_cache_size as f64 * c.increment) as usize;
                if c.apply_max_increment {
                    new_max = new_max.min(self.max_cache_size + c.max_increment);
                }
                new_max = new_max.min(c.max_size);
                self.set_max_size(new_max);
                self.cache_full = false;
                increased = true;
                ResizeOutcome::Increase
            };
        }
        let ageout = matches!(
            c.decr_mode,
            DecrMode::AgeOut | DecrMode::AgeOutWithThreshold
        );
        if !increased && c.decr_mode != DecrMode::Off {
            let threshold_met = hit_rate > c.upper_hr_threshold;
            let wants = match c.decr_mode {
                DecrMode::Off => false,
                DecrMode::Threshold | DecrMode::AgeOutWithThreshold => threshold_met,
                DecrMode::AgeOut => true,
            };
            if wants {
                if !self.derived.size_decrease_possible {
                    if outcome == ResizeOutcome::InSpec {
                        outcome = ResizeOutcome::DecreaseDisabled;
                    }
                } else {
                    if ageout {
                        self.age_out(write_ok)?;
                    }
                    let target = match c.decr_mode {
                        DecrMode::Threshold => (self.max_cache_size as f64 * c.decrement) as usize,
                        _ if c.apply_empty_reserve => {
                            (self.index_size as f64 / (1.0 - c.empty_reserve)) as usize
                        }
                        _ => self.index_size,
                    };
                    if target < self.max_cache_size {
                        if self.max_cache_size <= c.min_size {
                            outcome = ResizeOutcome::AtMinSize;
                        } else {
                            let mut new_max = target.max(c.min_size);
                            if c.apply_max_decrement {
                                new_max = new_max.max(
                                    self.max_cache_size - c.max_decrement.min(self.max_cache_size),
                                );
                            }
                            if new_max < self.max_cache_size {
                                self.set_max_size(new_max);
                                self.size_decreased = true;
                                outcome = ResizeOutcome::Decrease;
                            }
                        }
                    }
                }
            }
        }
        self.report(outcome, hit_rate, old_max, old_mc);
        self.epochs += 1;
        self.cache_hits = 0;
        self.cache_accesses = 0;
        if ageout {
            if self.markers.active_count() >= c.epochs_before_eviction {
                self.remove_oldest_marker();
            }
            self.insert_marker();
        }
        Ok(())
    }

    /// Evict every entry tailward of the oldest marker once `epochs_before_eviction` markers are
    /// active (MDC-103). Dirty entries are written first when writing is permitted (MDC-106).
    fn age_out(&mut self, write_ok: bool) -> Result<()> {
        if self.markers.active_count() < self.config.epochs_before_eviction {
            return Ok(());
        }
        let Some(oldest) = self.markers.oldest() else {
            return Ok(());
        };
        let mut victims = Vec::new();
        let mut cur = self.lru.tail;
        while cur != NIL && cur != oldest {
            if !Slab::<T::Icr>::is_marker(cur) {
                victims.push((cur, self.slab.nodes[cur as usize].generation));
            }
            cur = self.slab.nodes[cur as usize].main.prev;
        }
        for (slot, generation) in victims {
            if !self.slab.live(slot, generation) {
                continue;
            }
            let e = self.slab.entry(slot);
            if e.place != Place::Lru || e.busy() {
                continue;
            }
            if e.dirty && !(write_ok && e.ndirty_children == 0) {
                continue;
            }
            self.flush_single(slot, EntryFlushFlags::INVALIDATE)?;
            self.stats.aged_out += 1;
        }
        Ok(())
    }

    // ----- configuration (MDC-107 .. MDC-122) -----

    /// Validate and apply `config` at once (MDC-121). A rejected configuration changes nothing
    /// (MDC-116).
    pub fn set_config(&mut self, config: &CacheConfig) -> Result<()> {
        let r = self.apply_config(config);
        self.trace_op(
            |_| TraceOp::SetConfig(Box::new(config.clone())),
            r.is_ok().then_some(Outcome::Ok),
        );
        self.after_op();
        r
    }

    pub(crate) fn apply_config(&mut self, config: &CacheConfig) -> Result<()> {
        config.validate()?;
        // Everything that can fail happens before anything changes.
        let new_tracer = if config.open_trace_file {
            Some(Tracer::create(&config.trace_file_name).map_err(CacheError::Trace)?)
        } else {
            None
        };
        let old_max = self.max_cache_size;
        let new_max = if config.set_initial_size {
            config.initial_size
        } else {
            old_max.clamp(config.min_size, config.max_size)
        };
        self.config = config.clone();
        self.config.open_trace_file = false;
        self.config.close_trace_file = false;
        self.derived = DerivedFlags::of(config);
        self.set_max_size(new_max);
        if new_max < old_max {
            self.size_decreased = true;
        }
        match config.decr_mode {
            DecrMode::AgeOut | DecrMode::AgeOutWithThreshold => {
                self.trim_markers(config.epochs_before_eviction)
            }
            _ => self.trim_markers(0),
        }
        if config.close_trace_file {
            self.tracer = None;
        }
        if let Some(t) = new_tracer {
            self.tracer = Some(t);
        }
        self.config.trace_file_name = self
            .tracer
            .as_ref()
            .map(|t| t.name().to_string())
            .unwrap_or_default();
        Ok(())
    }

    /// The active configuration (MDC-122). `version` must be the current version (MDC-108).
    pub fn get_config(&self, version: u32) -> Result<CacheConfig> {
        if version != CACHE_CONFIG_VERSION {
            return Err(ConfigError {
                field: "version",
                reason: "unknown configuration version",
            }
            .into());
        }
        Ok(self.config.clone())
    }

    /// Derived flags of the active configuration (MDC-098).
    pub fn derived_flags(&self) -> DerivedFlags {
        self.derived
    }

    /// Whether the cache has had to make space since the last threshold increase (MDC-099).
    pub fn is_full(&self) -> bool {
        self.cache_full
    }

    // ----- monitoring (MDC-123 .. MDC-125) -----

    /// Hits / accesses since the last reset; 0.0 before any access (MDC-123).
    ///
    /// While resizing is enabled these counters reset every epoch; resetting them by hand shortens
    /// the epoch and disturbs the resize code.
    pub fn hit_rate(&self) -> f64 {
        if self.cache_accesses == 0 {
            0.0
        } else {
            self.cache_hits as f64 / self.cache_accesses as f64
        }
    }

    /// Accesses and hits counted since the last reset.
    pub fn hit_rate_counters(&self) -> (u64, u64) {
        (self.cache_accesses, self.cache_hits)
    }

    /// Reset the hit-rate counters (see the warning on [`hit_rate`](Self::hit_rate)).
    pub fn reset_hit_rate_stats(&mut self) {
        self.cache_hits = 0;
        self.cache_accesses = 0;
    }

    /// Deliver resize reports to `hook` instead of queueing them (MDC-125).
    pub fn set_resize_report_hook(&mut self, hook: impl FnMut(&ResizeReport) + Send + 'static) {
        self.report_hook = Some(Box::new(hook));
    }

    /// Take the queued resize reports (when no hook is set).
    pub fn take_resize_reports(&mut self) -> Vec<ResizeReport> {
        std::mem::take(&mut self.reports)
    }
}
