package chaostest

import (
	"testing"

	"github.com/htqueue/htq/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m, nil) }
