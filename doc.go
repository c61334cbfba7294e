// Package htq is a task queue for Go: a Client enqueues tasks, a Server
// fetches them and runs Handlers with bounded concurrency, on a storage
// chosen by URL: the embedded on-disk store (file:./htq-data, one process
// owns the data), Redis (redis://, rediss://, redis-sentinel://,
// redis-cluster://, shared by any number of processes and machines), or
// memory (mem:, for tests). See Open.
//
// A task runs now, after a delay, at a time, again on failure, in a group,
// or periodically. A worker holds a lease on each task it runs; the lease is
// fenced and renewed by heartbeat, so a worker that dies or is partitioned
// loses its tasks to another server instead of losing them altogether.
//
//	st, err := htq.Open("redis://127.0.0.1:6379/0")
//	if err != nil { … }
//	defer st.Close()
//
//	client := htq.NewClient(st)
//	info, err := client.Enqueue(htq.NewTask("email:welcome", payload), htq.MaxRetry(5))
//
//	srv := htq.NewServer(st, htq.Config{Concurrency: 20})
//	mux := htq.NewServeMux()
//	mux.HandleFunc("email:", sendEmail)
//	err = srv.Run(mux) // until SIGINT or SIGTERM
//
// Names and signatures follow asynq's where they share a name, so that an
// asynq program moves to htq by changing its imports and the Open call.
package htq
