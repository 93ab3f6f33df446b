//! The cache configuration record (spec §3.15): 30 fields, two defaults, validation.
//!
//! A configuration is applied whole or not at all (MDC-116). `serde` support lets configurations come
//! from JSON files (the replay tool's `--config`); an enum value outside its set fails to parse.

use serde::{Deserialize, Serialize};

/// The only configuration version this crate understands.
pub const CACHE_CONFIG_VERSION: u32 = 1;
/// Smallest allowed cache size bound.
pub const MIN_MAX_CACHE_SIZE: usize = 1024;
/// Largest allowed cache size bound.
pub const MAX_MAX_CACHE_SIZE: usize = 128 * 1024 * 1024;
/// Allowed epoch lengths.
pub const EPOCH_LENGTH_RANGE: (u64, u64) = (100, 1_000_000);
/// Largest number of epoch markers (and of `epochs_before_eviction`).
pub const MAX_EPOCH_MARKERS: usize = 10;
/// Allowed `dirty_bytes_threshold` range.
pub const DIRTY_BYTES_THRESHOLD_RANGE: (usize, usize) = (512, 32 * 1024 * 1024);
/// Longest trace-file name.
pub const MAX_TRACE_FILE_NAME_LEN: usize = 1024;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// How the maximum size grows at epoch ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum IncrMode {
    /// Never.
    Off,
    /// When the hit rate falls below `lower_hr_threshold` and the cache is full.
    Threshold,
}

/// Whether a single large entry can grow the cache at once.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum FlashIncrMode {
    /// Never.
    Off,
    /// Add space proportional to the entry's size.
    AddSpace,
}

/// How the maximum size shrinks.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum DecrMode {
    /// Never.
    Off,
    /// When the hit rate rises above `upper_hr_threshold`.
    Threshold,
    /// Evict entries untouched for `epochs_before_eviction` epochs and shrink to what remains.
    AgeOut,
    /// Age-out, only in epochs whose hit rate is above `upper_hr_threshold`.
    AgeOutWithThreshold,
}

/// Parallel metadata write strategy.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum MetadataWriteStrategy {
    /// Rank 0 writes all metadata.
    Process0Only,
    /// Rank 0 distributes the writes over all ranks.
    Distributed,
}

macro_rules! try_from_i32 {
    ($t:ty, $what:literal, [$($n:literal => $v:expr),*]) => {
        impl TryFrom<i32> for $t {
            type Error = ConfigError;
            /// Convert a raw value (as it arrives through FFI); values outside the set are errors.
            fn try_from(v: i32) -> Result<Self, ConfigError> {
                match v {
                    $($n => Ok($v),)*
                    _ => Err(ConfigError { field: $what, reason: "value outside the defined set" }),
                }
            }
        }
    };
}
try_from_i32!(IncrMode, "incr_mode", [0 => IncrMode::Off, 1 => IncrMode::Threshold]);
try_from_i32!(FlashIncrMode, "flash_incr_mode", [0 => FlashIncrMode::Off, 1 => FlashIncrMode::AddSpace]);
try_from_i32!(DecrMode, "decr_mode", [0 => DecrMode::Off, 1 => DecrMode::Threshold, 2 => DecrMode::AgeOut, 3 => DecrMode::AgeOutWithThreshold]);
try_from_i32!(MetadataWriteStrategy, "metadata_write_strategy", [0 => MetadataWriteStrategy::Process0Only, 1 => MetadataWriteStrategy::Distributed]);

