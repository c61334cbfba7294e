package rdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
)

// nodeFacts is what checkNodes reads from one Redis node. An empty field
// could not be read (INFO or CONFIG renamed, disabled or refused by an
// ACL).
type nodeFacts struct {
	version        string // redis_version
	role           string // master or slave
	replicas       int    // connected_slaves of a master
	appendonly     string // yes or no
	save           string // the RDB save points; "" for none
	evictionPolicy string // maxmemory-policy
	configRead     bool   // the three CONFIG GETs answered
}

// checkNodes reads the version, role and durability settings of every
// node, one round trip per node, and then
//   - logs a warning for a node that would lose or evict tasks (no
//     persistence at all, or a maxmemory-policy other than noeviction);
//   - refuses w.AOFLocal on a node that cannot honour it (Redis before 7.2
//     has no WAITAOF; WAITAOF's local fsync needs appendonly yes);
//   - logs a warning for a primary with fewer connected replicas than
//     w.Replicas (every acknowledged write would then fail).
//
// What cannot be read (CONFIG renamed or refused, say) is neither warned
// about nor an error.
func (b *Broker) checkNodes(ctx context.Context, w WaitOptions) error {
	for addr, n := range b.c.Nodes() {
		f := b.readNode(ctx, n)
		b.warnDurability(addr, f)
		if w.AOFLocal {
			if f.version != "" && !versionAtLeast(f.version, 7, 2) {
				return fmt.Errorf("rdb: wait_aof_local needs WAITAOF (Redis 7.2 or later); %s runs Redis %s: %w",
					addr, f.version, base.ErrInvalidArgument)
			}
			if f.configRead && f.role == "master" && f.appendonly != "yes" {
				return fmt.Errorf("rdb: wait_aof_local needs appendonly yes; %s has appendonly %s: %w",
					addr, f.appendonly, base.ErrInvalidArgument)
			}
		}
		if w.Replicas > 0 && f.role == "master" && f.replicas < w.Replicas {
			b.log.Warn("rdb: fewer replicas are connected than wait_replicas asks for; acknowledged writes fail with a replication timeout until enough connect",
				"node", addr, "connected_replicas", f.replicas, "wait_replicas", w.Replicas)
		}
	}
	return nil
}

// warnDurability logs what in f would lose tasks; see docs/operations.md.
func (b *Broker) warnDurability(addr string, f nodeFacts) {
	if !f.configRead {
		b.log.Debug("rdb: cannot read the node's persistence settings (CONFIG GET refused); not checked", "node", addr)
		return
	}
	switch {
	case f.appendonly == "no" && strings.TrimSpace(f.save) == "":
		b.log.Warn("rdb: Redis keeps tasks in memory only (appendonly no, no save points): a restart or crash loses every task; set appendonly yes (docs/operations.md)",
			"node", addr)
	case f.appendonly == "no":
		b.log.Info("rdb: Redis persists by RDB snapshots only (appendonly no): a crash loses the tasks written since the last snapshot; set appendonly yes (docs/operations.md)",
			"node", addr, "save", f.save)
	}
	if f.evictionPolicy != "" && f.evictionPolicy != "noeviction" {
		b.log.Warn("rdb: Redis may evict tasks when it reaches maxmemory; set maxmemory-policy noeviction (docs/operations.md)",
			"node", addr, "maxmemory-policy", f.evictionPolicy)
	}
}

// readNode reads the facts of one node in one round trip. Each command
// may fail alone.
func (b *Broker) readNode(ctx context.Context, n rueidis.Client) nodeFacts {
	bd := n.B()
	rs := b.nodeDoMulti(ctx, n,
		bd.Info().Section("server").Build(),
		bd.Info().Section("replication").Build(),
		bd.ConfigGet().Parameter("appendonly").Build(),
		bd.ConfigGet().Parameter("save").Build(),
		bd.ConfigGet().Parameter("maxmemory-policy").Build(),
	)
	var f nodeFacts
	if s, err := rs[0].ToString(); err == nil {
		f.version = infoField(s, "redis_version")
	}
	if s, err := rs[1].ToString(); err == nil {
		f.role = infoField(s, "role")
		f.replicas, _ = strconv.Atoi(infoField(s, "connected_slaves"))
	}
	f.configRead = true
	for i, p := range []string{"appendonly", "save", "maxmemory-policy"} {
		m, err := rs[2+i].AsStrMap()
		v, ok := m[p]
		if err != nil || !ok {
			f.configRead = false
			break
		}
		switch p {
		case "appendonly":
			f.appendonly = v
		case "save":
			f.save = v
		default:
			f.evictionPolicy = v
		}
	}
	return f
}

// infoField returns the value of key in an INFO reply ("" if absent).
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

// versionAtLeast tells whether version ("7.0.15") is major.minor or later;
// an unreadable version counts as later (the command itself will say).
func versionAtLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return true
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || (ma == major && mi >= minor)
}
