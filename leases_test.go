package htq

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// expireLease makes the lease of an active task run out now, as if its
// worker had stopped renewing it (by setting its deadline in the active
// set to the epoch), and recovers the task as another server's recoverer
// would.
func expireLease(t *testing.T, st *Storage, queue, id string) {
	t.Helper()
	ctx := context.Background()
	opt, err := rueidis.ParseURL(st.String())
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	key := "htq:{" + queue + "}:active"
	if err := rc.Do(ctx, rc.B().Zadd().Key(key).Xx().ScoreMember().ScoreMember(1, id).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	leases, err := brokerOf(st).ExpiredLeases(ctx, queue, 10)
	if err != nil || len(leases) != 1 || leases[0].Msg.ID != id {
		t.Fatalf("ExpiredLeases = %v, %v", leases, err)
	}
	rec := newRecoverer(brokerOf(st), discardLogger(), newQueueSet(map[string]int{queue: 1}, false), func(int, error, *Task) time.Duration { return time.Hour })
	rec.recover(ctx, leases[0])
}
