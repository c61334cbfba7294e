package rdb

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/rueidis"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// script is one Lua script of lua/, with lua/lib.lua prepended.
type script struct {
	name string
	src  string
	sha  string
}

func loadScript(name string) *script { return newScript(name, "lib") }

// loadLaneScript is loadScript for the scripts that move tasks into or
// out of the pending lanes: lua/lanelib.lua is prepended too.
func loadLaneScript(name string) *script { return newScript(name, "lib", "lanelib") }

// loadScriptAlone loads a script of lua/ without lib.lua, for the hottest
// paths, where building the library's functions on each call would cost
// more than the script's own work. Its first line sets CHANNEL to
// channelEvents, which such a script takes from there instead of from an
// ARGV (an argument costs Redis more than a constant).
func loadScriptAlone(name string) *script {
	return newScriptAfter("local CHANNEL = '"+channelEvents+"'\n", name)
}

// newScript loads lua/<name>.lua with the libraries lua/<lib>.lua
// prepended in the order given, each followed by a newline.
func newScript(name string, libs ...string) *script { return newScriptAfter("", name, libs...) }

// newScriptAfter is newScript with the Lua source first put first.
func newScriptAfter(first, name string, libs ...string) *script {
	var src strings.Builder
	src.WriteString(first)
	for _, lib := range append(libs, name) {
		b, err := luaFiles.ReadFile("lua/" + lib + ".lua")
		if err != nil {
			panic("rdb: " + err.Error()) // the files are embedded: cannot happen
		}
		src.Write(b)
		if lib != name {
			src.WriteByte('\n')
		}
	}
	sum := sha1.Sum([]byte(src.String()))
	return &script{name: name, src: src.String(), sha: hex.EncodeToString(sum[:])}
}

// The scripts; each file's header names its KEYS, ARGV and return values.
var (
	scriptEnqueue    = loadLaneScript("enqueue")
	scriptEnqPlain   = loadScriptAlone("enqueue_plain")
	scriptEnqBatch   = loadLaneScript("enqueue_batch")
	scriptFetch      = loadLaneScript("fetch")
	scriptComplete   = newScript("complete", "lib", "lanelib", "wflib")
	scriptRetry      = loadLaneScript("retry")
	scriptArchive    = newScript("archive", "lib", "lanelib", "wflib")
	scriptRequeue    = loadLaneScript("requeue")
	scriptExtend     = loadScript("extend")
	scriptExpired    = loadScript("expired")
	scriptResult     = loadScript("result")
	scriptForward    = loadLaneScript("forward")
	scriptPurge      = loadScript("purge")
	scriptInfo       = loadScript("info")
	scriptDelete     = newScript("delete", "lib", "lanelib", "wflib")
	scriptInvariants = loadLaneScript("invariants")
)

// allScripts lists every script (for preloading and tests).
var allScripts = []*script{
	scriptEnqueue, scriptEnqPlain, scriptEnqBatch, scriptFetch, scriptComplete, scriptRetry, scriptArchive,
	scriptRequeue, scriptExtend, scriptExpired, scriptResult, scriptForward,
	scriptPurge, scriptInfo, scriptDelete, scriptInvariants,
}

// call is one script invocation.
type call struct {
	s    *script
	keys []string
	args []string
}

func (c *call) evalsha(b rueidis.Builder) rueidis.Completed {
	return b.Evalsha().Sha1(c.s.sha).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
}

func (c *call) eval(b rueidis.Builder) rueidis.Completed {
	return b.Eval().Script(c.s.src).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
}