/// A rejected configuration: which field, and why.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("`{field}`: {reason}")]
pub struct ConfigError {
    /// The offending field.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// The metadata cache configuration (MDC-107), with the field names of HDF5's `H5AC_cache_config_t`.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Must equal [`CACHE_CONFIG_VERSION`].
    pub version: u32,
    /// Deliver a [`ResizeReport`](crate::ResizeReport) at every epoch end and flash increase.
    pub rpt_fcn_enabled: bool,
    /// One-shot: open the trace file `trace_file_name`.
    pub open_trace_file: bool,
    /// One-shot: close the trace file.
    pub close_trace_file: bool,
    /// Trace file to open.
    pub trace_file_name: String,
    /// Whether the replacement policy may evict (and write) entries.
    pub evictions_enabled: bool,
    /// Set the current maximum to `initial_size` when applied.
    pub set_initial_size: bool,
    /// Maximum size to start from.
    pub initial_size: usize,
    /// Fraction of the maximum kept clean (or free).
    pub min_clean_fraction: f64,
    /// Upper bound for adaptive resizing.
    pub max_size: usize,
    /// Lower bound for adaptive resizing.
    pub min_size: usize,
    /// Cache accesses (protects) per epoch.
    pub epoch_length: u64,
    /// Increase mode.
    pub incr_mode: IncrMode,
    /// Hit rate below which the cache grows.
    pub lower_hr_threshold: f64,
    /// Growth factor.
    pub increment: f64,
    /// Whether `max_increment` caps growth.
    pub apply_max_increment: bool,
    /// Largest growth per epoch.
    pub max_increment: usize,
    /// Flash increase mode.
    pub flash_incr_mode: FlashIncrMode,
    /// Multiple of the missing space to add in a flash increase.
    pub flash_multiple: f64,
    /// Entry size, as a fraction of the maximum, that triggers a flash increase.
    pub flash_threshold: f64,
    /// Decrease mode.
    pub decr_mode: DecrMode,
    /// Hit rate above which the cache shrinks.
    pub upper_hr_threshold: f64,
    /// Shrink factor (threshold mode).
    pub decrement: f64,
    /// Whether `max_decrement` caps shrinking.
    pub apply_max_decrement: bool,
    /// Largest reduction per epoch.
    pub max_decrement: usize,
    /// Epochs an entry may stay untouched before age-out evicts it.
    pub epochs_before_eviction: usize,
    /// Whether age-out leaves `empty_reserve` of the cache free.
    pub apply_empty_reserve: bool,
    /// Fraction of the cache age-out leaves empty.
    pub empty_reserve: f64,
    /// Parallel: dirty bytes between sync points.
    pub dirty_bytes_threshold: usize,
    /// Parallel: who writes metadata at sync points.
    pub metadata_write_strategy: MetadataWriteStrategy,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self::default_serial()
    }
}

impl CacheConfig {
    /// The default serial configuration (MDC-118).
    pub fn default_serial() -> Self {
        Self {
            version: CACHE_CONFIG_VERSION,
            rpt_fcn_enabled: false,
            open_trace_file: false,
            close_trace_file: false,
            trace_file_name: String::new(),
            evictions_enabled: true,
            set_initial_size: true,
            initial_size: 2 * MIB,
            min_clean_fraction: 0.01,
            max_size: 32 * MIB,
            min_size: MIB,
            epoch_length: 50_000,
            incr_mode: IncrMode::Threshold,
            lower_hr_threshold: 0.9,
            increment: 2.0,
            apply_max_increment: true,
            max_increment: 4 * MIB,
            flash_incr_mode: FlashIncrMode::AddSpace,
            flash_multiple: 1.4,
            flash_threshold: 0.25,
            decr_mode: DecrMode::AgeOutWithThreshold,
            upper_hr_threshold: 0.999,
            decrement: 0.9,
            apply_max_decrement: true,
            max_decrement: MIB,
            epochs_before_eviction: 3,
            apply_empty_reserve: true,
            empty_reserve: 0.1,
            dirty_bytes_threshold: 256 * KIB,
            metadata_write_strategy: MetadataWriteStrategy::Distributed,
        }
    }

    /// The default parallel configuration (MDC-119): the serial one with more clean space and a
    /// smaller flash multiple.
    pub fn default_parallel() -> Self {
        Self {
            min_clean_fraction: 0.3,
            flash_multiple: 1.0,
            metadata_write_strategy: MetadataWriteStrategy::Distributed,
            ..Self::default_serial()
        }
    }

