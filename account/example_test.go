package account_test

import (
	"fmt"

	"github.com/shardwise/shardwise/account"
)

// Parse reads an account from outside text; its String is the same text.
func Example() {
	for _, text := range []string{"42", "042", "alice", "0"} {
		id, err := account.Parse(text)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println("account", id, "key shardwise:dir:{@"+id.String()+"}:s")
	}
	// Output:
	// account 42 key shardwise:dir:{@42}:s
	// account: "042" is not an account: leading zero
	// account: "alice" is not an account: byte 0 is 'a', not a decimal digit
	// account: "0" is not an account: 0 is None, no account
}
