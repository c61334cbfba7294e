package rdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Workflows (broker.Workflows). A workflow's record is one hash in the
// slot of its first task's queue (its home), found from its ID through
// keyWorkflows; lua/wflib.lua describes it. Its tasks are ordinary task
// hashes with two more fields, and the scripts that finish a task
// (complete, archive, archive_task, delete, bulk) apply the workflow rules
// in the same script call. A workflow whose queues are in different hash
// slots of a Redis Cluster cannot be stored so, and is refused.

var _ broker.Workflows = (*Broker)(nil)

// The scripts of workflows.
var (
	scriptEnqWorkflow      = newScript("enqueue_workflow", "lib", "lanelib", "wflib")
	scriptCancelWorkflow   = newScript("cancel_workflow", "lib", "lanelib", "wflib")
	scriptWorkflowInfo     = newScript("workflow_info", "lib", "lanelib", "wflib")
	scriptDepResults       = newScript("dependency_results", "lib", "lanelib", "wflib")
	scriptExpiredWorkflows = loadScript("expired_workflows")
	scriptUnindexWorkflows = loadScriptAlone("unindex_workflows")
)

// workflowScripts lists them (for preloading and tests).
var workflowScripts = []*script{
	scriptEnqWorkflow, scriptCancelWorkflow, scriptWorkflowInfo, scriptDepResults,
	scriptExpiredWorkflows, scriptUnindexWorkflows,
}

// maxWorkflowSweep bounds one DeleteExpiredWorkflows call (one DEL).
const maxWorkflowSweep = 1000

// outcomeLetters are the outcomes as the workflow hash writes them.
var outcomeLetters = map[byte]base.Outcome{
	's': base.OutcomeSucceeded, 'f': base.OutcomeFailed, 'x': base.OutcomeCanceled, 'd': base.OutcomeDeleted,
}

func policyLetter(p base.DependencyPolicy) string {
	if p == base.RunOnFailure {
		return "r"
	}
	return "c"
}

func policyOf(letter string) base.DependencyPolicy {
	if letter == "r" {
		return base.RunOnFailure
	}
	return base.CancelOnFailure
}

// EnqueueWorkflow stores w and its tasks in one script call; see
// broker.Workflows. Its ID is indexed first (HSETNX), and the queues are
// registered once it is stored: three round trips.
func (b *Broker) EnqueueWorkflow(ctx context.Context, w *base.Workflow) error {
	if w == nil {
		return fmt.Errorf("rdb: enqueue workflow: %w: no workflow", base.ErrInvalidArgument)
	}
	if err := w.Validate(); err != nil {
		return fmt.Errorf("rdb: enqueue workflow: %w", err)
	}
	var qs []*queueKeys
	qnum := make(map[string]int)
	for _, t := range w.Tasks {
		if _, ok := qnum[t.Msg.Queue]; ok {
			continue
		}
		k, err := b.check("enqueue workflow", t.Msg.Queue)
		if err != nil {
			return err
		}
		qs = append(qs, k)
		qnum[k.name] = len(qs)
	}
	if err := b.checkSlots(w, qs); err != nil {
		return err
	}
	home := qs[0]
	op := "enqueue workflow " + w.ID
	if err := b.indexWorkflow(ctx, op, w.ID, home); err != nil {
		return err
	}
	keys := make([]string, 1, 1+7*len(qs))
	keys[0] = home.workflowKey(w.ID)
	for _, k := range qs {
		keys = append(keys, k.task, k.pending, k.scheduled, k.waiting, k.unique, k.events, k.settings)
	}
	succ := make(map[string][]string, len(w.Tasks))
	for _, t := range w.Tasks {
		for _, d := range t.DependsOn {
			succ[d.Task] = append(succ[d.Task], policyLetter(d.Policy)+t.ID)
		}
	}
	order := make([]string, len(w.Tasks))
	for i, t := range w.Tasks {
		order[i] = t.ID
	}
	args := make([]string, 0, 8+15*len(w.Tasks))
	args = append(args, b.nowArg(), channelEvents, w.Digest(), home.name, itoa(ms(w.KeepFor())),
		strings.Join(order, "\n"), strconv.Itoa(len(w.Tasks)), b.logLen)
	for _, t := range w.Tasks {
		m := t.Msg
		var at int64
		if !t.ProcessAt.IsZero() {
			at = ceilMS(t.ProcessAt)
		}
		var uttl, upx int64
		if m.UniqueKey != "" {
			uttl = ms(m.UniqueTTL)
			upx = uttl + b.lockSlackMS
		}
		node := make([]string, 0, 3+len(succ[t.ID]))
		node = append(node, m.Queue, m.ID, itoa(at))
		node = append(node, succ[t.ID]...)
		deps := make([]string, len(t.DependsOn))
		for i, d := range t.DependsOn {
			deps[i] = policyLetter(d.Policy) + d.Task
		}
		args = append(args, t.ID, strconv.Itoa(qnum[m.Queue]), m.Queue, m.ID, encodeString(m), itoa(at),
			m.UniqueKey, itoa(uttl), itoa(upx), itoa(ms(m.Retention)), strings.Join(node, "\n"),
			strings.Join(deps, "\n"), strconv.Itoa(len(t.DependsOn)), priorityArg(m.Priority), m.Key)
	}
	res, waitErr := b.runAcked(ctx, call{s: scriptEnqWorkflow, keys: keys, args: args})
	if err := workflowEnqueueResult(op, w, res); err != nil {
		return b.wrapped(op, err)
	}
	var reg []rueidis.Completed
	var regKeys []*queueKeys
	for _, k := range qs {
		if k.needsRegister() {
			reg = append(reg, b.registerCmd(k))
			regKeys = append(regKeys, k)
		}
	}
	if len(reg) > 0 {
		for _, r := range b.doMulti(ctx, 0, reg...) {
			if err := r.Error(); err != nil {
				return b.wrap(op+": register queues", err)
			}
		}
		for _, k := range regKeys {
			k.markRegistered()
		}
	}
	return waitFailed(op, waitErr)
}