// isNoScript tells whether err is Redis's NOSCRIPT (the script cache of the
// node does not hold the script, e.g. after a restart or failover).
func isNoScript(err error) bool {
	if err == nil {
		return false
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		return re.IsNoScript()
	}
	return strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// run runs one script with EVALSHA, falling back to EVAL (which also
// caches the script on that node) when the node does not know it. A
// NOSCRIPT reply means the script did not run, so the retry is safe.
func (b *Broker) run(ctx context.Context, c call) rueidis.RedisResult {
	r := b.do(ctx, c.evalsha(b.c.B()))
	if isNoScript(r.Error()) {
		r = b.do(ctx, c.eval(b.c.B()))
	}
	return r
}

// loadScripts makes sure every script (allScripts and adminScripts) is in
// the script cache of every node, so that EVALSHA finds them: one SCRIPT
// EXISTS per node, then the missing ones loaded in one pipeline. Loading
// a script Redis already holds still costs it a SHA-1 of the whole source
// (~20 KB with the libraries, ~800 KB for all of them): every Open did so,
// a Server's start inside a benchmark's window included
// (docs/performance.md).
func (b *Broker) loadScripts(ctx context.Context) error {
	scripts := slices.Concat(allScripts, adminScripts, workflowScripts)
	shas := make([]string, len(scripts))
	for i, s := range scripts {
		shas[i] = s.sha
	}
	for addr, n := range b.c.Nodes() {
		have, err := b.nodeDoMulti(ctx, n, n.B().ScriptExists().Sha1(shas...).Build())[0].AsIntSlice()
		if err != nil || len(have) != len(scripts) {
			have = nil // unknown: load them all
		}
		var cmds []rueidis.Completed
		for i, s := range scripts {
			if have == nil || have[i] != 1 {
				cmds = append(cmds, n.B().ScriptLoad().Script(s.src).Build())
			}
		}
		if len(cmds) == 0 {
			continue
		}
		for _, r := range b.nodeDoMulti(ctx, n, cmds...) {
			if err := r.Error(); err != nil {
				return fmt.Errorf("rdb: load scripts into %s: %w", addr, err)
			}
		}
	}
	return nil
}

// runMulti runs many script calls in one round trip (DoMulti); extra
// commands (not scripts) are sent first in the same pipeline and their
// results come first. When calls meet NOSCRIPT (the script cache was lost),
// the scripts are loaded again on every node and those calls resent; a
// call that still meets NOSCRIPT is sent with EVAL.
func (b *Broker) runMulti(ctx context.Context, extra []rueidis.Completed, calls []call) []rueidis.RedisResult {
	res, _ := b.runMultiWith(ctx, extra, calls, false)
	return res
}

// send sends cmds in one round trip per node: with acked, as
// acknowledged writes (doAcked; errs holds the wait's error per command),
// otherwise as they are (errs is nil).
func (b *Broker) send(ctx context.Context, cmds []rueidis.Completed, acked bool) (res []rueidis.RedisResult, errs []error) {
	if acked {
		return b.doAcked(ctx, cmds)
	}
	return b.doMulti(ctx, 0, cmds...), nil
}

// runMultiWith is runMulti, with acked sending the commands as
// acknowledged writes (see runMultiAcked); errs is nil without acked.
func (b *Broker) runMultiWith(ctx context.Context, extra []rueidis.Completed, calls []call, acked bool) (res []rueidis.RedisResult, errs []error) {
	cmds := make([]rueidis.Completed, 0, len(extra)+len(calls))
	cmds = append(cmds, extra...)
	bd := b.c.B()
	for i := range calls {
		cmds = append(cmds, calls[i].evalsha(bd))
	}
	res, errs = b.send(ctx, cmds, acked)
	var again []int
	for i := range calls {
		if isNoScript(res[len(extra)+i].Error()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return res, errs
	}
	useEval := b.loadScripts(ctx) != nil
	retry := make([]rueidis.Completed, len(again))
	for j, i := range again {
		if useEval {
			retry[j] = calls[i].eval(bd)
		} else {
			retry[j] = calls[i].evalsha(bd)
		}
	}
	var still []int
	rres, rerrs := b.send(ctx, retry, acked)
	for j, r := range rres {
		res[len(extra)+again[j]] = r
		if acked {
			errs[len(extra)+again[j]] = rerrs[j]
		}
		if !useEval && isNoScript(r.Error()) {
			still = append(still, again[j])
		}
	}
	if len(still) == 0 {
		return res, errs
	}
	last := make([]rueidis.Completed, len(still))
	for j, i := range still {
		last[j] = calls[i].eval(bd)
	}
	lres, lerrs := b.send(ctx, last, acked)
	for j, i := range still {
		res[len(extra)+i] = lres[j]
		if acked {
			errs[len(extra)+i] = lerrs[j]
		}
	}
	return res, errs
}
