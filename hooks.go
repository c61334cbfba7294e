package htq

import (
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/hooks"
)

func init() {
	hooks.BrokerOf = func(storage any) broker.Broker { return storage.(*Storage).b }
}
