// Package base holds the types every part of htq shares: the task message as
// the storage keeps it, task states, queue-name rules and the limits on what
// a caller may enqueue. It has no dependencies on any backend.
package base
