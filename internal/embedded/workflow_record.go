package embedded

import (
	"fmt"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// The records of the workflows and wfspecs buckets (schema.go). A
// workflow ID holds no control character, so 0x00 ends it.
const (
	wfRecordVersion = 1
	wfKindState     = 'f' // canceled flag, finish time
	wfKindOutcome   = 'o' // + task ID: how the task finished
)

func wfKey(id string, kind byte, task string) string {
	return id + "\x00" + string(kind) + task
}

// putWorkflow records a new workflow: its spec and no outcome. The caller
// holds b.mu.
func (b *Broker) putWorkflow(wf *workflow) {
	if b.store == nil {
		return
	}
	e := encoder{}
	e.b = append(e.b, wfRecordVersion)
	e.str(wf.home)
	e.str(wf.digest)
	e.time(wf.created)
	e.varint(int64(wf.retention))
	e.uvarint(uint64(len(wf.tasks)))
	for _, wt := range wf.tasks {
		e.str(wt.id)
		e.str(wt.queue)
		e.str(wt.taskID)
		e.time(wt.processAt)
		e.uvarint(uint64(len(wt.deps)))
		for _, d := range wt.deps {
			e.str(d.Task)
			e.uvarint(uint64(d.Policy))
		}
	}
	b.buf.wfSpecs[wf.id] = e.b
	b.work.Signal()
}

// putWorkflowState records whether wf was canceled and when it finished.
// The caller holds b.mu.
func (b *Broker) putWorkflowState(wf *workflow) {
	if b.store == nil {
		return
	}
	e := encoder{}
	e.b = append(e.b, wfRecordVersion)
	if wf.canceled {
		e.uvarint(1)
	} else {
		e.uvarint(0)
	}
	e.time(wf.finished)
	b.buf.wf[wfKey(wf.id, wfKindState, "")] = e.b
	b.work.Signal()
}

// putOutcome records how wt finished. The caller holds b.mu.
func (b *Broker) putOutcome(wf *workflow, wt *wfTask) {
	if b.store == nil {
		return
	}
	e := encoder{}
	e.b = append(e.b, wfRecordVersion)
	e.uvarint(uint64(wt.outcome))
	e.str(wt.err)
	e.bytes(wt.result)
	e.time(wt.finished)
	b.buf.wf[wfKey(wf.id, wfKindOutcome, wt.id)] = e.b
	b.work.Signal()
}

// dropWorkflow deletes every record of wf. The caller holds b.mu.
func (b *Broker) dropWorkflow(wf *workflow) {
	if b.store == nil {
		return
	}
	b.buf.wfSpecs[wf.id] = nil
	b.buf.wf[wfKey(wf.id, wfKindState, "")] = nil
	for _, wt := range wf.tasks {
		b.buf.wf[wfKey(wf.id, wfKindOutcome, wt.id)] = nil
	}
	b.work.Signal()
}

// loadWorkflows rebuilds the workflows from their specs and the records of
// the workflows bucket (states and outcomes); what has not finished is
// counted again from the outcomes. The caller holds b.mu or has the
// Broker to itself.
func loadWorkflows(recs, specs map[string][]byte) (map[string]*workflow, error) {
	out := make(map[string]*workflow)
	for id, v := range specs {
		wf, err := decodeWorkflow(id, v)
		if err != nil {
			return nil, fmt.Errorf("workflow %q: %w", id, err)
		}
		out[id] = wf
	}
	for k, v := range recs {
		id, rest, ok := strings.Cut(k, "\x00")
		if !ok || rest == "" {
			return nil, fmt.Errorf("bad workflow record key %q", k)
		}
		wf := out[id]
		if wf == nil {
			return nil, fmt.Errorf("workflow %q: a record without its spec", id)
		}
		d := decoder{b: v}
		if len(v) == 0 || v[0] != wfRecordVersion {
			return nil, fmt.Errorf("workflow %q: record %q of an unknown version", id, rest)
		}
		d.b = v[1:]
		switch rest[0] {
		case wfKindState:
			wf.canceled = d.uvarint() == 1
			wf.finished = d.time()
		case wfKindOutcome:
			wt := wf.byID[rest[1:]]
			if wt == nil {
				return nil, fmt.Errorf("workflow %q: outcome of unknown task %q", id, rest[1:])
			}
			wt.outcome = base.Outcome(d.uvarint())
			wt.err = d.str()
			wt.result = d.bytes()
			wt.finished = d.time()
			if wt.outcome == base.OutcomeNone || wt.outcome > base.OutcomeDeleted {
				return nil, fmt.Errorf("workflow %q: task %q has outcome %d", id, wt.id, wt.outcome)
			}
		default:
			return nil, fmt.Errorf("workflow %q: unknown record %q", id, rest)
		}
		if d.err != nil || len(d.b) != 0 {
			return nil, fmt.Errorf("workflow %q: bad record %q", id, rest)
		}
	}
	for _, wf := range out {
		wf.left = 0
		for _, wt := range wf.tasks {
			if wt.outcome != base.OutcomeNone {
				continue
			}
			wf.left++
			for _, d := range wt.deps {
				if wf.byID[d.Task].outcome == base.OutcomeNone {
					wt.remaining++
				}
			}
		}
	}
	return out, nil
}

// decodeWorkflow reads a spec record written by putWorkflow.
func decodeWorkflow(id string, v []byte) (*workflow, error) {
	if len(v) == 0 || v[0] != wfRecordVersion {
		return nil, fmt.Errorf("spec of an unknown version")
	}
	d := decoder{b: v[1:]}
	wf := &workflow{id: id, byID: make(map[string]*wfTask)}
	wf.home = d.str()
	wf.digest = d.str()
	wf.created = d.time()
	wf.retention = time.Duration(d.varint())
	n := d.uvarint()
	if n > base.MaxWorkflowTasks {
		return nil, fmt.Errorf("%d tasks", n)
	}
	for range n {
		wt := &wfTask{id: d.str(), queue: d.str(), taskID: d.str(), processAt: d.time()}
		deps := d.uvarint()
		if deps > n {
			return nil, fmt.Errorf("task %q has %d dependencies", wt.id, deps)
		}
		for range deps {
			wt.deps = append(wt.deps, base.Dependency{Task: d.str(), Policy: base.DependencyPolicy(d.uvarint())})
		}
		if d.err != nil {
			break
		}
		wf.tasks = append(wf.tasks, wt)
		wf.byID[wt.id] = wt
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, fmt.Errorf("bad spec record")
	}
	for _, wt := range wf.tasks {
		for _, dep := range wt.deps {
			if wf.byID[dep.Task] == nil {
				return nil, fmt.Errorf("task %q depends on unknown task %q", wt.id, dep.Task)
			}
		}
	}
	wf.link()
	return wf, nil
}
