package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// script is the measured unit of work: a small state change, like one of a
// task queue's scripts (write a hash, move an ID through a list), returning a
// bulk string the client must parse.
const script = `redis.call('HSET', KEYS[1], 'payload', ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[2])
return redis.call('LPOP', KEYS[2])`

var (
	evalKeys = []string{"bench:{q}:h", "bench:{q}:l"}
	argVal   = string(make100())
	argID    = "0123456789abcdef0123456789abcdef"
)

func make100() []byte {
	b := make([]byte, 100)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// A worker does one call (or one explicit batch) and reports how many script
// executions completed.
type worker func(ctx context.Context) (int, error)

type mode struct {
	name, desc string
	// open connects and returns the function each goroutine loops on, and a
	// close. conc is the number of goroutines that will call it.
	open func(ctx context.Context, addr string, conc int) (worker, func(), error)
}

const batch = 16

var modes = []mode{
	{"rueidis", "rueidis defaults; each goroutine calls Lua.Exec (auto-pipelined) with context.Background()", openRueidis},
	{"rueidis-ctxdone", "as rueidis, but every call gets a cancellable context (ctx.Done() != nil, like a request's)", openRueidisCtxDone},
	{"go-redis", "go-redis defaults (pool 10 x GOMAXPROCS); each goroutine calls Script.Run", openGoRedis},
	{"go-redis-autopipeline", "go-redis Client.AutoPipeline() (EXPERIMENTAL since v9.22) defaults; Script.Run on it", openGoRedisAuto},
	{"go-redis-batcher", "go-redis, a hand-written coalescer: callers queue, 2 flushers send what is queued as one Pipeline", openGoRedisBatcher},
	{"go-redis-pipeline16", "go-redis, each goroutine sends an explicit Pipeline of 16 EVALSHA", openGoRedisPipe},
	{"rueidis-domulti16", "rueidis, each goroutine sends an explicit DoMulti of 16 EVALSHA", openRueidisMulti},
}

func modeNames() []string {
	var s []string
	for _, m := range modes {
		s = append(s, m.name)
	}
	return s
}

func modeByName(n string) (mode, bool) {
	for _, m := range modes {
		if m.name == n {
			return m, true
		}
	}
	return mode{}, false
}

func checkReply(s string) error {
	if s != argID {
		return fmt.Errorf("script returned %q", s)
	}
	return nil
}

func newRueidis(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
}

func openRueidis(ctx context.Context, addr string, _ int) (worker, func(), error) {
	c, err := newRueidis(addr)
	if err != nil {
		return nil, nil, err
	}
	lua := rueidis.NewLuaScript(script)
	args := []string{argVal, argID}
	w := func(ctx context.Context) (int, error) {
		s, err := lua.Exec(ctx, c, evalKeys, args).ToString()
		if err != nil {
			return 0, err
		}
		return 1, checkReply(s)
	}
	return w, c.Close, nil
}

// openRueidisCtxDone differs from openRueidis only in the context: rueidis
// sends a lone call on the caller's goroutine (no hand-off to its pipeline
// goroutines) only while no other call is in flight and ctx.Done() is nil.
func openRueidisCtxDone(ctx context.Context, addr string, conc int) (worker, func(), error) {
	w, closeFn, err := openRueidis(ctx, addr, conc)
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancel(context.Background())
	return func(context.Context) (int, error) { return w(cctx) }, func() { cancel(); closeFn() }, nil
}

func openRueidisMulti(ctx context.Context, addr string, _ int) (worker, func(), error) {
	c, err := newRueidis(addr)
	if err != nil {
		return nil, nil, err
	}
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script(script).Build()).ToString()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	w := func(ctx context.Context) (int, error) {
		cmds := make(rueidis.Commands, batch)
		for i := range cmds {
			cmds[i] = c.B().Evalsha().Sha1(sha).Numkeys(2).Key(evalKeys...).Arg(argVal, argID).Build()
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			s, err := r.ToString()
			if err != nil {
				return 0, err
			}
			if err := checkReply(s); err != nil {
				return 0, err
			}
		}
		return batch, nil
	}
	return w, c.Close, nil
}

var goScript = redis.NewScript(script)