// wrapped wraps err with b.wrap unless it is one of htq's refusals.
func (b *Broker) wrapped(op string, err error) error {
	if _, ok := err.(*base.WorkflowError); ok {
		return err
	}
	return b.wrap(op, err)
}

// workflowEnqueueResult maps enqueue_workflow.lua's answer to an error.
func workflowEnqueueResult(op string, w *base.Workflow, res rueidis.RedisResult) error {
	if n, err := res.AsInt64(); err == nil {
		switch n {
		case 1, 0:
			return nil
		case -1:
			return fmt.Errorf("%w: workflow %q holds other tasks", base.ErrWorkflowIDConflict, w.ID)
		}
		return fmt.Errorf("unexpected reply %d", n)
	}
	v, err := res.AsIntSlice()
	if err != nil {
		return err
	}
	if len(v) != 2 || v[1] < 1 || int(v[1]) > len(w.Tasks) {
		return fmt.Errorf("unexpected reply %v", v)
	}
	t := w.Tasks[v[1]-1]
	switch v[0] {
	case -2:
		return &base.WorkflowError{Err: base.ErrTaskIDConflict, Tasks: []string{t.ID},
			Detail: fmt.Sprintf("task %q: queue %q holds a task with ID %q", t.ID, t.Msg.Queue, t.Msg.ID)}
	case -3:
		return &base.WorkflowError{Err: base.ErrDuplicateTask, Tasks: []string{t.ID},
			Detail: fmt.Sprintf("task %q: uniqueness key %q of queue %q is locked", t.ID, t.Msg.UniqueKey, t.Msg.Queue)}
	}
	return fmt.Errorf("unexpected reply %v", v)
}

// checkSlots refuses, on a Redis Cluster, a workflow whose queues are not
// all in one hash slot: its tasks could not be stored, nor released, in
// one script call.
func (b *Broker) checkSlots(w *base.Workflow, qs []*queueKeys) error {
	if b.c.Mode() != rueidis.ClientModeCluster || len(qs) < 2 {
		return nil
	}
	slot := func(k *queueKeys) uint16 {
		c := b.c.B().Exists().Key(k.pending).Build()
		return c.Slot()
	}
	first := slot(qs[0])
	for _, k := range qs[1:] {
		if slot(k) != first {
			var tasks []string
			for _, t := range w.Tasks {
				if t.Msg.Queue == k.name {
					tasks = append(tasks, t.ID)
					break
				}
			}
			return &base.WorkflowError{Err: base.ErrInvalidArgument, Tasks: append([]string{w.Tasks[0].ID}, tasks...),
				Detail: fmt.Sprintf("on a Redis Cluster every task of a workflow must be in queues of one hash slot; "+
					"queues %q and %q are not (put the workflow's tasks in one queue)", qs[0].name, k.name)}
		}
	}
	return nil
}

