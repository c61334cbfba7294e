// Package base holds the types every part of htq shares: the task message as
// the storage keeps it, task states, queue-name rules, the limits on what
// a caller may enqueue, and how a storage URL is shown with its password
// hidden. It has no dependencies on any backend.
package base