func newGoRedis(ctx context.Context, addr string) (*redis.Client, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	if err := goScript.Load(ctx, c).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func closer(c interface{ Close() error }) func() { return func() { _ = c.Close() } }

func openGoRedis(ctx context.Context, addr string, _ int) (worker, func(), error) {
	c, err := newGoRedis(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	w := func(ctx context.Context) (int, error) {
		s, err := goScript.Run(ctx, c, evalKeys, argVal, argID).Text()
		if err != nil {
			return 0, err
		}
		return 1, checkReply(s)
	}
	return w, closer(c), nil
}

func openGoRedisAuto(ctx context.Context, addr string, _ int) (worker, func(), error) {
	c, err := newGoRedis(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	ap, err := c.AutoPipeline()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	w := func(ctx context.Context) (int, error) {
		s, err := goScript.Run(ctx, ap, evalKeys, argVal, argID).Text()
		if err != nil {
			return 0, err
		}
		return 1, checkReply(s)
	}
	return w, func() { ap.Close(); c.Close() }, nil
}

func openGoRedisPipe(ctx context.Context, addr string, _ int) (worker, func(), error) {
	c, err := newGoRedis(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	w := func(ctx context.Context) (int, error) {
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, batch)
		for i := range cmds {
			cmds[i] = goScript.EvalSha(ctx, pipe, evalKeys, argVal, argID)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, err
		}
		for _, cmd := range cmds {
			s, err := cmd.Text()
			if err != nil {
				return 0, err
			}
			if err := checkReply(s); err != nil {
				return 0, err
			}
		}
		return batch, nil
	}
	return w, closer(c), nil
}

// The batcher is what we would write ourselves on go-redis without its
// auto-pipeliner: callers put a request on a queue and wait; flushers take
// whatever is queued (up to maxBatch) and send it as one Pipeline.
type batchReq struct {
	cmd  *redis.Cmd
	done chan struct{}
}

func openGoRedisBatcher(ctx context.Context, addr string, conc int) (worker, func(), error) {
	c, err := newGoRedis(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	const flushers, maxBatch = 2, 256
	queue := make(chan *batchReq, 1024)
	var wg sync.WaitGroup
	for f := 0; f < flushers; f++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bg := context.Background()
			reqs := make([]*batchReq, 0, maxBatch)
			for first := range queue {
				reqs = append(reqs[:0], first)
			drain:
				for len(reqs) < maxBatch {
					select {
					case r, ok := <-queue:
						if !ok {
							break drain
						}
						reqs = append(reqs, r)
					default:
						break drain
					}
				}
				pipe := c.Pipeline()
				for _, r := range reqs {
					_ = pipe.Process(bg, r.cmd)
				}
				_, _ = pipe.Exec(bg) // errors are on each cmd
				for _, r := range reqs {
					close(r.done)
				}
			}
		}()
	}
	pool := sync.Pool{New: func() any { return &batchReq{} }}
	w := func(ctx context.Context) (int, error) {
		r := pool.Get().(*batchReq)
		r.cmd = redis.NewCmd(ctx, "evalsha", goScript.Hash(), 2, evalKeys[0], evalKeys[1], argVal, argID)
		r.done = make(chan struct{})
		queue <- r
		<-r.done
		s, err := r.cmd.Text()
		pool.Put(r)
		if err != nil {
			return 0, err
		}
		return 1, checkReply(s)
	}
	return w, func() { close(queue); wg.Wait(); c.Close() }, nil
}

// measureEval runs conc goroutines looping on the mode's worker, waits out
// the warm-up, then times a window of o.dur.
func measureEval(ctx context.Context, ad *redis.Client, addr string, m mode, conc int, o options) (record, error) {
	if err := ad.FlushAll(ctx).Err(); err != nil {
		return record{}, err
	}
	w, closeFn, err := m.open(ctx, addr, conc)
	if err != nil {
		return record{}, err
	}
	// Workers get context.Background(), as the peer harness passes it; the
	// rueidis-ctxdone mode shows what a cancellable context changes.
	wctx := context.Background()
	var ops atomic.Int64
	var stop atomic.Bool
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				n, err := w(wctx)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				ops.Add(int64(n))
			}
		}()
	}
	time.Sleep(o.warmup)
	if err := ad.ConfigResetStat(ctx).Err(); err != nil {
		return record{}, err
	}
	s0, err := snap(ctx, ad)
	if err != nil {
		return record{}, err
	}
	o0 := ops.Load()
	time.Sleep(o.dur)
	o1 := ops.Load()
	s1, err := snap(ctx, ad)
	if err != nil {
		return record{}, err
	}
	stop.Store(true)
	wg.Wait()
	closeFn()
	if e := firstErr.Load(); e != nil {
		return record{}, e.(error)
	}
	n := o1 - o0
	if n <= 0 {
		return record{}, fmt.Errorf("no operations completed")
	}
	wall := s1.at.Sub(s0.at).Seconds()
	return record{
		Scenario:    "evalsha",
		Mode:        m.name,
		Conc:        conc,
		Ops:         n,
		WallS:       round(wall, 4),
		OpsPerS:     round(float64(n)/wall, 1),
		ClientCPUus: round((s1.self-s0.self)/float64(n)*1e6, 2),
		RedisCPUus:  round((s1.redis-s0.redis)/float64(n)*1e6, 2),
		RedisCalls:  round(float64(s1.evalsha-s0.evalsha)/float64(n), 3),
	}, nil
}
