"""MEMTIS (SOSP'23): `policy` holds the policy (its PEBS sampling, histogram,
thresholds, cooling and huge-page split), `bins` the compiled histogram passes; the
policy's names are importable from here, as from any policy's module."""
from .bins import cooled_bins, memtis_cool, set_counts, split_bins
from .policy import (DIRECT_EXTRA, FLOORS, LATENCIES, LOAD_PERIODS, MAX_SHIFT, NBINS, NSKEW,
                     PAPER_MIN_FAST, SPLIT_MAX, STORE_PERIODS, Memtis, clamp_wmark, get_idx,
                     get_skew_idx)

__all__ = ["cooled_bins", "memtis_cool", "set_counts", "split_bins", "DIRECT_EXTRA",
           "FLOORS", "LATENCIES", "LOAD_PERIODS", "MAX_SHIFT", "NBINS", "NSKEW",
           "PAPER_MIN_FAST", "SPLIT_MAX", "STORE_PERIODS", "Memtis", "clamp_wmark",
           "get_idx", "get_skew_idx"]
