package main

import (
	"log/slog"
	"runtime"

	"github.com/htqueue/htq/internal/storage"
)

// minEmbeddedProcs is the least GOMAXPROCS of `htq serve` on the embedded
// store when Go chose the value (no GOMAXPROCS in the environment). The
// store's committer waits in fdatasync, a system call that keeps its P
// until the runtime's monitor hands it on (tens of microseconds to
// milliseconds later): with one P, as Go picks on a one-CPU machine or
// container, no request runs meanwhile, and the next group commit carries
// about one request. A second P lets requests run and gather behind the
// sync while the first waits in the kernel. Measured on one CPU (taskset
// -c 0; docs/performance.md, htq serve, "one CPU"): /v1 on the embedded
// store serves 1.8x the requests per second at the same CPU per request.
// On Redis a second P gains nothing (its client waits in the network
// poller, which hands the P on at once), so the floor is the embedded
// store's only.
const minEmbeddedProcs = 2

// planProcs returns the GOMAXPROCS `htq serve` sets for the storage URL
// when the current value is current (0: leave it as it is), and where the
// value in force comes from.
func planProcs(storageURL string, current int, lookupEnv func(string) (string, bool)) (procs int, source string) {
	if env, ok := lookupEnv("GOMAXPROCS"); ok && env != "" {
		return 0, "GOMAXPROCS"
	}
	if _, embedded := storage.DataDir(storageURL); !embedded || current >= minEmbeddedProcs {
		return 0, "default"
	}
	return minEmbeddedProcs, "embedded store"
}

// applyProcs sets GOMAXPROCS as planProcs decides, logs a change, and
// returns a function that restores the former value (serve runs in tests'
// processes too).
func applyProcs(storageURL string, lookupEnv func(string) (string, bool), logger *slog.Logger) (restore func()) {
	prev := runtime.GOMAXPROCS(0)
	procs, source := planProcs(storageURL, prev, lookupEnv)
	if procs == 0 {
		return func() {}
	}
	runtime.GOMAXPROCS(procs)
	logger.Info("GOMAXPROCS raised so that requests run while the embedded store syncs its log (set GOMAXPROCS to choose)",
		"gomaxprocs", procs, "was", prev, "gomaxprocs_from", source)
	return func() { runtime.GOMAXPROCS(prev) }
}
