package router_test

import (
	"context"
	"time"

	"github.com/shardwise/shardwise/hashring"
	"github.com/shardwise/shardwise/router"
)

// The API contract of issue 3, checked at compile time: code outside this
// repository compiles against exactly these names and types.
var (
	_ func(router.Node) string                                                                                                 = router.Node.ID
	_ func(router.Options[int]) (*router.Router[int], error)                                                                   = router.New[int]
	_ func(*router.Router[int], context.Context, router.Node) error                                                            = (*router.Router[int]).AddNode
	_ func(*router.Router[int], context.Context, router.Node) error                                                            = (*router.Router[int]).RemoveNode
	_ func(*router.Router[int], router.Node)                                                                                   = (*router.Router[int]).MarkDown
	_ func(*router.Router[int], string) (router.Route[int], error)                                                             = (*router.Router[int]).Route
	_ func(*router.Router[int], string, int) ([]router.Route[int], error)                                                      = (*router.Router[int]).RouteAll
	_ func(*router.Router[int], context.Context, string, func(context.Context, int, router.Node) error) error                  = (*router.Router[int]).Execute
	_ func(*router.Router[int], context.Context, string, func(context.Context, int, router.Node) error) ([]router.Node, error) = (*router.Router[int]).ExecuteAll
	_ func(*router.Router[int]) error                                                                                          = (*router.Router[int]).Close
	_ error                                                                                                                    = router.ErrNoNodes
	_ *error                                                                                                                   = &router.ErrNoNodes // declared as error, not a concrete type

	_ = router.Node{Host: "h", Port: 1, Vnodes: 0}
	_ = router.Retry{MaxRetries: 5, BaseDelay: time.Second, MaxDelay: time.Second}
	_ = router.Health[int]{
		Check:    func(ctx context.Context, c int, n router.Node) error { return nil },
		Interval: time.Second, Timeout: time.Second, FailureThreshold: 2,
	}
	_ = router.Options[int]{
		Connect:        func(ctx context.Context, n router.Node) (int, error) { return 0, nil },
		Disconnect:     func(c int, n router.Node) error { return nil },
		Vnodes:         100,
		Replicas:       3,
		Retry:          (*router.Retry)(nil),
		Health:         (*router.Health[int])(nil),
		ShouldMarkDown: func(err error, n router.Node) bool { return true },
		Hash:           hashring.HashFunc(hashring.SHA1),
	}
	_ = router.Route[int]{Node: router.Node{}, Client: 0}
)
