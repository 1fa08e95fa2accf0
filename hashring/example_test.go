package hashring_test

import (
	"fmt"

	"github.com/shardwise/shardwise/hashring"
)

func Example() {
	ring := hashring.New(nil) // nil: the SHA-1 hash the TypeScript ring uses
	for _, node := range []string{"10.0.0.1:6379", "10.0.0.2:6379"} {
		if err := ring.Add(node, 100); err != nil {
			panic(err)
		}
	}
	_ = ring.Add("10.0.0.3:6379", 200) // a bigger box gets twice the share

	leader, _ := ring.Get("user:1")
	fmt.Println("leader:", leader)
	fmt.Println("leader and replica:", ring.GetN("user:1", 2))
	fmt.Println("nodes:", ring.Len(), "points:", ring.Points())
	// Output:
	// leader: 10.0.0.3:6379
	// leader and replica: [10.0.0.3:6379 10.0.0.2:6379]
	// nodes: 3 points: 400
}

func ExampleBoundedLoad() {
	ring := hashring.New(hashring.XXHash) // fast, Go-only placement
	for _, node := range []string{"a", "b", "c"} {
		_ = ring.Add(node, 100)
	}
	loads, _ := hashring.NewBoundedLoad(ring, 1.25)
	// Six sessions for one hot key: the leader takes its fair share, the
	// overflow moves clockwise.
	var placed []string
	for range 6 {
		node, _ := loads.Acquire("hot-key")
		placed = append(placed, node)
	}
	fmt.Println(placed)
	fmt.Println("capacity now:", loads.Capacity())
	// Output:
	// [b c b c b c]
	// capacity now: 3
}
