package htq

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/htqueue/htq/internal/broker"
)

// GroupAggregator turns the tasks of a group into one task.
type GroupAggregator interface {
	// Aggregate returns the task that replaces tasks, which all belong to
	// group. The new task goes to the group's queue.
	Aggregate(group string, tasks []*Task) *Task
}

// GroupAggregatorFunc adapts a function to the GroupAggregator interface.
type GroupAggregatorFunc func(group string, tasks []*Task) *Task

// Aggregate calls fn(group, tasks).
func (fn GroupAggregatorFunc) Aggregate(group string, tasks []*Task) *Task { return fn(group, tasks) }

// Group aggregation defaults.
const (
	defaultGroupGracePeriod = time.Minute
	// maxAggregate bounds one aggregation when GroupMaxSize is 0.
	maxAggregate = 100_000
	// aggregationLease is how long an aggregator may hold a taken group
	// before another server gives its tasks back.
	aggregationLease = 30 * time.Second
)

// An aggregator turns each group of aggregating tasks into one task once
// the group is ready: it holds GroupMaxSize tasks, its oldest task waited
// GroupMaxDelay, or its newest waited GroupGracePeriod. Taking a group is
// one atomic step in the storage, so two servers never aggregate the same
// task; a server that dies holding a group has its tasks given back.
type aggregator struct {
	b      broker.Broker
	admin  broker.Admin
	logger *slog.Logger
	queues *queueSet
	agg    GroupAggregator
	client *Client

	maxSize  int
	maxDelay time.Duration
	grace    time.Duration
}

func newAggregator(s *Storage, admin broker.Admin, logger *slog.Logger, queues *queueSet, cfg Config) *aggregator {
	maxSize := cfg.GroupMaxSize
	if maxSize == 0 {
		maxSize = maxAggregate
	}
	return &aggregator{b: brokerOf(s), admin: admin, logger: logger.With("component", "htq.aggregator"), queues: queues,
		agg: cfg.GroupAggregator, client: NewClient(s), maxSize: maxSize, maxDelay: cfg.GroupMaxDelay, grace: cfg.GroupGracePeriod}
}

// aggregatorInterval is how often groups are checked: half the grace
// period, between 100 ms and 1 s.
func aggregatorInterval(grace time.Duration) time.Duration {
	return min(max(grace/2, 100*time.Millisecond), time.Second)
}

func (a *aggregator) exec(ctx context.Context) {
	for _, q := range a.queues.names() {
		if _, err := a.admin.ReclaimAggregations(ctx, q); err != nil {
			logCall(a.logger, "reclaim aggregations", err, "queue", q)
		}
		groups, err := a.admin.ListGroups(ctx, q)
		if err != nil {
			logCall(a.logger, "list groups", err, "queue", q)
			continue
		}
		for _, g := range groups {
			for ctx.Err() == nil && a.aggregateOnce(ctx, q, g.Group) {
			}
		}
	}
}

// aggregateOnce aggregates the group if it is ready and reports whether it did.
func (a *aggregator) aggregateOnce(ctx context.Context, q, group string) bool {
	set, err := a.admin.TakeGroup(ctx, broker.TakeGroupParams{Queue: q, Group: group, MaxSize: a.maxSize,
		MaxDelay: a.maxDelay, GracePeriod: a.grace, Lease: aggregationLease})
	if err != nil {
		logCall(a.logger, "take group", err, "queue", q, "group", group)
		return false
	}
	if set == nil {
		return false
	}
	tasks := make([]*Task, len(set.Msgs))
	for k, m := range set.Msgs {
		tasks[k] = NewTask(m.Type, m.Payload)
	}
	t := a.agg.Aggregate(group, tasks)
	if t == nil {
		a.logger.Error("GroupAggregator returned nil; the group's tasks go back to it once the set's lease runs out", "queue", q, "group", group)
		return false
	}
	p, _, err := a.client.prepare(t, []Option{Queue(q)})
	if err != nil {
		a.logger.Error("aggregated task is invalid; the group's tasks go back to it once the set's lease runs out", "queue", q, "group", group, "err", err)
		return false
	}
	p.Msg.GroupKey = "" // the aggregate itself runs at once
	if err := a.admin.FinishAggregation(ctx, set, p.Msg); err != nil {
		if !errors.Is(err, ErrLeaseLost) {
			logCall(a.logger, "finish aggregation", err, "queue", q, "group", group)
		}
		return false
	}
	a.logger.Debug("aggregated group", "queue", q, "group", group, "tasks", len(tasks), "id", p.Msg.ID)
	return true
}
