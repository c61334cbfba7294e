package rdb

// loadAdminScript is loadScript for the scripts of the management
// operations: lua/adminlib.lua is prepended too (after lua/lib.lua).
func loadAdminScript(name string) *script { return newScript(name, "lib", "adminlib") }

// loadAdminLaneScript is loadAdminScript for those that also move tasks
// into or out of the pending lanes: lua/lanelib.lua comes after adminlib.
func loadAdminLaneScript(name string) *script { return newScript(name, "lib", "adminlib", "lanelib") }

// The scripts of the management operations (broker.Admin); each file's
// header names its KEYS, ARGV and return values.
var (
	scriptStats       = loadAdminLaneScript("stats")
	scriptHistory     = loadAdminScript("history")
	scriptList        = loadAdminLaneScript("list")
	scriptRunTask     = loadAdminLaneScript("run_task")
	scriptArchiveTask = newScript("archive_task", "lib", "adminlib", "lanelib", "wflib")
	scriptBulk        = newScript("bulk", "lib", "adminlib", "lanelib", "wflib")
	scriptPause       = loadAdminScript("pause")
	scriptUnpause     = loadAdminLaneScript("unpause")
	scriptDeleteQueue = loadAdminLaneScript("delete_queue")
	scriptDeleteBatch = loadAdminLaneScript("delete_queue_batch")
	scriptSettings    = loadAdminLaneScript("settings")
	scriptWatch       = loadAdminScript("watch")
	scriptGroups      = loadAdminScript("groups")
	scriptKeys        = loadAdminScript("keys")
	scriptTakeGroup   = loadAdminScript("take_group")
	scriptFinishAgg   = loadAdminLaneScript("finish_aggregation")
	scriptReclaimAggs = loadAdminScript("reclaim_aggregations")
	scriptClaimTick   = loadAdminScript("claim_tick")
)

// adminScripts lists the scripts of the management operations (for
// preloading and tests); allScripts lists the others.
var adminScripts = []*script{
	scriptStats, scriptHistory, scriptList, scriptRunTask, scriptArchiveTask,
	scriptBulk, scriptPause, scriptUnpause, scriptDeleteQueue, scriptDeleteBatch,
	scriptSettings, scriptWatch, scriptGroups, scriptKeys, scriptTakeGroup, scriptFinishAgg,
	scriptReclaimAggs, scriptClaimTick,
}
