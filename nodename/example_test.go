package nodename_test

import (
	"fmt"

	"github.com/shardwise/shardwise/nodename"
)

// Check validates a name where it is read and names the field it came from.
func Example() {
	for _, name := range []string{"zone-a", "Zone-A", ".."} {
		if err := nodename.Check("RegisterConfig.Name", name); err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(name, "is a node name")
	}
	// Output:
	// zone-a is a node name
	// invalid configuration: RegisterConfig.Name = "Zone-A": a node name is made of [a-z0-9._-]; byte 0 is 'Z'
	// invalid configuration: RegisterConfig.Name = "..": a node name must start with a lowercase letter or a digit, not '.'
}