// indexWorkflow points the workflow index at home for id, unless it
// names another queue where a workflow id is stored.
func (b *Broker) indexWorkflow(ctx context.Context, op, id string, home *queueKeys) error {
	bd := b.c.B()
	set, err := b.do(ctx, bd.Hsetnx().Key(keyWorkflows).Field(id).Value(home.name).Build()).AsBool()
	if err != nil {
		return b.wrap(op, err)
	}
	if set {
		return nil
	}
	old, err := b.do(ctx, bd.Hget().Key(keyWorkflows).Field(id).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return b.wrap(op, err)
	}
	if old == home.name {
		return nil
	}
	if ok := base.ValidateQueueName(old) == nil; ok {
		exists, err := b.do(ctx, bd.Exists().Key(newQueueKeys(old).workflowKey(id)).Build()).AsInt64()
		if err != nil {
			return b.wrap(op, err)
		}
		if exists == 1 {
			return fmt.Errorf("rdb: %s: %w: a workflow with this ID and another first queue (%s) is stored", op, base.ErrWorkflowIDConflict, old)
		}
	}
	if err := b.do(ctx, bd.Hset().Key(keyWorkflows).FieldValue().FieldValue(id, home.name).Build()).Error(); err != nil {
		return b.wrap(op, err)
	}
	return nil
}

// workflowHome returns the keys of the queue workflow id is kept in, or
// an error wrapping base.ErrWorkflowNotFound.
func (b *Broker) workflowHome(ctx context.Context, op, id string) (*queueKeys, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("rdb: %s: %w", op, base.ErrStorageClosed)
	}
	if err := base.ValidateWorkflowID(id); err != nil {
		return nil, fmt.Errorf("rdb: %s: %w", op, err)
	}
	name, err := b.do(ctx, b.c.B().Hget().Key(keyWorkflows).Field(id).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("rdb: %s %q: %w", op, id, base.ErrWorkflowNotFound)
	}
	if err != nil {
		return nil, b.wrap(op+" "+id, err)
	}
	k, err := b.keys(name)
	if err != nil {
		return nil, fmt.Errorf("rdb: %s %q: the index names queue %q: %w", op, id, name, err)
	}
	return k, nil
}

// GetWorkflow reads a workflow with its tasks' states in one script call
// (after the index lookup); see broker.Workflows.
func (b *Broker) GetWorkflow(ctx context.Context, id string) (*base.WorkflowInfo, error) {
	home, err := b.workflowHome(ctx, "get workflow", id)
	if err != nil {
		return nil, err
	}
	op := "get workflow " + id
	vals, err := b.run(ctx, call{s: scriptWorkflowInfo, keys: []string{home.workflowKey(id)}}).ToArray()
	if rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("rdb: %s: %w", op, base.ErrWorkflowNotFound)
	}
	if err != nil {
		return nil, b.wrap(op, err)
	}
	if len(vals) != 2 {
		return nil, fmt.Errorf("rdb: %s: unexpected reply", op)
	}
	fields, err := vals[0].AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("rdb: %s: unexpected reply: %w", op, err)
	}
	states, err := vals[1].AsIntSlice()
	if err != nil {
		return nil, fmt.Errorf("rdb: %s: unexpected reply: %w", op, err)
	}
	wi, err := parseWorkflow(id, fields, states)
	if err != nil {
		return nil, fmt.Errorf("rdb: %s: %w", op, err)
	}
	return wi, nil
}

// parseWorkflow builds a WorkflowInfo from the fields of a workflow hash
// and the states workflow_info.lua read.
func parseWorkflow(id string, fields []string, states []int64) (*base.WorkflowInfo, error) {
	h := make(map[string]string, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		h[fields[i]] = fields[i+1]
	}
	num := func(f string) int64 {
		n, _ := strconv.ParseInt(h[f], 10, 64)
		return n
	}
	wi := &base.WorkflowInfo{ID: id, CreatedAt: time.UnixMilli(num("c")), Retention: time.Duration(num("R")) * time.Millisecond,
		Canceled: h["x"] == "1"}
	if _, ok := h["d"]; ok {
		wi.FinishedAt = time.UnixMilli(num("d"))
	}
	order := strings.Split(h["O"], "\n")
	if len(order) != len(states) {
		return nil, fmt.Errorf("%d tasks but %d states", len(order), len(states))
	}
	for i, tid := range order {
		node := strings.Split(h["N:"+tid], "\n")
		if len(node) < 3 {
			return nil, fmt.Errorf("task %q has no record", tid)
		}
		ti := &base.WorkflowTaskInfo{ID: tid, Queue: node[0], TaskID: node[1], State: base.TaskState(states[i]),
			LastErr: h["e:"+tid]}
		if p, ok := h["P:"+tid]; ok {
			for _, line := range strings.Split(p, "\n") {
				if line != "" {
					ti.DependsOn = append(ti.DependsOn, base.Dependency{Task: line[1:], Policy: policyOf(line[:1])})
				}
			}
		}
		if o, ok := h["o:"+tid]; ok && o != "" {
			ti.Outcome, ti.FinishedAt = parseOutcome(o)
		}
		if v, ok := h["v:"+tid]; ok {
			ti.Result = []byte(v)
		}
		wi.Tasks = append(wi.Tasks, ti)
	}
	return wi, nil
}

