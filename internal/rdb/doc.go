// Package rdb is htq's Redis backend: a broker.Broker over Redis
// (standalone, Sentinel or Cluster; Valkey works the same) on the rueidis
// client.
//
// Every state change is one Lua script (lua/*.lua, embedded), run with
// EVALSHA; each script checks all of its preconditions before its first
// write, so an error never leaves a task half-moved. Every key of a queue
// carries the queue's hash tag, so each script touches one Cluster slot.
// The key layout is documented in docs/redis-layout.md and built in one
// file, keys.go.
//
// Times that decide leases, due dates and uniqueness locks come from Redis
// TIME read inside the scripts, unless Options.Clock is set (tests), in
// which case Go passes the clock's now with each call.
//
// Redis replicates asynchronously; Options.Wait (the storage URL's
// wait_replicas, wait_timeout and wait_aof_local) makes the writes callers
// rely on wait for replicas (WAIT) or an AOF fsync (WAITAOF), on the
// connection of the write; see WaitOptions and docs/operations.md. Open
// also warns about servers that would lose or evict tasks.
package rdb
