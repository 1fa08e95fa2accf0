package rendezvous_test

import (
	"fmt"

	"github.com/shardwise/shardwise/rendezvous"
)

func Example() {
	// Every caller with the same list computes the same owner, with no
	// shared state. Same answers as economy-lab's scopeRouter.
	table, err := rendezvous.New([]string{"node-a", "node-b"})
	if err != nil {
		panic(err)
	}
	for _, scope := range []string{"wrld_own_0", "wrld_ds_0", "wrld_ds_2"} {
		fmt.Println(scope, "→", table.Owner(scope))
	}
	fmt.Println(table.TopN("wrld_ds_0", 2))

	_, err = rendezvous.New([]string{"node-a", "node-a"})
	fmt.Println(err)
	// Output:
	// wrld_own_0 → node-a
	// wrld_ds_0 → node-b
	// wrld_ds_2 → node-a
	// [node-b node-a]
	// invalid configuration: nodes[1] = "node-a": duplicates nodes[0]
}

func ExampleNewWeighted() {
	table, _ := rendezvous.NewWeighted([]rendezvous.Weighted{
		{Node: "econ-small", Weight: 1},
		{Node: "econ-big", Weight: 3}, // about three times the scopes
	})
	counts := map[string]int{}
	for i := range 10000 {
		counts[table.Owner(fmt.Sprint("scope-", i))]++
	}
	fmt.Println(counts["econ-big"] > 2*counts["econ-small"])
	// Output: true
}
