package wire_test

import (
	"fmt"

	"github.com/shardwise/shardwise/zone/internal/wire"
)

// A gateway's frames for two accounts travel as one Forward: the frame both
// accounts receive is sent once.
func Example() {
	out := wire.Forward{
		Fence:  wire.Fence{Lease: 0x694d8c2f7a1b0001, Table: 12},
		Tick:   900,
		Frames: [][]byte{[]byte("pos"), []byte("bag")},
		Accounts: []wire.AccountFrames{
			{Account: 7, Frames: []uint32{0, 1}},
			{Account: 8, Frames: []uint32{0}},
		},
	}
	payload := out.Append(nil) // sent with kind wire.KindForward

	in, err := wire.DecodeForward(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range in.Accounts {
		for _, i := range a.Frames {
			fmt.Printf("account %d: %s\n", a.Account, in.Frames[i])
		}
	}
	_, err = wire.DecodeForward(payload[:len(payload)-1])
	fmt.Println(err)
	// Output:
	// account 7: pos
	// account 7: bag
	// account 8: pos
	// zone/wire: malformed payload: Forward.Accounts[1].Frames at byte 28: count 1 needs at least 1 more bytes, 0 left
}