// parseOutcome reads an o field: the outcome's letter and the time in ms.
func parseOutcome(o string) (base.Outcome, time.Time) {
	if o == "" {
		return base.OutcomeNone, time.Time{}
	}
	ms, _ := strconv.ParseInt(o[1:], 10, 64)
	return outcomeLetters[o[0]], time.UnixMilli(ms)
}

// CancelWorkflow cancels a workflow's tasks in one script call (after the
// index lookup); see broker.Workflows.
func (b *Broker) CancelWorkflow(ctx context.Context, id string) (int, error) {
	home, err := b.workflowHome(ctx, "cancel workflow", id)
	if err != nil {
		return 0, err
	}
	op := "cancel workflow " + id
	res, waitErr := b.runAcked(ctx, call{
		s:    scriptCancelWorkflow,
		keys: []string{home.workflowKey(id)},
		args: []string{b.nowArg(), channelEvents, base.CanceledByWorkflow(), b.logLen},
	})
	n, err := res.AsInt64()
	if err != nil {
		return 0, b.wrap(op, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("rdb: %s: %w", op, base.ErrWorkflowNotFound)
	}
	return int(n), waitFailed(op, waitErr)
}

// DependencyResults reads the outcomes of the dependencies of the task l
// holds, in one script call; see broker.Workflows.
func (b *Broker) DependencyResults(ctx context.Context, l broker.LeaseRef) ([]base.DependencyResult, error) {
	k, err := b.check("dependency results", l.Queue)
	if err != nil {
		return nil, err
	}
	op := "dependency results " + l.Queue + "/" + l.ID
	res := b.run(ctx, call{s: scriptDepResults, keys: []string{k.taskKey(l.ID), k.leases}, args: []string{l.ID, l.Token}})
	if n, err := res.AsInt64(); err == nil && n == -1 {
		return nil, leaseLost("dependency results", l)
	}
	vals, err := res.ToArray()
	if err != nil {
		return nil, b.wrap(op, err)
	}
	if len(vals)%7 != 0 {
		return nil, fmt.Errorf("rdb: %s: unexpected reply", op)
	}
	out := make([]base.DependencyResult, 0, len(vals)/7)
	for i := 0; i < len(vals); i += 7 {
		f := vals[i : i+7]
		var s [5]string
		for j := range s {
			if s[j], err = f[j].ToString(); err != nil {
				return nil, fmt.Errorf("rdb: %s: unexpected reply", op)
			}
		}
		r := base.DependencyResult{ID: s[0], Policy: policyOf(s[1]), Queue: s[2], TaskID: s[3]}
		r.Outcome, _ = parseOutcome(s[4])
		if !f[5].IsNil() {
			r.LastErr, _ = f[5].ToString()
		}
		if !f[6].IsNil() {
			v, _ := f[6].ToString()
			r.Result = []byte(v)
		}
		out = append(out, r)
	}
	return out, nil
}

// DeleteExpiredWorkflows deletes finished workflow records kept in queue
// whose retention ran out, then their index entries; see
// broker.Workflows.
func (b *Broker) DeleteExpiredWorkflows(ctx context.Context, queue string, limit int) (int, error) {
	k, err := b.check("delete expired workflows", queue)
	if err != nil {
		return 0, err
	}
	if limit < 1 {
		return 0, fmt.Errorf("rdb: delete expired workflows %s: %w: limit %d is less than 1", queue, base.ErrInvalidArgument, limit)
	}
	op := "delete expired workflows " + queue
	gone, err := b.run(ctx, call{
		s:    scriptExpiredWorkflows,
		keys: []string{k.wfDone},
		args: []string{b.nowArg(), strconv.Itoa(min(limit, maxWorkflowSweep))},
	}).AsStrSlice()
	if err != nil {
		return 0, b.wrap(op, err)
	}
	if len(gone) == 0 {
		return 0, nil
	}
	args := make([]string, 1, 1+len(gone))
	args[0] = queue
	for _, wk := range gone {
		args = append(args, strings.TrimPrefix(wk, k.workflow))
	}
	if err := b.run(ctx, call{s: scriptUnindexWorkflows, keys: []string{keyWorkflows}, args: args}).Error(); err != nil {
		return len(gone), b.wrap(op+": index", err)
	}
	return len(gone), nil
}
