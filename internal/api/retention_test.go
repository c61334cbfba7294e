package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/htqueue/htq/internal/model"
)

// TestHTQAddQueueCompletedRetention: HTQ's addQueue takes the queue's
// completed retention as the native API does; a malformed one creates
// nothing.
func TestHTQAddQueueCompletedRetention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		status, data, _ := e.form("/api/addQueue", false, creds(map[string]string{"queue_name": "kept", "type": "timing", "completed_retention_s": "60"}), nil)
		if status != http.StatusOK || string(data) != `{"error_code":0,"message":"添加成功"}` {
			t.Fatalf("addQueue: %d %s", status, data)
		}
		var q model.QueueView
		e.must(http.StatusOK, "GET", "/v1/queues/kept", nil, &q)
		if q.CompletedRetentionS != 60 {
			t.Errorf("completed_retention_s %d, want 60", q.CompletedRetentionS)
		}
		for _, bad := range []string{"-2", "soon", "99999999999"} {
			status, data, _ = e.form("/api/addQueue", false, creds(map[string]string{"queue_name": "bad", "type": "timing", "completed_retention_s": bad}), nil)
			if status != http.StatusOK || !strings.HasPrefix(string(data), `{"error_code":1001,`) {
				t.Errorf("completed_retention_s=%s: %d %s", bad, status, data)
			}
		}
		e.must(http.StatusNotFound, "GET", "/v1/queues/bad", nil, nil)
	})
}
