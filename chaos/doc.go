// Package chaos holds htq's reliability suites: real worker processes
// killed with SIGKILL and stopped with SIGSTOP, Redis crashed, frozen and
// failed over, the embedded store killed and its unsynced writes dropped,
// and hostile HTTP targets thrown at a real htq serve. Each suite records
// a history (internal/chaostest) and checks it afterwards: no acknowledged
// task lost, none unexpected, every re-run explained by a fault.
//
// `go test ./chaos` runs the short versions (part of `make test`);
// HTQ_CHAOS=full runs the full ones (`make chaos`). HTQ_CHAOS_SEED replays
// a run's fault schedule. docs/reliability.md describes each suite and the
// figures of a full run.
package chaos