    /// A fixed-size configuration: every resize mode off, the maximum pinned at `size`.
    pub fn fixed_size(size: usize) -> Self {
        Self {
            initial_size: size,
            max_size: size.max(MIN_MAX_CACHE_SIZE),
            min_size: size.clamp(MIN_MAX_CACHE_SIZE, MAX_MAX_CACHE_SIZE),
            incr_mode: IncrMode::Off,
            flash_incr_mode: FlashIncrMode::Off,
            decr_mode: DecrMode::Off,
            ..Self::default_serial()
        }
    }

    /// Check every rule of MDC-108 .. MDC-115 and E-11. Fields of modes that are off are not checked.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn err(field: &'static str, reason: &'static str) -> Result<(), ConfigError> {
            Err(ConfigError { field, reason })
        }
        fn unit(v: f64) -> bool {
            (0.0..=1.0).contains(&v)
        }
        let size_range = MIN_MAX_CACHE_SIZE..=MAX_MAX_CACHE_SIZE;
        if self.version != CACHE_CONFIG_VERSION {
            return err("version", "unknown configuration version");
        }
        if !size_range.contains(&self.max_size) {
            return err("max_size", "must be in [1 KiB, 128 MiB]");
        }
        if !size_range.contains(&self.min_size) {
            return err("min_size", "must be in [1 KiB, 128 MiB]");
        }
        if self.min_size > self.max_size {
            return err("min_size", "must not exceed max_size");
        }
        if self.set_initial_size && !(self.min_size..=self.max_size).contains(&self.initial_size) {
            return err("initial_size", "must be in [min_size, max_size]");
        }
        if !unit(self.min_clean_fraction) {
            return err("min_clean_fraction", "must be in [0, 1]");
        }
        if !(EPOCH_LENGTH_RANGE.0..=EPOCH_LENGTH_RANGE.1).contains(&self.epoch_length) {
            return err("epoch_length", "must be in [100, 1000000]");
        }
        if self.incr_mode == IncrMode::Threshold {
            if !unit(self.lower_hr_threshold) {
                return err("lower_hr_threshold", "must be in [0, 1]");
            }
            if self.increment.is_nan() || self.increment < 1.0 {
                return err("increment", "must be at least 1.0");
            }
        }
        if self.flash_incr_mode == FlashIncrMode::AddSpace {
            if !(0.1..=1.0).contains(&self.flash_threshold) {
                return err("flash_threshold", "must be in [0.1, 1.0]");
            }
            if !(0.1..=10.0).contains(&self.flash_multiple) {
                return err("flash_multiple", "must be in [0.1, 10.0]");
            }
        }
        match self.decr_mode {
            DecrMode::Off => {}
            DecrMode::Threshold => {
                if !unit(self.upper_hr_threshold) {
                    return err("upper_hr_threshold", "must be in [0, 1]");
                }
                if !unit(self.decrement) {
                    return err("decrement", "must be in [0, 1]");
                }
            }
            DecrMode::AgeOut | DecrMode::AgeOutWithThreshold => {
                if !(1..=MAX_EPOCH_MARKERS).contains(&self.epochs_before_eviction) {
                    return err("epochs_before_eviction", "must be in [1, 10]");
                }
                if self.apply_empty_reserve && !unit(self.empty_reserve) {
                    return err("empty_reserve", "must be in [0, 1]");
                }
                if self.decr_mode == DecrMode::AgeOutWithThreshold && !unit(self.upper_hr_threshold)
                {
                    return err("upper_hr_threshold", "must be in [0, 1]");
                }
            }
        }
        if self.incr_mode == IncrMode::Threshold
            && matches!(
                self.decr_mode,
                DecrMode::Threshold | DecrMode::AgeOutWithThreshold
            )
            && self.lower_hr_threshold >= self.upper_hr_threshold
        {
            return err(
                "lower_hr_threshold",
                "must be strictly below upper_hr_threshold",
            );
        }
        if !self.evictions_enabled
            && (self.incr_mode != IncrMode::Off
                || self.flash_incr_mode != FlashIncrMode::Off
                || self.decr_mode != DecrMode::Off)
        {
            return err(
                "evictions_enabled",
                "evictions can be disabled only when every resize mode is off",
            );
        }
        if !(DIRTY_BYTES_THRESHOLD_RANGE.0..=DIRTY_BYTES_THRESHOLD_RANGE.1)
            .contains(&self.dirty_bytes_threshold)
        {
            return err("dirty_bytes_threshold", "must be in [512 B, 32 MiB]");
        }
        if self.open_trace_file && self.close_trace_file {
            return err(
                "open_trace_file",
                "open and close of the trace file in one configuration is ambiguous",
            );
        }
        if self.open_trace_file
            && (self.trace_file_name.is_empty()
                || self.trace_file_name.len() > MAX_TRACE_FILE_NAME_LEN)
        {
            return err("trace_file_name", "must be 1 to 1024 bytes");
        }
        Ok(())
    }

    /// Parse a configuration from JSON. Missing fields take their default-serial value.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let defaults = serde_json::to_value(Self::default_serial()).map_err(|_| ConfigError {
            field: "json",
            reason: "cannot encode defaults",
        })?;
        let given: serde_json::Value = serde_json::from_str(text).map_err(|_| ConfigError {
            field: "json",
            reason: "not valid JSON",
        })?;
        let (serde_json::Value::Object(mut merged), serde_json::Value::Object(given)) =
            (defaults, given)
        else {
            return Err(ConfigError {
                field: "json",
                reason: "a configuration must be a JSON object",
            });
        };
        for (k, v) in given {
            merged.insert(k, v);
        }
        serde_json::from_value(serde_json::Value::Object(merged)).map_err(|_| ConfigError {
            field: "json",
            reason: "unknown field, wrong type, or enum value outside its set",
        })
    }

    /// The configuration as one line of JSON (used in trace files).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Flags precomputed from a configuration (MDC-098, Q-10).
