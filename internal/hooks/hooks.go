// Package hooks lets htq's own internal packages (the HTTP service, the
// command line) reach what the public package keeps unexported, without an
// import cycle and without widening the public API. Package htq sets each
// hook once, in its init; nothing else writes them.
package hooks

import "github.com/htqueue/htq/internal/broker"

// BrokerOf returns the broker behind an *htq.Storage (passed as any to
// avoid importing package htq here). Use: hooks.BrokerOf(st).
var BrokerOf func(storage any) broker.Broker
