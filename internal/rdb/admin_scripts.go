package rdb

import (
	"crypto/sha1"
	"encoding/hex"
)

// loadAdminScript is loadScript for the scripts of the management
// operations: lua/adminlib.lua is prepended too (after lua/lib.lua).
func loadAdminScript(name string) *script {
	s := loadScript(name)
	lib, err := luaFiles.ReadFile("lua/adminlib.lua")
	if err != nil {
		panic("rdb: " + err.Error()) // the files are embedded: cannot happen
	}
	body, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("rdb: " + err.Error())
	}
	// s.src is lib.lua + "\n" + body; put adminlib.lua between them.
	s.src = s.src[:len(s.src)-len(body)] + string(lib) + "\n" + string(body)
	sum := sha1.Sum([]byte(s.src))
	s.sha = hex.EncodeToString(sum[:])
	return s
}

// The scripts of the management operations (broker.Admin); each file's
// header names its KEYS, ARGV and return values.
var (
	scriptStats       = loadAdminScript("stats")
	scriptHistory     = loadAdminScript("history")
	scriptList        = loadAdminScript("list")
	scriptRunTask     = loadAdminScript("run_task")
	scriptArchiveTask = loadAdminScript("archive_task")
	scriptBulk        = loadAdminScript("bulk")
	scriptPause       = loadAdminScript("pause")
	scriptUnpause     = loadAdminScript("unpause")
	scriptDeleteQueue = loadAdminScript("delete_queue")
	scriptDeleteBatch = loadAdminScript("delete_queue_batch")
	scriptSettings    = loadAdminScript("settings")
	scriptWatch       = loadAdminScript("watch")
	scriptGroups      = loadAdminScript("groups")
	scriptTakeGroup   = loadAdminScript("take_group")
	scriptFinishAgg   = loadAdminScript("finish_aggregation")
	scriptReclaimAggs = loadAdminScript("reclaim_aggregations")
	scriptClaimTick   = loadAdminScript("claim_tick")
)

// adminScripts lists the scripts of the management operations (for
// preloading and tests); allScripts lists the others.
var adminScripts = []*script{
	scriptStats, scriptHistory, scriptList, scriptRunTask, scriptArchiveTask,
	scriptBulk, scriptPause, scriptUnpause, scriptDeleteQueue, scriptDeleteBatch,
	scriptSettings, scriptWatch, scriptGroups, scriptTakeGroup, scriptFinishAgg,
	scriptReclaimAggs, scriptClaimTick,
}
