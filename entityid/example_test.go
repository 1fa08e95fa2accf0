package entityid_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/entityid"
)

func Example() {
	fc := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 1, 0, time.UTC))
	gen, err := entityid.NewGenerator(entityid.Config{Node: 7, Clock: fc})
	if err != nil {
		panic(err)
	}
	a, _ := gen.Next(context.Background())
	b, _ := gen.Next(context.Background())
	fmt.Println(a.Time().Format(time.RFC3339), a.Node(), a.Seq())
	fmt.Println(b.Node(), b.Seq(), b > a)
	// Output:
	// 2024-01-01T00:00:01Z 7 0
	// 7 1 true
}