#[derive(Clone, Copy, PartialEq, Debug, Default)]
pub struct DerivedFlags {
    /// A threshold increase can happen.
    pub size_increase_possible: bool,
    /// A flash increase can happen.
    pub flash_size_increase_possible: bool,
    /// A decrease can happen.
    pub size_decrease_possible: bool,
    /// Epoch-end processing runs (increase or decrease possible; flash does not count).
    pub resize_enabled: bool,
}

impl DerivedFlags {
    /// Compute the flags for `c`.
    pub fn of(c: &CacheConfig) -> Self {
        let sizes_can_move = c.min_size < c.max_size;
        let size_increase_possible = c.incr_mode == IncrMode::Threshold
            && c.increment > 1.0
            && c.lower_hr_threshold > 0.0
            && !(c.apply_max_increment && c.max_increment == 0)
            && sizes_can_move;
        let decrement_capped_to_zero = c.apply_max_decrement && c.max_decrement == 0;
        let size_decrease_possible = sizes_can_move
            && !decrement_capped_to_zero
            && match c.decr_mode {
                DecrMode::Off => false,
                DecrMode::Threshold => c.upper_hr_threshold < 1.0 && c.decrement < 1.0,
                DecrMode::AgeOut => !(c.apply_empty_reserve && c.empty_reserve >= 1.0),
                DecrMode::AgeOutWithThreshold => {
                    !(c.apply_empty_reserve && c.empty_reserve >= 1.0) && c.upper_hr_threshold < 1.0
                }
            };
        Self {
            size_increase_possible,
            flash_size_increase_possible: c.flash_incr_mode == FlashIncrMode::AddSpace
                && sizes_can_move,
            size_decrease_possible,
            resize_enabled: size_increase_possible || size_decrease_possible,
        }
    }
}
